"""Record one SGLang release's verdicts into the repository's fixtures.

    python -m fidelity.record 0.5.23 [--n 6000] [--seed 0]

Builds (or re-checks) the release's venv, dumps its argparse flag table to
`fidelity/flags/<version>.json`, generates configs (`fidelity.generate`), spells them for
the release, runs them through the release's own resolution (`fidelity/runner.py`, inside
that venv) and writes `tests/fixtures/fidelity/<version>.jsonl.gz`: a header line, then one
record per config. `make test` reads only these files, so it never needs SGLang.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from fidelity.generate import configs, native, spell, sweep
from fidelity.targets import targeted

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
FIXTURES = ROOT / "tests" / "fixtures" / "fidelity"
CACHE = Path(os.environ.get("MESHSAT_FIDELITY_CACHE", Path.home() / ".cache" / "meshsat-fidelity"))


# Some choice lists are sets inside SGLang; a fixed hash seed keeps the dumps reproducible.
RUNNER_ENV = {**os.environ, "PYTHONHASHSEED": "0"}


def cached_versions(asked: list[str]) -> list[str]:
    """The releases a recorder was asked for, else every release with a venv in the cache."""
    return asked or sorted(p.name for p in CACHE.iterdir() if (p / "bin").exists())


def asked_versions(doc: str, argv: list[str] | None, *, cached: bool = True) -> list[str]:
    """The releases a recorder's command line names: the `versions` arguments, or with
    `cached` and none given every release with a venv in the cache (`cached_versions`).
    One parser for every recorder, so their command lines read alike."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("versions", nargs="*" if cached else "+")
    asked = list(parser.parse_args(argv).versions)
    return cached_versions(asked) if cached else asked


