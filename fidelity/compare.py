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

from meshsat.solver.errors import InputError
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import get_pack, known_versions
from meshsat.solver.validation.validate import validate

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "tests" / "fixtures" / "fidelity"
DISAGREEMENTS = HERE / "disagreements"

# Resolved fields both meshsat (seed vocabulary) and the recorder report.
COMPARED_FIELDS = (
    "tp_size",
    "pp_size",
    "dp_size",
    "attn_dp_size",
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
    "page_size",
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
    "dcp_comm_backend",
    "dcp_replicate_q_proj",
    "load_balance_method",
    "elastic_ep_backend",
)


# The one field meshsat resolves differently from every 0.5.x (see disagreements/).
BUFFER = "expert_distribution_recorder_buffer_size"


def load(version: str, path: Path | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(header, records) of one release's fixture, or of a held-out corpus at `path`."""
    with gzip.open(path or FIXTURES / f"{version}.jsonl.gz", "rt") as fh:
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
    """meshsat's verdict on one record next to SGLang's.

    `meshsat_valid` is the verdict of the rules meshsat files under resolution (the stage
    the recorder ran); `launch_errors` are meshsat's rules from `check_server_args()`, which
    the recorder also ran (`launch_error`); `load_errors` are the launch rules no recorder
    can run (derived widths, the model's weight sharding at load).
    """

    record: dict[str, Any]
    meshsat_valid: bool
    errors: tuple[str, ...]
    first_source: str | None
    first_message: str = ""
    resolved_diff: tuple[str, ...] = ()
    launch_errors: tuple[str, ...] = ()
    load_errors: tuple[str, ...] = ()
    disagreements: list[str] = field(default_factory=list)

    @property
    def disagreement(self) -> str | None:
        return self.disagreements[0] if self.disagreements else None


#: Where a release checks everything in one function (0.4.x), the step names no rule.
INLINE = "__post_init__"


def _first_matches(source: str | None, rec: dict[str, Any], message: str = "") -> bool:
    """meshsat's first violation is the error SGLang stopped at: the same step, or, where
    the release has no step functions (0.4.x), the same error text."""
    step = rec.get("step") or ""
    site_fn = (rec.get("site") or "").rsplit(":", 1)[-1]
    if source is None:
        return step == "argparse"
    if source == INLINE and step == INLINE:
        ours, theirs = _short(message)[:40], _short(rec.get("error") or "")[:40]
        return bool(theirs) and ours.startswith(theirs)
    return source in (step, site_fn) or source.lstrip("_") in (step.lstrip("_"), site_fn)


# Fields whose default SGLang computes from the device (memory, platform) when the user
# leaves them unset; meshsat keeps them unset (None), so they are compared only when set.
PLATFORM_DEFAULTS = frozenset({"chunked_prefill_size"})


def _platform_default(name: str, rec: dict[str, Any], env: Mapping[str, Any]) -> bool:
    return name in PLATFORM_DEFAULTS and env[name] is None and release_config(rec).get(name) is None


#: 0.4.x spellings meshsat reads as its own fields (as its launch-command reader does):
#: --enable-deepep-moe is the DeepEP all-to-all backend, --enable-ep-moe sets ep = tp.
OLD_SPELLINGS = {
    "enable_deepep_moe": ("moe_a2a_backend", "deepep"),
    "enable_ep_moe": ("ep_size", "tp_size"),
}
# meshsat fields the recorder passes as environment variables, not ServerArgs.
ENV_FIELDS = ("env_enable_cp_v2", "env_enable_eplb_balancedness_metric")


def release_config(rec: dict[str, Any]) -> dict[str, Any]:
    """The config as that release's user spelled it (`args`: `--attn-dp-size`, the legacy CP
    flags rewritten, 0.4's `--enable-deepep-moe`, fields the release lacks dropped), in
    meshsat's field names; `config` where the spelling is the same."""
    args = rec.get("args")
    if args is None:
        return dict(rec["config"])
    cfg = {k: v for k, v in args.items() if k not in OLD_SPELLINGS}
    for flag, (name, value) in OLD_SPELLINGS.items():
        if args.get(flag):
            cfg[name] = cfg.get("tp_size", 1) if value == "tp_size" else value
    for name in ENV_FIELDS:
        if name in (rec["config"] or {}):
            cfg[name] = rec["config"][name]
    for name in ("lora_paths", "lora_target_modules"):  # meshsat reads whether any is named
        if name in cfg:
            cfg[name] = bool(cfg[name])
    if "uno_lora_path" in cfg:  # UNO's draft adapter: meshsat reads whether one is given
        cfg["uno_lora_path"] = cfg["uno_lora_path"] is not None
    return cfg


def sglang_resolved(sg: Mapping[str, Any]) -> dict[str, Any]:
    """SGLang's resolved fields in meshsat's spelling. From 0.5.23 `attn_dp_size` is the DP
    attention width and `dp_size` counts replicas (never both > 1); meshsat spells DP
    attention as `enable_dp_attention` with `dp_size` its width."""
    out = dict(sg)
    if "attn_dp_size" in sg:
        attn = sg["attn_dp_size"] > 1
        out["enable_dp_attention"] = attn
        out["dp_size"] = sg["attn_dp_size"] if attn else sg["dp_size"]
    return out


def meshsat_resolved(env: Mapping[str, Any]) -> dict[str, Any]:
    """meshsat's resolved fields, with the attention-DP width SGLang 0.5.23 reports."""
    out = dict(env)
    out["attn_dp_size"] = env["dp_size"] if env["enable_dp_attention"] else 1
    return out


def judge(
    rec: dict[str, Any],
    pack: str = "0.5.19",
    launch_recorded: bool = True,
    spec: ModelSpec | None = None,
) -> Outcome:
    """meshsat's verdict on one recorded config, on the pack of the release recorded.
    `launch_recorded`: the fixture ran `check_server_args()` on accepted configs; `spec`:
    the model facts, where the record's model is not one of `fidelity/models/`."""
    cfg = release_config(rec)
    # The recorder's CUDA machine is an H100 (fidelity/runner.py SM90_CUDA).
    cfg["platform"] = rec.get("platform", "cpu")
    if cfg["platform"] == "cuda":
        cfg["gpu_sm"] = 90
    try:
        facts = spec if spec is not None else model(rec["model"])
        report = validate(Config(**cfg), facts, explain=False, sglang_version=pack)
    except (InputError, ValueError) as exc:
        # Config rejects the value outright: the counterpart of SGLang's argparse.
        out = Outcome(rec, False, ("input",), None)
        if rec["accepted"]:
            out.disagreements.append(f"meshsat-rejects:input:{type(exc).__name__}")
        elif rec.get("step") != "argparse":
            out.disagreements.append(f"first-violation:input!={rec.get('step')}")
        return out
    p = get_pack(pack)
    errors = tuple(v.rule for v in report.violations if p.stage(v.rule) == "resolution")
    later = [v.rule for v in report.violations if p.stage(v.rule) == "launch"]
    launch = tuple(r for r in later if p.by_id[r].source == CHECK_SERVER_ARGS)
    load = tuple(r for r in later if r not in launch)
    first = p.by_id[errors[0]].source if errors else None
    first_message = next(
        (v.message for v in report.violations if p.stage(v.rule) == "resolution"), ""
    )
    out = Outcome(
        rec, not errors, errors, first, first_message, launch_errors=launch, load_errors=load
    )
    if rec["accepted"] and errors:
        out.disagreements.append("meshsat-rejects:" + ",".join(sorted(errors)))
    elif not rec["accepted"] and not errors:
        out.disagreements.append(
            f"sglang-rejects:{rec.get('step')}:{_short(rec.get('error') or '')}"
        )
    elif not rec["accepted"] and not _first_matches(first, rec, first_message):
        # Keyed by the pair of steps: the cause is the order the handlers run in.
        step = rec.get("step")
        if step == "argparse":
            step += ":" + (rec.get("error") or "").split(":")[0].removeprefix("argument ")
        out.disagreements.append(f"first-violation:{first}!={step}")
    elif rec["accepted"]:
        sg_launch = rec.get("launch_error")
        if sg_launch is not None and not launch:
            site = (rec.get("launch_site") or "").rsplit(":", 1)[-1]
            out.disagreements.append(f"launch:sglang-rejects:{site}:{_short(sg_launch)}")
        elif sg_launch is None and launch and launch_recorded:
            out.disagreements.append("launch:meshsat-rejects:" + ",".join(sorted(launch)))
        if load:
            out.disagreements.append("model-load:" + ",".join(sorted(load)))
        env = meshsat_resolved(report.resolved_env)
        sg = sglang_resolved(rec["resolved"])
        diff = tuple(
            f
            for f in COMPARED_FIELDS
            if f in sg and f in env and sg[f] != env[f] and not _platform_default(f, rec, env)
        )
        out.resolved_diff = diff
        if diff:
            out.disagreements.append("resolved:" + ",".join(diff))
    return out


#: The rules meshsat files under `check_server_args()`, which the recorder runs too.
CHECK_SERVER_ARGS = "check_server_args"


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
    #: Configs both accept in resolution whose check_server_args() verdicts agree.
    launch_agree: int = 0
    launch_recorded: bool = False
    #: Configs both accept that meshsat rejects only for a model-load rule (not recordable).
    model_load_only: int = 0
    classes: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[int]] = field(default_factory=dict)


