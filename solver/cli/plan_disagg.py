"""`meshsat plan --disagg`: the prefill layout, the decode layout and the P:D worker ratio
that serve the workload fastest per GPU under the SLA, against the best aggregated layout
on the same GPUs, with the commands for every role.

Why its own module: `plan_cmd.py` keeps the options, `plan_perf.py` the aggregated
ranking's presentation; this one turns `meshsat.solver.perf.disagg.plan_disagg`'s answer
into rows, tables, CSV and JSON, and says which of the two deployments wins.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from meshsat import solver
from meshsat.solver.catalogue.pd_pairs import Side, reads_of
from meshsat.solver.cli.emit_options import node_command, reachable
from meshsat.solver.cli.formats import write_csv
from meshsat.solver.cli.node_launch import LaunchCheck, node_size
from meshsat.solver.cli.output import emit_json, note, out
from meshsat.solver.cli.plan_perf import (
    PerfRow,
    Planned,
    clear_progress,
    layout_columns,
    layout_command,
    plan_setup,
    ranked_rows,
    sla_terms,
    terminal_progress,
)
from meshsat.solver.deployment.rules import PLANNED, layout_side, side_errors, side_refused
from meshsat.solver.inputs.command import pd_router_command
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory.gpus import Gpu
from meshsat.solver.packs.registry import get_pack
from meshsat.solver.perf import Workload
from meshsat.solver.perf.accuracy import DISAGG
from meshsat.solver.perf.disagg import (
    DisaggPlan,
    DisaggSearch,
    PairCheck,
    PairVerdict,
    RoleLayout,
    plan_disagg,
)

#: The port each server listens on in the router's URLs (SGLang's default `--port`).
SERVER_PORT = 30000


@dataclass(frozen=True)
class DisaggRow:
    """One disaggregated deployment (plain values, for tables, CSV and JSON)."""

    rank: int
    prefill_layout: str
    decode_layout: str
    prefill_workers: int
    decode_workers: int
    prefill_gpus_per_worker: int
    decode_gpus_per_worker: int
    gpus: int
    concurrency: int
    ttft_ms: float
    tpot_ms: float
    transfer_ms: float
    tokens_per_s_gpu: float
    tokens_per_s_user: float
    prefill_requests_per_s: float
    decode_requests_per_s: float
    meets_sla: bool
    source: str
    prefill_tp: int
    prefill_pp: int
    prefill_dp: int
    prefill_dp_attention: bool
    prefill_ep: int
    prefill_attn_tp: int
    prefill_moe_tp: int
    prefill_attn_cp: int
    prefill_dcp: int
    decode_tp: int
    decode_pp: int
    decode_dp: int
    decode_dp_attention: bool
    decode_ep: int
    decode_attn_tp: int
    decode_moe_tp: int
    decode_attn_cp: int
    decode_dcp: int
    prefill_command: str
    decode_command: str
    router_command: str
    #: Each role server on nodes (`emit_options.node_command`): its nodes and what each
    #: node runs (the command itself on one node; `--nnodes`, NODE_RANK and LEADER_ADDR
    #: across several: a GB200 tray holds 4 GPUs).
    prefill_nodes_per_worker: int
    decode_nodes_per_worker: int
    prefill_node_command: str
    decode_node_command: str


@dataclass(frozen=True)
class Verdict:
    """Which deployment wins on these GPUs, and the sentence that says so."""

    winner: str  # "disaggregated", "aggregated" or "none"
    text: str


def layout_label(config: Mapping[str, Any], derived: Mapping[str, Any]) -> str:
    """A role layout in a few words: `tp8 dp8 dpa ep8` (widths at 1 left out)."""
    c = layout_columns(config, derived)
    words = [f"tp{c['tp']}"]
    words += [f"pp{c['pp']}"] if c["pp"] > 1 else []
    words += [f"dp{c['dp']}"] if c["dp"] > 1 else []
    words += ["dpa"] if c["dp_attention"] else []
    words += [f"ep{c['ep']}"] if c["ep"] > 1 else []
    for key, name in (("attn_cp_size", "cp"), ("dcp_size", "dcp")):
        v = int(config.get(key) or 1)
        words += [f"{name}{v}"] if v > 1 else []
    return " ".join(words)


def router_urls(role: str, workers: int) -> list[str]:
    return [f"http://{role}-{i}:{SERVER_PORT}" for i in range(1, workers + 1)]


def role_command(
    role: RoleLayout,
    model_path: str | None,
    release: str | None,
    given: Mapping[str, Any] | None = None,
    fraction: float | None = None,
) -> str:
    """The server command of one role (`layout_command`; its values carry
    `--disaggregation-mode`)."""
    return layout_command(
        role.values, role.memory, release, model_path=model_path, given=given or {},
        fraction=fraction,
    )  # fmt: skip


def disagg_row(
    rank: int,
    p: DisaggPlan,
    w: Workload,
    model_path: str | None,
    gpus_per_node: int,
    release: str | None = None,
    given: Mapping[str, Any] | None = None,
    fraction: float | None = None,
) -> DisaggRow:
    """One deployment's row, its latencies as `plan` publishes them (`Workload.published`:
    `meets_sla` re-checked from them agrees)."""
    pre, dec = p.prefill, p.decode
    ttft, tpot = w.published(p.ttft_ms, p.tpot_ms)
    pc, dc = layout_columns(pre.config, pre.derived), layout_columns(dec.config, dec.derived)
    commands = {
        role: role_command(lay, model_path, release, given, fraction)
        for role, lay in (("prefill", pre), ("decode", dec))
    }
    nodes = {  # what runs, reachable from the router's host
        role: reachable(
            node_command(commands[role], lay.gpus, gpus_per_node, model_path=model_path)
        )
        for role, lay in (("prefill", pre), ("decode", dec))
    }
    return DisaggRow(
        rank=rank,
        prefill_layout=layout_label(pre.config, pre.derived),
        decode_layout=layout_label(dec.config, dec.derived),
        prefill_workers=p.prefill_workers,
        decode_workers=p.decode_workers,
        prefill_gpus_per_worker=pre.gpus,
        decode_gpus_per_worker=dec.gpus,
        gpus=p.gpus,
        concurrency=p.concurrency,
        ttft_ms=ttft,
        tpot_ms=tpot,
        transfer_ms=round(p.transfer_ms, 2),
        tokens_per_s_gpu=round(p.tokens_per_s_gpu, 1),
        tokens_per_s_user=round(p.tokens_per_s_user, 1),
        prefill_requests_per_s=round(p.prefill_requests_per_s, 2),
        decode_requests_per_s=round(p.decode_requests_per_s, 2),
        meets_sla=p.meets_sla,
        source=p.source,
        # Each role's widths as plan's rows carry them (`layout_columns`).
        **{f"prefill_{k}": v for k, v in pc.items()},
        **{f"decode_{k}": v for k, v in dc.items()},
        prefill_command=commands["prefill"],
        decode_command=commands["decode"],
        router_command=pd_router_command(
            router_urls("prefill", p.prefill_workers), router_urls("decode", p.decode_workers)
        ),
        prefill_nodes_per_worker=nodes["prefill"].nodes,
        decode_nodes_per_worker=nodes["decode"].nodes,
        prefill_node_command=nodes["prefill"].command,
        decode_node_command=nodes["decode"].command,
    )


def disagg_rows(
    model: str | Mapping[str, Any],
    g: Gpu,
    gpus: int,
    w: Workload,
    *,
    engine: str,
    gpus_per_node: int | None,
    top: int,
    sglang_version: str | None = None,
    memory: Mapping[str, Any] | None = None,
    where: Iterable[str] = (),
    progress: Callable[[int, int], None] | None = None,
    model_path: str | None = None,
    quantization: str | None = None,
) -> tuple[list[DisaggRow], DisaggSearch, PerfRow | None]:
    """The `top` best disaggregated deployments on at most `gpus` GPUs, the search's
    counts, and the best aggregated layout on exactly `gpus` GPUs (plan's first row);
    `progress(done, total)` after each role layout, then each aggregated layout shape (it
    may raise to stop: the web page's Cancel; `quantization`: SGLang's `--quantization`, on
    every role's layouts, in the estimate and in the commands)."""
    setup = plan_setup(
        model, g, w, engine=engine, gpus_per_node=gpus_per_node, sglang_version=sglang_version,
        memory=memory, model_path=model_path, quantization=quantization,
    )  # fmt: skip
    given, spec = setup.given, setup.spec

    def role(mode: str) -> Iterable[Any]:
        return solver.enumerate(
            gpus, base={**given, "disaggregation_mode": mode}, model=spec, where=where,
            up_to=True, sglang_version=sglang_version,
        )  # fmt: skip

    # Each role server as launched on nodes, on its own GPU count (values carry its mode).
    per_node = node_size(g, gpus, gpus_per_node)
    launches = LaunchCheck(None, per_node, spec, given, sglang_version, whole=True)
    search = plan_disagg(setup.pm, gpus, role("prefill"), role("decode"), top=top,
                         pair_check=deployment_rules(spec, sglang_version), keep=launches.ok,
                         progress=progress or terminal_progress("role layouts"))  # fmt: skip
    clear_progress()
    rows = [
        disagg_row(
            i, p, w, setup.model_path, per_node, sglang_version, given, setup.pm.memory.fraction
        )
        for i, p in enumerate(search.plans, 1)
    ]
    # The aggregated comparison from the same estimator (one memory model, one setup).
    agg, _ranked, _n = ranked_rows(
        setup, g, gpus, 1, gpus_per_node=gpus_per_node, where=where,
        sglang_version=sglang_version, progress=progress,
    )  # fmt: skip
    return rows, search, agg[0] if agg else None


def deployment_rules(spec: ModelSpec, sglang_version: str | None) -> PairCheck:
    """The pair rules of the release between a planned prefill and decode layout (the
    deployment subsystem's table, the same `validate` applies to a PD script)."""
    return PlannedPairRules(spec, get_pack(sglang_version).version)


class PlannedPairRules:
    """`pair_errors` of planned role layouts, each layout's side built once and each pair
    of distinct sides judged once.

    Why: the search pairs every prefill layout with every decode layout that fits (2.2
    million pairs for DeepSeek-V3 on 256 H200), and `pair_errors` built both sides and
    every rule's severity afresh for each. The rules read only a `Side`, so each
    layout's is built once and each pair of distinct sides judged once; and whether the
    rules refuse a pair reads only a few of its fields (`reads_of`: attention TP, PP,
    CP, DCP, ... in 0.5.23), which `side` keys the layouts by, so `plan_disagg` asks one
    pair of layouts per pair of those keys (some 10^5 at 256 GPUs, not 10^6) and counts
    the layouts behind it (`SidedPairCheck`). One instance serves one search: it keeps
    the layouts it has seen alive (their `id` is the memo's key). Concurrent calls may
    judge a pair twice, never differently."""

    def __init__(self, spec: ModelSpec, release: str) -> None:
        self.spec = spec
        self.release = release
        #: Per role: id of the layout -> (the layout, its side, interned).
        self._of: dict[str, dict[int, tuple[RoleLayout, Side]]] = {"prefill": {}, "decode": {}}
        self._interned: dict[Side, Side] = {}
        #: id of the prefill side -> id of the decode side -> verdict; both interned.
        self._verdicts: dict[int, dict[int, PairVerdict]] = {}
        self._reads = reads_of(release)

    def side(self, layout: RoleLayout, role: str) -> Hashable:
        """What decides whether the rules refuse `layout` as a server of `role` beside
        any other: its `Side`'s fields that the release's error rules read."""
        side = self._side(layout, role)
        if self._reads is None:
            return side
        return tuple(getattr(side, name) for name in self._reads)

    def _side(self, layout: RoleLayout, role: str) -> Side:
        seen = self._of[role]
        hit = seen.get(id(layout))
        if hit is None:
            side = layout_side(role, PLANNED, layout.config, layout.derived, self.spec)
            hit = seen[id(layout)] = (layout, self._interned.setdefault(side, side))
        return hit[1]

    def accepts(self, p: RoleLayout, d: RoleLayout) -> bool:
        return not side_refused(self._side(p, "prefill"), self._side(d, "decode"), self.release)

    def __call__(self, p: RoleLayout, d: RoleLayout) -> PairVerdict:
        ps, ds = self._side(p, "prefill"), self._side(d, "decode")
        row = self._verdicts.get(id(ps))
        if row is None:
            row = self._verdicts.setdefault(id(ps), {})
        verdict = row.get(id(ds))
        if verdict is None:
            errors = side_errors(ps, ds, self.release)
            verdict = row[id(ds)] = PairVerdict(not errors, errors)
        return verdict


def verdict(rows: Sequence[DisaggRow], agg: PerfRow | None, gpus: int) -> Verdict:
    """Disaggregation wins when its best deployment meets the SLA and serves more output
    tokens/s per GPU than the best aggregated layout (or that one misses the SLA)."""
    d = rows[0] if rows else None
    if d is None and agg is None:
        return Verdict("none", f"neither a disaggregated nor an aggregated layout fits {gpus} GPUs")
    if d is None:
        if agg is None or agg.tokens_per_s_gpu <= 0:
            return Verdict("none", f"no deployment on {gpus} GPUs could be estimated")
        return Verdict("aggregated", "aggregation wins: no disaggregated deployment fits")
    a_txt = (
        "no aggregated layout fits"
        if agg is None
        else f"the best aggregated layout (tp{agg.tp} pp{agg.pp} dp{agg.dp}"
        f"{' dpa' if agg.dp_attention else ''} ep{agg.ep}, {gpus} GPUs) gives "
        f"{agg.tokens_per_s_gpu:.1f} tokens/s per GPU"
        f"{'' if agg.meets_sla else ' and misses the SLA'} ({agg.source})"
    )
    d_txt = (
        f"the best disaggregated deployment ({d.prefill_workers} x [{d.prefill_layout}] "
        f"prefill + {d.decode_workers} x [{d.decode_layout}] decode, {d.gpus} GPUs) gives "
        f"{d.tokens_per_s_gpu:.1f}{'' if d.meets_sla else ' and misses the SLA'}"
    )
    d_wins = d.meets_sla and (
        agg is None or not agg.meets_sla or d.tokens_per_s_gpu > agg.tokens_per_s_gpu
    )
    if d_wins:
        gain = (
            ""
            if agg is None or not agg.meets_sla or agg.tokens_per_s_gpu <= 0
            else f" (+{100 * (d.tokens_per_s_gpu / agg.tokens_per_s_gpu - 1):.0f} %)"
        )
        return Verdict("disaggregated", f"disaggregation wins{gain}: {d_txt}; {a_txt}")
    if agg is not None and not agg.meets_sla and not d.meets_sla:
        return Verdict("none", f"neither meets the SLA: {d_txt}; {a_txt}")
    return Verdict("aggregated", f"aggregation wins: {a_txt}; {d_txt}")


def ranking_note(w: Workload) -> str:
    at = "meeting the SLA" if w.limited else "the KV caches hold"
    return (
        f"disaggregated deployments ranked by output tokens/s per GPU at the best concurrency "
        f"{at} ({sla_terms(w)}); x prefill servers and y decode servers with "
        "x*a + y*b <= --gpus; TTFT includes the KV transfer; each row names its source"
    )


def disagg_document(
    rows: Sequence[DisaggRow], search: DisaggSearch, agg: PerfRow | None, w: Workload,
    planned: Planned,
) -> dict[str, Any]:  # fmt: skip
    """`meshsat plan --disagg --format json`'s document (`--gpus` is the most the
    deployments use)."""
    v = verdict(rows, agg, planned.gpus)
    return {
        "ranking": ranking_note(w),
        **asdict(planned),
        "workload": asdict(w),
        "verdict": v.winner,
        "verdict_note": v.text,
        "accuracy": asdict(DISAGG),
        "aggregated_best": None if agg is None else _finite(asdict(agg)),
        "role_layouts": {
            "prefill": search.prefill_layouts,
            "decode": search.decode_layouts,
            "prefill_undominated": search.prefill_kept,
            "decode_undominated": search.decode_kept,
            "pairs_refused_by_pair_rules": search.pairs_refused,
            "deployments_searched": search.deployments,
        },
        "deployments": [_finite(asdict(r)) for r in rows],
    }


def _finite(d: dict[str, Any]) -> dict[str, Any]:
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in d.items()}


def emit(
    rows: Sequence[DisaggRow], search: DisaggSearch, agg: PerfRow | None, fmt: str,
    w: Workload, planned: Planned,
) -> None:  # fmt: skip
    gpus = planned.gpus
    if fmt == "json":
        emit_json(disagg_document(rows, search, agg, w, planned))
        return
    note(ranking_note(w))
    if fmt == "csv":
        write_csv([_finite(asdict(r)) for r in rows], list(DisaggRow.__dataclass_fields__))
        note(DISAGG.text())
        note(verdict(rows, agg, gpus).text)
        return
    out.print(
        "rank  prefill layout        decode layout          x:y   gpus   conc  ttft_ms tpot_ms"
        " tok/s/gpu tok/s/user sla",
        markup=False,
    )
    for r in rows:
        out.print(
            f"{r.rank:>4}  {r.prefill_layout:<20}  {r.decode_layout:<20} "
            f"{f'{r.prefill_workers}:{r.decode_workers}':>5} {r.gpus:>6} {r.concurrency:>6}"
            f" {r.ttft_ms:>8.1f} {r.tpot_ms:>7.2f} {r.tokens_per_s_gpu:>9.1f}"
            f" {r.tokens_per_s_user:>10.1f} {'y' if r.meets_sla else 'n':>3}"
            f"\n      source: {r.source}; KV transfer {r.transfer_ms:.2f} ms of TTFT;"
            f" prefill pool {r.prefill_requests_per_s:.2f} req/s, decode pool"
            f" {r.decode_requests_per_s:.2f} req/s"
            f"\n      {role_line(r, 'prefill')}\n      {role_line(r, 'decode')}"
            f"\n      router: {r.router_command}",
            markup=False,
            soft_wrap=True,
        )
    note(search_note(search))
    note(DISAGG.text())
    note(verdict(rows, agg, gpus).text)


def role_line(r: DisaggRow, role: str) -> str:
    """A role's table line: its servers, GPUs, and the command each node runs (with where
    the per-node variables come from when a server spans nodes)."""
    workers, gpus = getattr(r, f"{role}_workers"), getattr(r, f"{role}_gpus_per_worker")
    nodes, command = getattr(r, f"{role}_nodes_per_worker"), getattr(r, f"{role}_node_command")
    where = "" if nodes == 1 else (
        f", on {nodes} nodes of {gpus // nodes}: NODE_RANK 0..{nodes - 1}, LEADER_ADDR its node 0"
    )  # fmt: skip
    return f"{role} x{workers} ({gpus} GPUs each{where}): {command}"


def none_note(model: str, gpus: int, gpu_name: str) -> str:
    return (
        f"no disaggregated deployment of {model} on {gpus} x {gpu_name}: none fits, or the "
        "GPU has no speeds to estimate with"
    )


def search_note(search: DisaggSearch) -> str:
    """What the search looked at (the table's note; the web page's notes)."""
    return (
        f"{search.prefill_layouts} prefill and {search.decode_layouts} decode role layouts "
        f"estimated once each; {search.prefill_kept} and {search.decode_kept} not dominated; "
        f"{search.deployments} (pair, x, y) deployments searched"
        + (f"; {search.pairs_refused} pairs refused by the pair rules" if search.pairs_refused
           else "")
    )  # fmt: skip
