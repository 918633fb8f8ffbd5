"""Choosing a pack: by version, or the installed SGLang's, or the newest.

Detection reads the installed distribution's metadata and never imports `sglang`: importing
it costs seconds and pulls CUDA libraries, which a server validating its arguments at
start-up cannot afford.
"""

from __future__ import annotations

import re
import warnings
from functools import cache
from importlib import metadata

from meshsat.solver.errors import InputError, MeshsatWarning
from meshsat.solver.packs.pack import Pack
from meshsat.solver.packs.releases import PACKS

_BY_VERSION: dict[str, Pack] = {p.version: p for p in PACKS}
NEWEST: Pack = PACKS[-1]


def known_versions() -> tuple[str, ...]:
    return tuple(_BY_VERSION)


def get_pack(version: str | Pack | None = None) -> Pack:
    """The pack for `version` ("0.5.23"), `"installed"` (the installed SGLang's), or the
    newest for None. An unknown version is an `InputError` listing the known ones."""
    if isinstance(version, Pack):
        return version
    if version is None:
        return NEWEST
    if version == "installed":
        return installed_pack()
    hit = _BY_VERSION.get(version)
    if hit is None:
        raise InputError(
            f"unknown SGLang version {version!r}; known packs: {', '.join(known_versions())} "
            "(or 'installed')"
        )
    return hit


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version))


@cache
def installed_pack() -> Pack:
    """The installed SGLang's pack: the newest pack not newer than it. With no SGLang
    installed, the newest pack; for a release that has no pack of its own, the newest one
    older than it. Either stand-in is said once per process, as a `MeshsatWarning` naming
    the pack used (the answer is cached), since its rules may not be the ones that run."""
    pack, note = _installed()
    if note is not None:
        warnings.warn(note, MeshsatWarning, stacklevel=3)
    return pack


def installed_note() -> str | None:
    """The warning `installed_pack` says once per process (which pack stands in for the
    installed SGLang), or None when the installed release has its own pack: read afresh
    for a caller that owes it to each of its requests (`meshsat serve`)."""
    return _installed()[1]


def _installed() -> tuple[Pack, str | None]:
    try:
        installed = metadata.version("sglang")
    except metadata.PackageNotFoundError:
        note = (
            f"SGLang is not installed here; using the rules of the newest pack, SGLang "
            f"{NEWEST.version} (pass --sglang-version / sglang_version= to choose)"
        )
        return NEWEST, note
    if installed in _BY_VERSION:
        return _BY_VERSION[installed], None
    older = [p for p in PACKS if _key(p.version) <= _key(installed)]
    chosen = older[-1] if older else PACKS[0]
    note = (
        f"meshsat has no rule pack for the installed SGLang {installed}; using the "
        f"{chosen.version} pack"
    )
    return chosen, note
