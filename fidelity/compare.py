"""Replay recorded SGLang verdicts through meshsat and classify every disagreement.

Used by `tests/test_fidelity_replay.py` (agreement with the recorded verdicts, except the
listed disagreement classes) and `benchmarks/bench_fidelity.py` (the agreement table).
A record disagrees in one of four ways, each with a class key that names the cause
precisely enough to be listed with its reason in `fidelity/disagreements/<version>.json`:

- `meshsat-rejects:<rule ids>`: SGLang accepted, meshsat reported these errors;
- `sglang-rejects:<step>:<error>`: SGLang raised in that step, meshsat accepted;
- `first-violation:<meshsat step>!=<step>`: both reject, meshsat's first error is raised
  by another step than the one SGLang stopped at;
- `resolved:<field>`: both accept, a resolved value differs.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from solver.errors import InputError
from solver.lang.config import Config
from solver.lang.model_spec import ModelSpec
from solver.packs import get_pack, known_versions
from solver.validation.validate import validate

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "tests" / "fixtures" / "fidelity"
DISAGREEMENTS = HERE / "disagreements"

# Resolved fields both meshsat (seed vocabulary) and the recorder report.
COMPARED_FIELDS = (
    "tp_size",
    "pp_size",
    "dp_size",
    "attn_cp_size",
    "moe_dp_size",
    "ep_size",
    "dcp_size",
    "dwdp_size",
    "nnodes",
    "enable_dp_attention",
    "enable_dp_lm_head",
    "enable_prefill_cp",
    "cp_strategy",
    "moe_a2a_backend",
    "moe_dense_tp_size",
    "chunked_prefill_size",
    "schedule_conservativeness",
    "enable_eplb",
    "eplb_algorithm",
    "ep_dispatch_algorithm",
    "expert_distribution_recorder_mode",
    "expert_distribution_recorder_buffer_size",
    "ep_join_mode",
    "elastic_ep_initial_size",
    "disable_cuda_graph",
    "enable_prefill_context_parallel",
    "prefill_cp_mode",
)


# The one field meshsat resolves differently from every 0.5.x (see disagreements/).
BUFFER = "expert_distribution_recorder_buffer_size"


def load(version: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, records) of one release's fixture."""
    with gzip.open(FIXTURES / f"{version}.jsonl.gz", "rt") as fh:
        lines = [json.loads(line) for line in fh if line.strip()]
    return lines[0], lines[1:]


def recorded_versions() -> list[str]:
    return sorted(p.name.removesuffix(".jsonl.gz") for p in FIXTURES.glob("*.jsonl.gz"))


@cache
def model(name: str) -> ModelSpec:
    return ModelSpec.from_file(HERE / "models" / name / "config.json")


def _short(error: str) -> str:
    """An error text with its numbers blanked, so one rule gives one class."""
    return re.sub(r"-?\d+", "N", error.split("\n")[0])[:90]


@dataclass
class Outcome:
    """meshsat's verdict on one record next to SGLang's."""

    record: dict[str, Any]
    meshsat_valid: bool
    errors: tuple[str, ...]
    first_source: str | None
    resolved_diff: tuple[str, ...] = ()
    disagreement: str | None = None


def _first_matches(source: str | None, rec: dict[str, Any]) -> bool:
    step = rec.get("step") or ""
    site_fn = (rec.get("site") or "").rsplit(":", 1)[-1]
    if source is None:
        return step == "argparse"
    return source in (step, site_fn) or source.lstrip("_") in (step.lstrip("_"), site_fn)


# Fields whose default SGLang computes from the device (memory, platform) when the user
# leaves them unset; meshsat keeps them unset (None), so they are compared only when set.
PLATFORM_DEFAULTS = frozenset({"chunked_prefill_size"})


def _platform_default(name: str, rec: dict[str, Any], env: Mapping[str, Any]) -> bool:
    return name in PLATFORM_DEFAULTS and env[name] is None and rec["config"].get(name) is None


