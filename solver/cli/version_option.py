"""`--sglang-version`: which release's rules a command runs on, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

from meshsat.solver.packs import Pack, get_pack, known_versions

SglangVersionOpt = Annotated[
    str | None,
    typer.Option(
        "--sglang-version",
        "-V",
        metavar="VERSION",
        help=f"SGLang release whose rules apply: {', '.join(known_versions())}, or "
        "'installed' (the SGLang in this environment). Default: the newest.",
        show_default=False,
    ),
]


def chosen_pack(version: str | None) -> Pack:
    """The pack for the option's value; an unknown version exits 2 listing the known ones."""
    return get_pack(version)
