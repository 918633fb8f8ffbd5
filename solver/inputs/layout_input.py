"""Where a command's layout comes from, and the layout it reads: one value each.

`LayoutSources` is what the user gave (an example, a file, an SGLang command or script,
`--set`s, a model); `load_layout` merges them in a fixed order (example, then file, then the
SGLang command line, then `--set`) into a `LayoutInput`: the config, the model facts, and the
notes a command prints on stderr. Every command that reads a layout goes through here, so the
merge order and the refusals are the same everywhere.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solver.errors import InputError
from solver.inputs.convert import as_model, coerce, config_from_values
from solver.inputs.files import load_config_file
from solver.inputs.sglang_cmdline import parse_sglang_command
from solver.lang.config import Config
from solver.lang.model_spec import ModelSpec

#: A launch script is a few kilobytes; a larger file is refused before it is read.
MAX_SCRIPT_BYTES = 1 << 20

#: Repository id -> its config.json facts (the embedded model catalogue lives with the memory
#: model, above this layer, so a caller that wants repo ids hands its lookup in).
Catalogue = Callable[[str], Mapping[str, Any]]


@dataclass(frozen=True)
class LayoutSources:
    """The layout inputs as given; every field optional."""

    config: Path | None = None
    sets: tuple[str, ...] = ()
    sglang: str | None = None
    sglang_file: Path | None = None
    model: Path | None = None
    example: str | None = None

    @property
    def given(self) -> bool:
        """Whether any layout input was given (a command may then compare layouts)."""
        return any(
            x is not None
            for x in (self.config, self.sglang, self.sglang_file, self.model, self.example)
        ) or bool(self.sets)


@dataclass(frozen=True)
class LayoutInput:
    """What the sources read: the merged config, model facts, and the notes (ignored flags,
    shell expansions) for stderr. Distinct from `solver.Layout`, an enumerated layout."""

    config: Config
    model: ModelSpec | None
    notes: tuple[str, ...] = field(default=())


def load_layout(sources: LayoutSources, catalogue: Catalogue | None = None) -> LayoutInput:
    """Merge the sources: example, then file, then SGLang command line, then --set."""
    values: dict[str, Any] = {}
    model_facts: Any = None
    notes: list[str] = []
    if sources.example is not None:
        from solver.examples import path_of

        values.update(load_config_file(path_of(sources.example)))
        model_facts = values.pop("model", None) or model_facts
    if sources.config is not None:
        values.update(load_config_file(sources.config))
        model_facts = values.pop("model", None) or model_facts
    if sources.sglang is not None and sources.sglang_file is not None:
        raise InputError("give --sglang or --sglang-file, not both")
    text = _script(sources.sglang_file) if sources.sglang_file is not None else sources.sglang
    if text == "-":
        text = sys.stdin.read(MAX_SCRIPT_BYTES + 1)
    if text is not None:
        parsed = parse_sglang_command(text)
        values.update(parsed.values)
        notes.extend(parsed.notes)
        if parsed.ignored:
            notes.append(
                f"{len(parsed.ignored)} flag(s) that do not concern the layout: "
                + " ".join(parsed.ignored)
            )
        if parsed.unknown_flags:
            notes.append(
                f"{len(parsed.unknown_flags)} flag(s) no SGLang release has (SGLang would "
                "refuse them): " + " ".join(parsed.unknown_flags)
            )
    for item in sources.sets:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise InputError(f"--set expects FIELD=VALUE, got {item!r}")
        key = name.strip().replace("-", "_")
        values[key] = coerce(key, value)
    spec = _model_spec(sources.model, catalogue) if sources.model is not None else None
    if spec is None and model_facts is not None:
        if not isinstance(model_facts, dict):
            raise InputError("the `model:` entry of a layout file must be a mapping")
        spec = as_model(model_facts)
    return LayoutInput(config_from_values(values), spec, tuple(notes))


def _model_spec(model: Path, catalogue: Catalogue | None) -> ModelSpec:
    """A config.json (or its folder), or a repository id of the embedded model catalogue."""
    text = str(model)
    looks_like_repo_id = text.count("/") == 1 and not text.startswith((".", "/", "~"))
    if model.exists() or not looks_like_repo_id or text.endswith(".json") or catalogue is None:
        return ModelSpec.from_file(model)
    return ModelSpec.from_hf_config(catalogue(text))


def _script(path: Path) -> str:
    """A launch script's text: a regular file, bounded in size, UTF-8."""
    try:
        if not path.is_file():
            raise InputError(f"--sglang-file {path}: not a regular file")
        if path.stat().st_size > MAX_SCRIPT_BYTES:
            raise InputError(
                f"--sglang-file {path}: {path.stat().st_size} bytes; a launch script is at most "
                f"{MAX_SCRIPT_BYTES}"
            )
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"--sglang-file {path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"--sglang-file {path}: {exc.strerror}") from None
