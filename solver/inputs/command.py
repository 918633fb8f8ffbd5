"""A layout as the launch command a user pastes: the one renderer `plan`, `fix`,
`enumerate --command` and `validate --rewrite` share.

What the user must type and nothing else: the model (`--model-path`, which SGLang requires),
then a flag for each field the user's input sets away from the release's default, in that
release's spelling (`meshsat.solver.inputs.spelling`). Callers pass the input, never the
resolved layout: a value SGLang sets by itself (`--expert-distribution-recorder-buffer-size
1000`, `SGLANG_ENABLE_CP_V2=1` on DeepSeek models) is resolution's output, and typing it is
noise at best and, where SGLang asks "was this flag given?", a different launch.
`tests/test_launch_command.py` reads every rendered command back through the launch reader
and checks it against the releases' recorded flag defaults and resolutions.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from meshsat.solver.backends.render import fmt_value
from meshsat.solver.inputs.sglang_cmdline import ENV_FACTS
from meshsat.solver.inputs.spelling import spelled
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.fields import CONFIG_SPECS
from meshsat.solver.packs import Pack, get_pack

LAUNCHER = "python -m sglang.launch_server"
_ENV_VARS = {name: var for var, name in ENV_FACTS.items()}


def at_default(name: str, value: Any) -> bool:
    """Whether leaving `name`'s flag out gives `value` (equal and of one type: `True == 1`
    is a change of type, not the default)."""
    default = CONFIG_SPECS[name].default
    return type(value) is type(default) and value == default


def flag_words(name: str, value: Any) -> str:
    """The flag that sets `name` to `value`, as typed; empty where leaving the flag out does
    (the default, None, false) or where SGLang has no flag for the field."""
    spec = CONFIG_SPECS[name]
    if at_default(name, value) or value is None or value is False:
        return ""
    if spec.tool_only or not spec.flags:
        return ""
    if value is True:
        return spec.flags[0]
    return f"{spec.flags[0]} {shlex.quote(str(value))}"


def launch_command(
    config: Config, pack: str | Pack | None = None, *, model_path: str | None = None
) -> str:
    """The command that launches `config` (the user's input, not a resolved layout) on
    `pack`'s release: environment variables lead, flags for every non-default field follow
    `--model-path`; tool-only facts SGLang has no flag for go in a trailing comment (the
    launch reader skips it). From 0.5.23 on, DP attention is spelled `--attn-dp-size N`."""
    values = spelled(config, attn_dp_spelling="attn_dp_size" not in get_pack(pack).absent_fields)
    env: list[str] = []
    flags: list[str] = [] if model_path is None else [f"--model-path {shlex.quote(model_path)}"]
    facts: list[str] = []
    for name, spec in CONFIG_SPECS.items():
        value = values[name]
        if at_default(name, value):
            continue
        if name in _ENV_VARS:
            if value is not None:
                env.append(f"{_ENV_VARS[name]}={1 if value else 0}")
        elif spec.tool_only or not spec.flags or value is None or value is False:
            facts.append(f"{name}={fmt_value(value)}")
        else:
            flags.append(flag_words(name, value))
    line = " ".join([*env, LAUNCHER, *flags])
    if facts:
        line += "  # not SGLang flags: " + " ".join(facts)
    return line


def model_path_of(model: str | Path) -> str:
    """What `--model-path` takes for a `--model` given to meshsat: a checkpoint folder for a
    local `config.json` (SGLang loads the folder), else the path or repository id as given."""
    local = Path(model).expanduser()
    if local.name == "config.json" and local.is_file():
        return str(local.parent)
    return str(model)
