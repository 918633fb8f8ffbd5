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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from meshsat.solver.backends.render import fmt_value
from meshsat.solver.inputs.sglang_cmdline import (
    DEPRECATED,
    ENV_FACTS,
    release_defaults,
    release_flags,
)
from meshsat.solver.inputs.spelling import DP_GROUP, spelled
from meshsat.solver.lang.config import IMPLIED_BY_GPU, Config
from meshsat.solver.lang.fields import CONFIG_SPECS
from meshsat.solver.packs import Pack, get_pack

LAUNCHER = "python -m sglang.launch_server"
_ENV_VARS = {name: var for var, name in ENV_FACTS.items()}


def at_default(name: str, value: Any) -> bool:
    """Whether `value` is meshsat's default for `name` (equal and of one type: `True == 1` is
    a change of type, not the default)."""
    default = CONFIG_SPECS[name].default
    return type(value) is type(default) and value == default


def flag_words(name: str, value: Any, release: str | None = None) -> str:
    """The flag that sets `name` to `value`, as typed; empty where leaving the flag out does
    (meshsat's default, None) or where SGLang has no flag for the field. False is the
    release's `--no-` form where its parser has one (`BooleanOptionalAction`), else empty."""
    spec = CONFIG_SPECS[name]
    if (at_default(name, value) and release is None) or value is None:
        return ""
    if spec.tool_only or not spec.flags:
        return ""
    known = release_flags(release) if release is not None else None
    flag = _spelling(spec.flags, known)
    if flag is None:  # the release has none of the field's flags: an old spelling, or none
        old = [
            f for f, meant in DEPRECATED.items() if meant == (name, value) and f in (known or ())
        ]
        return old[0] if old else ""
    if value is True:
        return flag
    if value is False:
        negated = "--no-" + flag[2:]
        return negated if known is not None and negated in known else ""
    return f"{flag} {shlex.quote(str(value))}"


def _spelling(flags: tuple[str, ...], known: dict[str, int] | None) -> str | None:
    """The field's first flag the release's parser has (a field's spellings span releases:
    0.4.6.post5 has no `--moe-a2a-backend`, 0.5.23 no `--disable-piecewise-cuda-graph`);
    the first flag when the release was not recorded; None when it has none of them."""
    if known is None:
        return flags[0]
    return next((f for f in flags if f in known), None)


def needs_flag(name: str, value: Any, typed: bool, release: str) -> bool:
    """Whether the user must type `name`'s flag for `value` on `release`: the value is not
    meshsat's default, or the user `typed` it and the release's own default differs (0.5.23
    leaves `--dcp-comm-backend` unset and picks a2a on CUDA where meshsat's default reads
    ag_rs: a typed `ag_rs` stays typed)."""
    if not at_default(name, value):
        return True
    defaults = release_defaults(release)
    return typed and name in defaults and defaults[name] != value


#: What precedes the tool-only facts at the end of a command meshsat writes.
FACTS_MARK = "  # not SGLang flags: "


def launch_command(
    config: Config,
    pack: str | Pack | None = None,
    *,
    model_path: str | None = None,
    extra: Sequence[str] = (),
) -> str:
    """The command that launches `config` (the user's input, not a resolved layout) on
    `pack`'s release: environment variables lead, flags for every field `needs_flag` follow
    `--model-path`, then `extra` (flags that are not layout fields, e.g. the
    `--mem-fraction-static` a plan's memory relies on); tool-only facts SGLang has no flag
    for go in a trailing comment (the launch reader skips it). From 0.5.23 on, DP attention
    is spelled `--attn-dp-size N`."""
    release = get_pack(pack)
    spelling = "attn_dp_size" not in release.absent_fields
    values = spelled(config, attn_dp_spelling=spelling)
    typed = config.user_set()
    if spelling and typed & set(DP_GROUP):
        typed |= set(DP_GROUP)
    env: list[str] = []
    flags: list[str] = [] if model_path is None else [f"--model-path {shlex.quote(model_path)}"]
    facts: list[str] = []
    for name in CONFIG_SPECS:
        value = values[name]
        if not needs_flag(name, value, name in typed, release.version):
            continue
        words = flag_words(name, value, release.version)
        if name in _ENV_VARS:
            if value is not None:
                env.append(f"{_ENV_VARS[name]}={1 if value else 0}")
        elif words:
            flags.append(words)
        elif name not in IMPLIED_BY_GPU:  # `--gpu` says it again; no command carries it
            facts.append(f"{name}={fmt_value(value)}")
    line = " ".join([*env, LAUNCHER, *flags, *extra])
    if facts:
        line += FACTS_MARK + " ".join(facts)
    return line


def without_facts(line: str) -> tuple[str, tuple[str, ...]]:
    """`line` without its trailing tool-only facts, and those facts (`name=value` words):
    the command a program runs without a shell, where `#` starts no comment."""
    command, mark, facts = line.partition(FACTS_MARK)
    return command, tuple(facts.split()) if mark else ()


def model_path_of(model: str | Path) -> str:
    """What `--model-path` takes for a `--model` given to meshsat: a checkpoint folder for a
    local `config.json` (SGLang loads the folder), else the path or repository id as given."""
    local = Path(model).expanduser()
    if local.name == "config.json" and local.is_file():
        return str(local.parent)
    return str(model)


#: The router in front of a prefill/decode deployment or of plain DP replicas (the
#: `sglang-router` package).
ROUTER = "python -m sglang_router.launch_router"


def pd_router_command(prefill_urls: list[str], decode_urls: list[str]) -> str:
    """The router of a disaggregated deployment, as SGLang's PD docs write it: one
    `--prefill URL` per prefill server and one `--decode URL` per decode server (bootstrap
    ports and the router's own options at their defaults, so not written)."""
    words = [ROUTER, "--pd-disaggregation"]
    words += [f"--prefill {shlex.quote(u)}" for u in prefill_urls]
    words += [f"--decode {shlex.quote(u)}" for u in decode_urls]
    return " ".join(words)


def worker_router_command(worker_urls: list[str]) -> str:
    """The router in front of independent servers of one model (plain DP replicas): the
    router's regular mode, `--worker-urls URL...` (one flag, any number of URLs)."""
    return " ".join([ROUTER, "--worker-urls", *map(shlex.quote, worker_urls)])
