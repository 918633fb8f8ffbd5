"""SGLang launch command lines, with SGLang's flag spellings and aliases.

Only layout flags are read; the rest (ports, memory fractions, model path, ...) are
collected and reported in one note. Leading `VAR=value` words set the environment
facts SGLang reads (`SGLANG_ENABLE_CP_V2`, the removed balancedness metric variable).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from solver.errors import InputError
from solver.inputs.convert import coerce
from solver.lang.fields import CONFIG_SPECS

#: flag -> field, from the Config declaration (long names, aliases).
FLAGS: dict[str, str] = {flag: name for name, spec in CONFIG_SPECS.items() for flag in spec.flags}
ENV_FACTS = {
    "SGLANG_ENABLE_CP_V2": "env_enable_cp_v2",
    "SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC": "env_enable_eplb_balancedness_metric",
}
_ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


@dataclass
class ParsedCommandLine:
    values: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)


def _is_flag(tok: str) -> bool:
    return tok.startswith("--") and len(tok) > 2


def parse_sglang_command(cmdline: str) -> ParsedCommandLine:
    """Read the layout fields out of an SGLang launch command."""
    try:
        words = shlex.split(cmdline)
    except ValueError as exc:
        raise InputError(f"cannot parse the SGLang command line: {exc}") from None
    out = ParsedCommandLine()
    i = 0
    while i < len(words) and _ENV_WORD.match(words[i]):
        var, _, text = words[i].partition("=")
        if var in ENV_FACTS:
            name = ENV_FACTS[var]
            out.values[name] = True if name.endswith("metric") else coerce(name, text)
        else:
            out.ignored.append(var)
        i += 1
    while i < len(words) and not _is_flag(words[i]):
        i += 1  # program: python -m sglang.launch_server, sglang serve, ...
    if i == len(words) and words:
        raise InputError("the SGLang command line has no --flags")
    while i < len(words):
        tok = words[i]
        if not _is_flag(tok):
            raise InputError(f"unexpected word {tok!r} in the SGLang command line")
        flag, eq, inline = tok.partition("=")
        negated = flag.startswith("--no-") and flag not in FLAGS and "--" + flag[5:] in FLAGS
        found = FLAGS.get("--" + flag[5:] if negated else flag)
        i += 1
        if found is None:
            out.ignored.append(flag)
            while i < len(words) and not _is_flag(words[i]):
                i += 1
            continue
        name = found
        spec = CONFIG_SPECS[name]
        if spec.kind == "bool":
            if eq:
                out.values[name] = coerce(name, inline)
            else:
                out.values[name] = not negated
            continue
        if eq:
            text = inline
        elif i < len(words) and not _is_flag(words[i]):
            text = words[i]
            i += 1
        else:
            raise InputError(f"{flag} expects a value")
        out.values[name] = coerce(name, text)
    return out