def new_record(
    rid: int,
    model: str,
    config: dict[str, Any] | None,
    args: dict[str, Any],
    env: dict[str, Any],
    dropped: list[str],
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A fixture record's config part, as the whole corpus and `--append-targets` write it
    (`extra`, the platform or the native mark, right after the config)."""
    rec: dict[str, Any] = {"id": rid, "model": model, "config": config, **(extra or {})}
    if args != config:
        rec["args"] = args
    if env:
        rec["env"] = env
    if dropped:
        rec["dropped"] = dropped
    return rec


def add_verdict(rec: dict[str, Any], v: dict[str, Any]) -> None:
    """A release's verdict on one config, as every fixture record holds it (the whole
    corpus and `--append-targets` write one shape, which the replay reads)."""
    if v["harness_error"]:
        rec["harness_error"] = v["error"]
    rec["accepted"] = v["accepted"]
    if not v["accepted"]:
        rec.update(error=(v["error"] or "")[:160], step=v["step"], site=v["site"])
    else:
        rec["resolved"] = v["resolved"]
        if v.get("launch_error") is not None:
            # Resolution accepted; the launch-time check_server_args() refused.
            rec["launch_error"] = v["launch_error"]
            rec["launch_site"] = v["launch_site"]


def venv_python(version: str) -> Path:
    py = CACHE / version / "bin" / "python"
    if not py.exists():
        subprocess.run(["bash", str(HERE / "setup_venv.sh"), version], check=True)
    return py


def dump_flags(version: str) -> dict[str, Any]:
    out = subprocess.run(
        [str(venv_python(version)), str(HERE / "runner.py"), "flags"],
        check=True,
        capture_output=True,
        text=True,
        env=RUNNER_ENV,
    ).stdout
    table: dict[str, Any] = json.loads(out)
    (HERE / "flags").mkdir(exist_ok=True)
    with open(HERE / "flags" / f"{version}.json", "w") as fh:
        json.dump(table, fh, separators=(",", ":"), sort_keys=True)
        fh.write("\n")
    return table


def _flags(version: str) -> dict[str, Any]:
    table: dict[str, Any] = json.loads((HERE / "flags" / f"{version}.json").read_text())
    return table


def resolve(
    version: str, items: list[dict[str, Any]], command: str = "resolve"
) -> list[dict[str, Any]]:
    """The release's own verdict on each item, from `runner.py resolve` in its venv (with
    `command="parse"`, only the namespace its `launch_server` parser makes of `argv`)."""
    proc = subprocess.run(
        [str(venv_python(version)), str(HERE / "runner.py"), command],
        input="".join(json.dumps(x) + "\n" for x in items),
        capture_output=True,
        text=True,
        check=True,
        env=RUNNER_ENV,
    )
    verdicts = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(verdicts) == len(items), (len(verdicts), proc.stderr[-2000:])
    return verdicts


#: The share of records resolved as on a CUDA machine, where the release can be told so.
CUDA_SHARE = 0.35


def record(version: str, n: int, seed: int, n_native: int = 600, out: Path | None = None) -> Path:
    """Record the release's verdicts; `out` elsewhere than the fixture for a held-out
    corpus (another seed), which the fixtures never see."""
    table = dump_flags(version) if out is None else _flags(version)
    fields = frozenset(table["fields"])
    items: list[dict[str, Any]] = []
    meta: list[tuple[str, dict[str, Any] | None, dict[str, Any], dict[str, Any], list[str]]] = []
    cuda = random.Random(seed + 7)
    on_cuda = "attn_dp_size" in fields  # 0.5.23 reads the machine through one context
    for i, (model, cfg) in enumerate([*configs(n, seed), *sweep(table, seed + 3)]):
        args, env, dropped = spell(version, cfg, fields)
        items.append({"id": i, "model": model, "args": args, "env": env})
        meta.append((model, cfg, args, env, dropped))
    for model, args in native(n_native, fields, seed + 1):
        items.append({"id": len(items), "model": model, "args": args, "env": {}})
        meta.append((model, None, args, {}, []))
    for item in items:
        if on_cuda and cuda.random() < CUDA_SHARE:
            item["platform"] = "cuda"
    n_random = len(items)
    n_swept = sum(1 for _ in sweep(table, seed + 3))
    targets: dict[int, str] = {}
    for rule, model, cfg, args, env, dropped in targeted(version, fields):
        targets[len(items)] = rule
        items.append({"id": len(items), "model": model, "args": args, "env": env})
        meta.append((model, cfg, args, env, dropped))
    total = len(items)
    t0 = time.perf_counter()
    verdicts = resolve(version, items)
    secs = time.perf_counter() - t0
    FIXTURES.mkdir(parents=True, exist_ok=True)
    path = out or FIXTURES / f"{version}.jsonl.gz"
    header = {
        "sglang": table["sglang"],
        "resolution": table["resolution"],
        "n": total,
        "native": n_random - n - n_swept,
        "swept": n_swept,
        "targeted": total - n_random,
        "seed": seed,
        "platform": "cpu" if not on_cuda else f"cpu, and cuda (SM90) on {CUDA_SHARE:.0%}",
        "recorded_by": "python -m fidelity.record",
        "resolve_seconds": round(secs, 1),
        # Accepted configs also ran check_server_args() (launch_error where it refused).
        "launch_checked": True,
    }
    with gzip.open(path, "wt", compresslevel=9) as fh:
        fh.write(json.dumps(header, separators=(",", ":")) + "\n")
        for (model, config, args, env, dropped), v in zip(meta, verdicts, strict=True):
            extra: dict[str, Any] = {}
            if items[v["id"]].get("platform"):
                extra["platform"] = items[v["id"]]["platform"]
            if config is None:
                extra["native"] = True  # release-only layout: no meshsat spelling
            rec = new_record(v["id"], model, config, args, env, dropped, extra)
            if v["id"] in targets:
                rec["target"] = targets[v["id"]]  # aimed at this rule (fidelity/targets.py)
            add_verdict(rec, v)
            fh.write(json.dumps(rec, separators=(",", ":")) + "\n")
    ok = sum(v["accepted"] for v in verdicts)
    print(f"{version}: {total} configs, {ok} accepted ({100 * ok / total:.1f} %), {secs:.0f} s")
    return path


def append_targets(version: str, rules: frozenset[str]) -> Path:
    """Append targeted records for `rules` (rules added to the pack after the fixture was
    recorded) to the release's fixture, numbered after its last record, without drawing
    the corpus again: every existing record, and its id, stays as recorded. The header's
    counts are updated and `appended` names the rules."""
    table = _flags(version)
    fields = frozenset(table["fields"])
    path = FIXTURES / f"{version}.jsonl.gz"
    with gzip.open(path, "rt") as fh:
        lines = fh.read().splitlines()
    header = json.loads(lines[0])
    old = {
        (
            r.get("target"),
            r["model"],
            json.dumps(r["args"] if "args" in r else r["config"], sort_keys=True),
        )
        for r in map(json.loads, lines[1:])
    }
    start = 1 + max(json.loads(line)["id"] for line in lines[1:])
    items: list[dict[str, Any]] = []
    meta: list[tuple[str, str, dict[str, Any], dict[str, Any], dict[str, Any], list[str]]] = []
    for rule, model, cfg, args, env, dropped in targeted(version, fields, rules=rules):
        if (rule, model, json.dumps(args, sort_keys=True)) in old:
            continue
        items.append({"id": start + len(items), "model": model, "args": args, "env": env})
        meta.append((rule, model, cfg, args, env, dropped))
    verdicts = resolve(version, items)
    out = list(lines[1:])
    for (rule, model, config, args, env, dropped), v in zip(meta, verdicts, strict=True):
        rec = new_record(v["id"], model, config, args, env, dropped)
        rec["target"] = rule
        add_verdict(rec, v)
        out.append(json.dumps(rec, separators=(",", ":")))
    header["n"] += len(items)
    header["targeted"] += len(items)
    header["appended"] = sorted({*header.get("appended", ()), *rules})
    with gzip.open(path, "wt", compresslevel=9) as fh:
        fh.write(json.dumps(header, separators=(",", ":")) + "\n")
        fh.write("".join(line + "\n" for line in out))
    ok = sum(v["accepted"] for v in verdicts)
    print(f"{version}: {len(items)} targeted records appended, {ok} accepted")
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("versions", nargs="+")
    ap.add_argument("--n", type=int, default=6000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, help="write here, not the fixture (held-out corpus)")
    ap.add_argument(
        "--append-targets",
        metavar="RULE",
        nargs="+",
        help="only append targeted records for these rules to the existing fixture",
    )
    a = ap.parse_args(argv)
    for v in a.versions:
        if a.append_targets:
            append_targets(v, frozenset(a.append_targets))
        else:
            record(v, a.n, a.seed, out=a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