def pack_for(version: str) -> str:
    """The pack a release is judged on: its own where meshsat has one, else the seed's."""
    return version if version in known_versions() else "0.5.19"


def replay(version: str, path: Path | None = None) -> tuple[Table, list[Outcome]]:
    header, records = load(version, path)
    t = Table(version, launch_recorded=bool(header.get("launch_checked")))
    outs = []
    for rec in records:
        o = judge(rec, pack_for(version), t.launch_recorded)
        outs.append(o)
        t.n += 1
        t.sglang_valid += rec["accepted"]
        if rec["accepted"] == o.meshsat_valid:
            t.verdict_agree += 1
            if rec["accepted"]:
                t.both_accept += 1
                t.resolved_agree += not o.resolved_diff
                t.resolved_agree_but_buffer += not (set(o.resolved_diff) - {BUFFER})
                t.launch_agree += (rec.get("launch_error") is None) == (not o.launch_errors)
                t.model_load_only += bool(o.load_errors)
            else:
                t.both_reject += 1
                t.first_agree += _first_matches(o.first_source, rec, o.first_message) or (
                    o.errors == ("input",) and rec.get("step") == "argparse"
                )
        for c in o.disagreements:
            t.classes[c] += 1
            t.examples.setdefault(c, []).append(rec["id"])
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


