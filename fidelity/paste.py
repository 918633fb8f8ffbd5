"""Record what a real release makes of the launch commands meshsat prints.

`meshsat plan`, `fix` and `enumerate --command` print commands for the user to paste
(`meshsat.solver.inputs.command`). Whether such a command launches the layout meshsat
meant is a question for the release, not for meshsat's own reader: this renders the command
of every legal layout of a few recorded models, hands each, as typed words, to the release's
own parser and resolution (`runner.py resolve` with `argv`), and stores the verdict and the
resolved layout in tests/fixtures/pasted/<version>.jsonl.gz, which
`tests/test_launch_command.py` replays without SGLang.

    python -m fidelity.paste 0.5.23

The model path in each command is a repository id; the runner substitutes the recorded
model's local config (offline), the same facts meshsat reads back.
"""

from __future__ import annotations

import gzip
import json
import shlex
import sys
from pathlib import Path
from typing import Any

from fidelity.compare import model
from fidelity.record import FIXTURES, asked_versions, resolve
from meshsat import solver
from meshsat.solver.inputs.command import launch_command
from meshsat.solver.lang.config import Config

#: (recorded model, the repository id a user names it by, GPU count): every legal layout.
SPACES = (
    ("deepseek_v3", "deepseek-ai/DeepSeek-V3", 16),
    ("qwen3_moe", "Qwen/Qwen3-30B-A3B", 8),
    ("llama", "meta-llama/Llama-3.1-8B-Instruct", 8),
)


def fixture_path(version: str) -> Path:
    """Beside, not inside, the argument-resolution records: those are one file per release."""
    return FIXTURES.parent / "pasted" / f"{version}.jsonl.gz"


def split_command(command: str) -> tuple[dict[str, str], list[str]]:
    """(environment, words after the launcher) of a rendered command, as a shell reads it."""
    words = shlex.split(command.split("  #", 1)[0])
    env: dict[str, str] = {}
    while words and "=" in words[0] and not words[0].startswith("-"):
        name, _, value = words.pop(0).partition("=")
        env[name] = value
    launcher = ["python", "-m", "sglang.launch_server"]
    assert words[:3] == launcher, command
    return env, words[3:]


def commands(version: str) -> list[dict[str, Any]]:
    """One item per legal layout of `SPACES`: the model, the enumerated values and the
    command meshsat prints for them on `version`."""
    items: list[dict[str, Any]] = []
    for name, repo, gpus in SPACES:
        for lay in solver.enumerate(gpus, model=model(name), sglang_version=version):
            command = launch_command(Config.model_validate(lay.values), version, model_path=repo)
            items.append({"model": name, "gpus": gpus, "values": lay.values, "command": command})
    return items


def record(version: str) -> Path:
    items = commands(version)
    runs = []
    for i, item in enumerate(items):
        env, argv = split_command(item["command"])
        at = argv.index("--model-path")
        del argv[at : at + 2]  # the runner gives the recorded model's local config
        runs.append({"id": i, "model": item["model"], "argv": argv, "env": env})
    verdicts = resolve(version, runs)
    path = fixture_path(version)
    with gzip.open(path, "wt") as fh:
        fh.write(json.dumps({"sglang": version, "n": len(items)}) + "\n")
        for item, verdict in zip(items, verdicts, strict=True):
            row = {**item, "accepted": verdict["accepted"], "error": verdict["error"]}
            row["resolved"] = verdict["resolved"]
            row["launch_error"] = verdict.get("launch_error")
            fh.write(json.dumps(row, sort_keys=True) + "\n")
    return path


def main(argv: list[str] | None = None) -> int:
    for v in asked_versions(__doc__ or "", argv, cached=False):
        print(record(v))
    return 0


if __name__ == "__main__":
    sys.exit(main())
