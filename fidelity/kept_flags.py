"""Record what a real release's parser makes of a pasted command and of the command `fix`
prints for it: every option the fix did not change must parse to the same value.

`meshsat fix --sglang CMD` prints the user's own command with the layout edited
(`meshsat.solver.inputs.rewrite.fixed_command`). Whether the flags it kept still say what
they said is a question for the release's own parser: this builds broken layouts padded with
flags drawn from the release's recorded flag table (`extra_flags`), fixes each, hands both
commands' words to the release's `launch_server` parser (`runner.py parse`) and stores the
two namespaces in tests/fixtures/kept_flags/<version>.jsonl.gz, which
`tests/test_fix_keeps_flags.py` replays without SGLang.

    python -m fidelity.kept_flags 0.5.23
"""

from __future__ import annotations

import gzip
import json
import random
import shlex
import sys
from functools import cache
from pathlib import Path
from typing import Any

from fidelity.record import FIXTURES, _flags, asked_versions, resolve
from meshsat.solver.inputs.layout_input import LayoutSources, load_layout
from meshsat.solver.inputs.memory_flags import MEMORY_FLAGS
from meshsat.solver.inputs.rewrite import fixed_command
from meshsat.solver.inputs.sglang_cmdline import (
    DEPRECATED,
    FLAGS,
    release_choices,
    release_flags,
)
from meshsat.solver.lang.fields import CONFIG_SPECS
from meshsat.solver.packs import get_pack
from meshsat.solver.repair.fix import fix

LAUNCHER = "python -m sglang.launch_server"
#: Broken layouts, as typed (aliases and `=` forms included), each fixed by a change.
BROKEN = (
    "--tp 6 --dp 4 --enable-dp-attention",
    "--tp=8 --attn-cp-size 3",
    "--tensor-parallel-size 16 --ep 3 --moe-dp-size 2",
    "--tp-size 4 --pp-size 3 --dp-size 3 --enable-dp-attention",
)
#: Options the launch reader reads for itself though they set no layout field.
_READ = frozenset({"--model-path", "--model", "--config", "--dist-init-addr", "--device"})


@cache
def extra_flags(version: str) -> tuple[tuple[str, int], ...]:
    """The release's options that set no layout field (what `fix` must keep as typed), with
    how many values each takes (0, 1, 2 for any number). Whether an option sets a layout
    field is the release's word (its `dest`, fidelity/flags/<version>.json), not meshsat's:
    0.5.23's `--attention-data-parallel-size` sets `attn_dp_size`, an alias meshsat's reader
    does not know."""
    table = release_flags(version) or {}
    recorded = _flags(version)
    layout = {
        flag
        for option in recorded["flags"]
        if option["dest"] in CONFIG_SPECS
        for flag in option["flags"]
    }
    return tuple(
        (flag, arity)
        for flag, arity in sorted(table.items())
        if flag not in FLAGS
        and flag not in layout
        and flag not in DEPRECATED
        and flag not in _READ
        # Memory flags meshsat reads as numbers (a random word is refused as input).
        and flag not in MEMORY_FLAGS
        and "--" + flag[5:] not in FLAGS  # `--no-X` of a layout switch
        and flag not in ("--help", "--version")
    )


def padded(base: str, extras: list[str], rng: random.Random) -> str:
    """`base`'s flags with `extras` (typed flag groups) put between them at random."""
    groups = [*_groups(base), *extras]
    head, rest = groups[:1], groups[1:]
    rng.shuffle(rest)
    return " ".join([LAUNCHER, "--model-path", "M", *head, *rest])


def _groups(flags: str) -> list[str]:
    """`--tp 6 --dp=4 --x` -> ['--tp 6', '--dp=4', '--x']."""
    out: list[str] = []
    for word in shlex.split(flags):
        if word.startswith("--") or not out:
            out.append(word)
        else:
            out[-1] += " " + word
    return out


def typed(flag: str, arity: int, version: str, rng: random.Random) -> str:
    """`flag` with values its parser takes: one of its choices, else `1` (an int, a float
    and a string alike); sometimes in the `--flag=value` form."""
    if arity == 0:
        return flag
    choices = release_choices(version).get(flag)
    value = str(rng.choice(choices)) if choices else "1"
    if arity == 2:
        return f"{flag} {value} {value}"
    return f"{flag}={value}" if rng.random() < 0.3 else f"{flag} {value}"


def fixed(command: str, version: str) -> tuple[str, dict[str, Any]]:
    """The command `fix` prints for `command` on `version`, and the fixed layout's values."""
    layout = load_layout(LayoutSources(sglang=command), release=version)
    pack = get_pack(version)
    best = fix(layout.config, layout.model, sglang_version=pack).best
    spelling = "attn_dp_size" not in pack.absent_fields
    assert layout.launch is not None
    line = fixed_command(command, layout.launch, best.config, attn_dp_spelling=spelling)
    return line, best.config.model_dump()


def corpus(version: str, per_base: int = 6, seed: int = 0) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    table = extra_flags(version)
    items: list[dict[str, Any]] = []
    for base in BROKEN:
        for _ in range(per_base):
            extras = [typed(f, a, version, rng) for f, a in rng.sample(table, 8)]
            items.append({"base": base, "command": padded(base, extras, rng)})
    return items


def argv(command: str) -> list[str]:
    """The words after the launcher and its `--model-path` (the runner gives its own)."""
    words = shlex.split(command.split("  #", 1)[0])
    at = words.index("--model-path")
    return words[3:at] + words[at + 2 :]


def fixture_path(version: str) -> Path:
    return FIXTURES.parent / "kept_flags" / f"{version}.jsonl.gz"


def record(version: str) -> Path:
    items = corpus(version)
    runs = []
    for i, item in enumerate(items):
        item["fixed"], _ = fixed(item["command"], version)
        runs.append({"id": 2 * i, "argv": argv(item["command"])})
        runs.append({"id": 2 * i + 1, "argv": argv(item["fixed"])})
    parsed = resolve(version, runs, command="parse")
    path = fixture_path(version)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as fh:
        fh.write(json.dumps({"sglang": version, "n": len(items)}) + "\n")
        for i, item in enumerate(items):
            before, after = parsed[2 * i], parsed[2 * i + 1]
            row = {**item, "input_args": before.get("args"), "input_error": before.get("error")}
            row.update(fixed_args=after.get("args"), fixed_error=after.get("error"))
            fh.write(json.dumps(row, sort_keys=True) + "\n")
    return path


def main(argv_: list[str] | None = None) -> int:
    for v in asked_versions(__doc__ or "", argv_, cached=False):
        print(record(v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