def _kept_reason(reason: str | None) -> str | None:
    return None if reason in (None, "", "UNEXPLAINED") else reason


def _standing_reason(cls: str, version: str) -> str:
    """The reason every `model-load:` class shares (the recorder cannot load models on
    GPUs); any other new class waits for someone to read its examples."""
    if not cls.startswith("model-load:"):
        return "UNEXPLAINED"
    if cls == "model-load:PD-MOONCAKE-DP-REPLICAS":
        return (
            f"SGLang {version}'s Mooncake KV manager (mooncake/conn.py MooncakeKVManager."
            "__init__) refuses DP replicas without DP attention on a PD server ('If "
            "dp_attention is not enabled, dp size must be 1 in disaggregation mode.'); every "
            "scheduler builds it at start-up, after argument resolution and "
            "check_server_args(), which accept the config, and the recorder builds no "
            "scheduler. The condition and words are the release's own "
            "(tests/test_pd_server_rules.py reads them from its source); meshsat files the "
            "rule as a launch check (stage 'launch'), not counted against the verdict."
        )
    if "TOPO-NODE-GPUS" in cls:
        return (
            "meshsat's TOPO-NODE-GPUS: a multi-node launch whose tp·pp ranks exceed nnodes x "
            "GPUs per node (8 unless told) fails when a rank asks for a GPU its node does not "
            "have. The CPU recorder starts no process, so resolution and check_server_args() "
            "accept it; meshsat files it as a launch check, not counted against the verdict."
        )
    if "TOPO-NODE-RANK" in cls:
        return (
            f"meshsat's TOPO-NODE-RANK: SGLang {version} does not check --node-rank against "
            "--nnodes; a node at or past nnodes starts schedulers for ranks past the world "
            "size, which torch.distributed refuses when the process group forms (gloo: "
            "'rank < size'). The CPU recorder starts no process, so resolution and "
            "check_server_args() accept it; meshsat files it, and any model-load rule beside "
            "it, as a launch check, not counted against the verdict."
        )
    if "DCP-TP-DIV" in cls:
        return (
            f"meshsat's DCP-TP-DIV is SGLang {version}'s own RuntimeError, raised by "
            "initialize_model_parallel when the model runner builds the groups on the GPUs, "
            "after resolution and check_server_args() accepted the config (recorded apart on "
            "a stand-in torch.distributed: fidelity/dcp_groups.py, tests/test_dcp_groups.py). "
            "meshsat files it, and any model-load rule beside it, as a launch check, not "
            "counted against the verdict."
        )
    if "TOPO-DP-REPLICA-GPUS" in cls:
        return (
            f"meshsat's TOPO-DP-REPLICA-GPUS: SGLang {version}'s data-parallel controller "
            "starts replica d at GPU d·tp_size·gpu_id_step, not counting pp_size, so with "
            "pipeline stages two replicas' schedulers share GPUs (the launch placement "
            "recorded in tests/fixtures/placement/). The CPU recorder starts no process, so "
            "resolution and check_server_args() accept it; meshsat files it as a launch "
            "check, not counted against the verdict."
        )
    return (
        f"SGLang {version} checks these only when the model is loaded on the GPUs (derived "
        "MoE-TP width, heads and experts split over ranks, pipeline stages over layers), "
        "which no CPU recorder can run; its argument resolution and check_server_args() "
        "accept the config. meshsat files the rule(s) as launch checks (stage 'launch'); "
        "they are not counted against the verdict."
    )


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
            "reason": _kept_reason(old.get(c, {}).get("reason")) or _standing_reason(c, version),
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