def judge(rec: dict[str, Any], pack: str = "0.5.19") -> Outcome:
    """meshsat's verdict on one recorded config, on the pack of the release recorded."""
    cfg = dict(rec["config"])
    cfg["platform"] = "cpu"
    try:
        report = validate(Config(**cfg), model(rec["model"]), explain=False, sglang_version=pack)
    except (InputError, ValueError) as exc:
        # Config rejects the value outright: the counterpart of SGLang's argparse.
        out = Outcome(rec, False, ("input",), None)
        if rec["accepted"]:
            out.disagreement = f"meshsat-rejects:input:{type(exc).__name__}"
        elif rec.get("step") != "argparse":
            out.disagreement = f"first-violation:input!={rec.get('step')}"
        return out
    errors = tuple(v.rule for v in report.violations)
    first = None
    if report.violations:
        first = get_pack(pack).by_id[report.violations[0].rule].source
    out = Outcome(rec, report.valid, errors, first)
    if rec["accepted"] and not report.valid:
        out.disagreement = "meshsat-rejects:" + ",".join(sorted(errors))
    elif not rec["accepted"] and report.valid:
        out.disagreement = f"sglang-rejects:{rec.get('step')}:{_short(rec.get('error') or '')}"
    elif not rec["accepted"] and not _first_matches(first, rec):
        # Keyed by the pair of steps: the cause is the order the handlers run in.
        step = rec.get("step")
        if step == "argparse":
            step += ":" + (rec.get("error") or "").split(":")[0].removeprefix("argument ")
        out.disagreement = f"first-violation:{first}!={step}"
    elif rec["accepted"]:
        env = dict(report.resolved_env)
        sg = rec["resolved"]
        if "attn_dp_size" in sg:
            sg, env = _data_parallel_widths(sg, env, report.derived)
        diff = tuple(
            f
            for f in (*COMPARED_FIELDS, *_WIDTHS)
            if f in sg and f in env and sg[f] != env[f] and not _platform_default(f, rec, env)
        )
        out.resolved_diff = diff
        if diff:
            out.disagreement = "resolved:" + ",".join(diff)
    return out


#: How 0.5.23 and meshsat both say DP attention, compared instead of their spellings.
_WIDTHS = ("attention_dp_groups", "replicas")


def _data_parallel_widths(
    sg: Mapping[str, Any], env: dict[str, Any], derived: Mapping[str, Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """0.5.23 resolves DP attention to `attn_dp_size` groups with `dp_size` counting replicas;
    meshsat keeps its internal spelling (`enable_dp_attention` with `dp_size` groups). The
    two agree when the widths agree: attention-DP groups and replicas."""
    widths = {
        "attention_dp_groups": max(int(sg.get("attn_dp_size") or 1), 1),
        "replicas": int(sg.get("dp_size") or 1),
    }
    sg = {k: v for k, v in sg.items() if k not in ("dp_size", "enable_dp_attention")} | widths
    return sg, env | {"attention_dp_groups": derived["attn_dp"], "replicas": derived["replicas"]}


@dataclass
class Table:
    """Agreement figures for one release."""

    version: str
    n: int = 0
    sglang_valid: int = 0
    verdict_agree: int = 0
    both_accept: int = 0
    resolved_agree: int = 0
    resolved_agree_but_buffer: int = 0
    both_reject: int = 0
    first_agree: int = 0
    classes: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[int]] = field(default_factory=dict)


def pack_for(version: str) -> str:
    """The pack a release is judged on: its own where meshsat has one, else the seed's."""
    return version if version in known_versions() else "0.5.19"


def replay(version: str) -> tuple[Table, list[Outcome]]:
    _, records = load(version)
    t = Table(version)
    outs = []
    for rec in records:
        if rec["config"] is None:
            continue  # a release-only layout (generate.native): nothing for meshsat to judge
        o = judge(rec, pack_for(version))
        outs.append(o)
        t.n += 1
        t.sglang_valid += rec["accepted"]
        if rec["accepted"] == o.meshsat_valid:
            t.verdict_agree += 1
            if rec["accepted"]:
                t.both_accept += 1
                t.resolved_agree += not o.resolved_diff
                t.resolved_agree_but_buffer += not (set(o.resolved_diff) - {BUFFER})
            else:
                t.both_reject += 1
                t.first_agree += _first_matches(o.first_source, rec) or (
                    o.errors == ("input",) and rec.get("step") == "argparse"
                )
        if o.disagreement:
            t.classes[o.disagreement] += 1
            t.examples.setdefault(o.disagreement, []).append(rec["id"])
    return t, outs


def listed(version: str) -> dict[str, dict[str, Any]]:
    """The disagreement classes `fidelity/disagreements/<version>.json` explains."""
    path = DISAGREEMENTS / f"{version}.json"
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {c["class"]: c for c in data["classes"]}


def iter_records(version: str) -> Iterator[dict[str, Any]]:
    yield from load(version)[1]


def write_disagreements(version: str) -> Path:
    """Refresh counts and examples in the disagreement file, keeping the written reasons.

    A class that is new gets the reason "UNEXPLAINED", which the replay test rejects
    until someone has looked at its examples and written what SGLang does differently.
    """
    table, _ = replay(version)
    old = listed(version)
    classes = [
        {
            "class": c,
            "count": n,
            "example_ids": table.examples[c][:5],
            "reason": old.get(c, {}).get("reason", "UNEXPLAINED"),
        }
        for c, n in sorted(table.classes.items(), key=lambda kv: (-kv[1], kv[0]))
    ]
    DISAGREEMENTS.mkdir(exist_ok=True)
    path = DISAGREEMENTS / f"{version}.json"
    path.write_text(json.dumps({"sglang": version, "classes": classes}, indent=1) + "\n")
    return path


if __name__ == "__main__":
    import sys

    for v in sys.argv[1:]:
        print(write_disagreements(v))
