"""The inputs every layout command takes, declared once (validate, fix, groups, ...)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer

from solver.errors import InputError
from solver.inputs import (
    as_model,
    coerce,
    config_from_values,
    load_config_file,
    parse_sglang_command,
)
from solver.lang.config import Config
from solver.lang.model_spec import ModelSpec

ConfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--config",
        "-c",
        help="Layout file (JSON, YAML or TOML) of field: value pairs; "
        "an optional `model:` entry holds model facts or an HF config.",
        show_default=False,
    ),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        "-s",
        metavar="FIELD=VALUE",
        help="Set one field (repeatable), e.g. --set tp_size=8. `meshsat fields` "
        "lists the fields and their values.",
        show_default=False,
    ),
]
SglangOpt = Annotated[
    str | None,
    typer.Option(
        "--sglang",
        metavar="CMDLINE",
        help='An SGLang launch command as pasted, e.g. "python -m sglang.launch_server --tp 8 '
        '--attn-dp-size 2" (continuations, env prefixes, docker run, redirections are fine); '
        "'-' reads it from standard input. Non-layout flags are listed in one note.",
        show_default=False,
    ),
]
SglangFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--sglang-file",
        metavar="SCRIPT",
        help="A launch script; several launches in it are the nodes of one job, which must "
        "agree on the layout.",
        show_default=False,
    ),
]
#: A launch script is a few kilobytes; a larger file is refused before it is read.
MAX_SCRIPT_BYTES = 1 << 20
ModelOpt = Annotated[
    Path | None,
    typer.Option(
        "--model",
        "-m",
        metavar="CONFIG_JSON",
        help="Hugging Face config.json (or its folder): heads, KV heads, experts and "
        "layers prune layouts.",
        show_default=False,
    ),
]
ExampleOpt = Annotated[
    str | None,
    typer.Option(
        "--example",
        metavar="NAME",
        help="Start from an embedded example (dp-cp-conflict, "
        "deepseek-v3-prefill-cp, qwen3-moe-dp-attention).",
        show_default=False,
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON object on stdout.")]


@dataclass
class LayoutInput:
    """What a command's input options read: the merged config, model facts, and the notes
    (ignored flags, shell expansions) for stderr. Distinct from `solver.Layout`, an
    enumerated layout."""

    config: Config
    model: ModelSpec | None
    notes: list[str] = field(default_factory=list)


def _model_spec(model: Path) -> ModelSpec:
    """A config.json (or its folder), or a repository id of the embedded model catalogue."""
    text = str(model)
    looks_like_repo_id = text.count("/") == 1 and not text.startswith((".", "/", "~"))
    if model.exists() or not looks_like_repo_id or text.endswith(".json"):
        return ModelSpec.from_file(model)
    from solver.memory.models import model_config

    return ModelSpec.from_hf_config(model_config(str(model)))


def _split_model(values: dict[str, Any]) -> Any:
    return values.pop("model", None)


def load_layout(
    config: Path | None = None,
    sets: list[str] | None = None,
    sglang: str | None = None,
    model: Path | None = None,
    example: str | None = None,
    sglang_file: Path | None = None,
) -> LayoutInput:
    """Merge the inputs: example, then file, then SGLang command line, then --set."""
    values: dict[str, Any] = {}
    model_facts: Any = None
    notes: list[str] = []
    if example is not None:
        from solver.examples import path_of

        values.update(load_config_file(path_of(example)))
        model_facts = _split_model(values) or model_facts
    if config is not None:
        values.update(load_config_file(config))
        model_facts = _split_model(values) or model_facts
    if sglang is not None and sglang_file is not None:
        raise InputError("give --sglang or --sglang-file, not both")
    text = _script(sglang_file) if sglang_file is not None else sglang
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
    for item in sets or []:
        name, eq, text = item.partition("=")
        if not eq or not name.strip():
            raise InputError(f"--set expects FIELD=VALUE, got {item!r}")
        key = name.strip().replace("-", "_")
        values[key] = coerce(key, text)
    spec = _model_spec(model) if model is not None else None
    if spec is None and model_facts is not None:
        if not isinstance(model_facts, dict):
            raise InputError("the `model:` entry of a layout file must be a mapping")
        spec = as_model(model_facts)
    return LayoutInput(config_from_values(values), spec, notes)


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


def read_layout(
    config: Path | None = None,
    sets: list[str] | None = None,
    sglang: str | None = None,
    model: Path | None = None,
    example: str | None = None,
    sglang_file: Path | None = None,
) -> LayoutInput:
    """`load_layout` for a command: its input notes (ignored flags) go to stderr."""
    from solver.cli.output import note

    layout = load_layout(config, sets, sglang, model, example, sglang_file)
    for text in layout.notes:
        note(text)
    return layout
