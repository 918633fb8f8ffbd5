"""Record what the real SGLang launch does with meshsat's plugin installed.

    make plugin-venv                       # $HOME/.cache/meshsat-plugin/0.5.23, meshsat installed
    PYTHONPATH=. python -m fidelity.plugin_launch 0.5.23

Each case runs `python -m sglang.launch_server ...` (or `sglang serve ...`) in the plugin
venv, on CPU, from the repository root, and keeps: the exit status, meshsat's lines, the
last line of SGLang's own traceback, and how far SGLang got: `stopped-by-meshsat` (no
traceback), `resolution-error` (SGLang's argument resolution raised: a frame in
`resolve_once` or `arg_groups/`), `past-resolution` (it raised later: on this CPU-only
venv, importing the HTTP server or building the model, not the arguments). The venv is
separate from the fidelity venvs (`$HOME/.cache/meshsat-fidelity/`), whose recordings an
installed plugin would change. `fidelity/cpu_site` (on PYTHONPATH) is the torchvision
stand-in resolution needs on CPU. `tests/test_sglang_plugin.py` replays the record.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "plugin"
CACHE = Path(os.environ.get("MESHSAT_PLUGIN_CACHE", Path.home() / ".cache" / "meshsat-plugin"))
MODELS = "fidelity/models"


@dataclass(frozen=True)
class Case:
    id: str
    launcher: str  # "launch_server" or "serve"
    argv: tuple[str, ...]
    mode: str | None  # MESHSAT_SGLANG, None: unset (the default)


def _m(name: str) -> tuple[str, str]:
    return ("--model-path", f"{MODELS}/{name}")


CPU = ("--device", "cpu")
INVALID_CP = (*_m("deepseek_v3"), "--tp", "8", "--attn-dp-size", "3", "--attn-cp-size", "3", *CPU)
VALID_DPA = (*_m("deepseek_v3"), "--tp", "8", "--attn-dp-size", "2", *CPU)
#: Valid for SGLang's argument resolution; the model's 32 heads do not split over 3 ranks,
#: which SGLang finds only when it builds the model.
MODEL_HEADS = (*_m("llama"), "--tp", "3", *CPU)
INVALID_EP = (*_m("qwen3_moe"), "--tp", "8", "--ep", "6", *CPU)
CONFIG_FILE = "fidelity/plugin_config.yaml"

CASES: tuple[Case, ...] = (
    Case("invalid-cp-default", "launch_server", INVALID_CP, None),
    Case("invalid-cp-off", "launch_server", INVALID_CP, "off"),
    Case("invalid-cp-warn", "launch_server", INVALID_CP, "warn"),
    Case("valid-dpa-default", "launch_server", VALID_DPA, None),
    Case("valid-dpa-off", "launch_server", VALID_DPA, "off"),
    Case("model-heads-enforce", "launch_server", MODEL_HEADS, "enforce"),
    Case("model-heads-off", "launch_server", MODEL_HEADS, "off"),
    Case("invalid-ep-serve", "serve", INVALID_EP, None),
    Case("valid-dpa-serve", "serve", VALID_DPA, None),
    Case("invalid-config-file", "launch_server", (*_m("llama"), "--config", CONFIG_FILE), None),
)


@dataclass(frozen=True)
class Outcome:
    id: str
    launcher: str
    argv: list[str]
    mode: str | None
    rc: int
    meshsat: list[str]
    sglang_error: str | None
    stage: str
    seconds: float


_FRAME = re.compile(r'^\s*File "([^"]+)", line \d+, in (\S+)')
_MS = re.compile(r"checked in [0-9.]+ ms")


def _stage(rc: int, lines: list[str]) -> tuple[str, str | None]:
    if "Traceback (most recent call last):" not in lines:
        return ("stopped-by-meshsat" if rc else "exited-cleanly"), None
    start = len(lines) - 1 - lines[::-1].index("Traceback (most recent call last):")
    frames = [m.groups() for line in lines[start:] if (m := _FRAME.match(line))]
    error = next((x for x in reversed(lines) if x and not x.startswith(" ")), None)
    in_resolution = any(func == "resolve_once" or "/arg_groups/" in path for path, func in frames)
    return ("resolution-error" if in_resolution else "past-resolution"), error


def run_case(case: Case, venv: Path, timeout: float) -> Outcome:
    program = (
        [str(venv / "bin" / "python"), "-m", "sglang.launch_server"]
        if case.launcher == "launch_server"
        else [str(venv / "bin" / "sglang"), "serve"]
    )
    env = {k: v for k, v in os.environ.items() if k not in ("MESHSAT_SGLANG", "PYTHONPATH")}
    env.update(PYTHONPATH=str(ROOT / "fidelity" / "cpu_site"), HF_HUB_OFFLINE="1")
    if case.mode is not None:
        env["MESHSAT_SGLANG"] = case.mode
    started = time.perf_counter()
    proc = subprocess.run(
        [*program, *case.argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    seconds = time.perf_counter() - started
    lines = (proc.stdout + proc.stderr).splitlines()
    stage, error = _stage(proc.returncode, lines)
    meshsat: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("[meshsat]"):
            meshsat.append(_MS.sub("checked in _ ms", line))
            meshsat += [x for x in _following(lines, i + 1)]
    return Outcome(
        case.id,
        case.launcher,
        list(case.argv),
        case.mode,
        proc.returncode,
        meshsat,
        error,
        stage,
        round(seconds, 1),
    )


def _following(lines: list[str], i: int) -> list[str]:
    """The indented lines that continue one meshsat message."""
    out = []
    while i < len(lines) and lines[i].startswith("  "):
        out.append(lines[i])
        i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("versions", nargs="+")
    ap.add_argument("--timeout", type=float, default=300.0)
    args = ap.parse_args(argv)
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for version in args.versions:
        venv = CACHE / version
        if not (venv / "bin" / "python").exists():
            print(f"no plugin venv at {venv}: run `make plugin-venv`", file=sys.stderr)
            return 2
        outcomes = []
        for case in CASES:
            outcome = run_case(case, venv, args.timeout)
            print(f"{version} {case.id}: rc={outcome.rc} {outcome.stage}", file=sys.stderr)
            outcomes.append(asdict(outcome))
        record = {"sglang": version, "cases": outcomes}
        path = FIXTURES / f"{version}.json"
        path.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
