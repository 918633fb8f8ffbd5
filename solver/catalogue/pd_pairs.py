"""Rules between the servers of a prefill/decode deployment, declared once.

A single server's rules are `Rule`s over one `Config` (the rest of this catalogue). What a
PD deployment needs beyond them holds between servers: a decode server pulls each request's
KV cache from a prefill server, which only works when the two agree on the model, the
transfer backend, the bootstrap port, the KV pages and how their attention ranks map onto
each other; and the router in front must send prefill work to prefill servers. The rule
language has no second server, so these rules are a small table of their own: each has an
id, SGLang's wording where a release has one (else meshsat's, marked by `source`), the
releases it applies in with its severity there, and the fix. `validate_deployment`, the
deployment's `fix` and the JSON document all read this table
(`meshsat.solver.deployment`); docs/disaggregation.md says where each rule comes from.

Release facts (read from each release's `sglang/srt/disaggregation/`):
- 0.4.6.post5, Mooncake (`mooncake/conn.py`, `MooncakeKVReceiver.__init__`): a decode and
  a prefill whose TP size per DP rank differ are refused for non-MLA models; NIXL
  (`nixl/conn.py`, `NixlKVReceiver._get_bootstrap_info_from_server`) refuses a prefill TP
  smaller than the decode's TP per DP rank, MLA or not. Neither compares page sizes or KV
  dtypes: a mismatch corrupts the transfer silently (meshsat's rule, an error, on the pages
  the servers resolve: 1 unless typed, 64 on flashmla, 128 on cutlass_mla).
- 0.5.18, 0.5.19, 0.5.23 (`common/conn.py`, `CommonKVManager.try_ensure_parallel_info` and
  `_resolve_rank_mapping`): page size and KV dtype must match (a RuntimeError naming both).
  The page compared is each side's KV pool's (`kv_args.page_size = token_to_kv_pool.page_size`
  in `disaggregation/prefill.py` and `decode.py`), the page size its server resolved
  (`R-PAGE-SIZE`, `catalogue/page_size.py`): a decode on flashmla runs 64 whatever it typed,
  so it pairs only with a prefill that runs 64 too;
  differing attention TP sizes are allowed (non-MLA logs "Performance is NOT guaranteed");
  decode PP must equal prefill PP or be 1; decode DCP needs an MLA KV pool and a prefill
  without attention CP. fidelity/pd_pairs.py records what each of them says on a grid of
  pairs (tests/fixtures/pd_oracle/), the oracle of tests/test_deployment_oracle.py.
- Every release maps ranks by floor division of the two attention TP sizes, which is only
  a mapping when the larger is a multiple of the smaller (meshsat's rule).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

Severity = Literal["error", "warning"]

#: Release ranges, by what each release's code does (module docstring): a rule applies
#: in every release of its ranges, so a pack added later (0.5.24) is covered by the range
#: its code falls in until someone reads it and says otherwise.
Releases = tuple[tuple[str, Severity], ...]
_OLD = "<=0.4.6.post5"
_NEW = ">=0.5.18"
_ALL = "*"


def _version_key(version: str) -> tuple[int, ...]:
    """ "0.4.6.post5" -> (0, 4, 6, 5): the numbers in order, enough to order SGLang's
    release names (a post release after its release, before the next one)."""
    return tuple(int(n) for n in re.findall(r"\d+", version))


def _in_range(release: str, spec: str) -> bool:
    if spec == "*":
        return True
    if spec.startswith(">="):
        return _version_key(release) >= _version_key(spec[2:])
    if spec.startswith("<="):
        return _version_key(release) <= _version_key(spec[2:])
    return release == spec


@lru_cache(maxsize=1024)
def severity_in(releases: Releases, release: str) -> Severity | None:
    """A rule's severity in `release`: the first range that holds it; None: no such rule.
    Cached: `plan --disagg` asks it for every rule of every layout pair (10^5 pairs), and
    the answer depends only on the two arguments (a handful of tables and releases)."""
    return next((severity for spec, severity in releases if _in_range(release, spec)), None)


#: What a server leaves unset: SGLang's defaults for the facts the pair rules read.
DEFAULT_BACKEND = "mooncake"
DEFAULT_BOOTSTRAP_PORT = 8998
DEFAULT_KV_CACHE_DTYPE = "auto"
DEFAULT_PORT = 30000


@dataclass(frozen=True)
class Side:
    """What the pair rules read of one server: its facts as written (`None`: not known
    here, a shell expansion or a model whose architecture is unknown) and its widths as
    SGLang resolves them."""

    role: str
    model: str | None
    backend: str | None
    bootstrap_port: int | None
    #: The KV page size the server resolves (`R-PAGE-SIZE`: typed, or its attention
    #: back-end's or model's own, else 1); None: not known here (a shell expansion).
    page_size: int | None
    kv_cache_dtype: str | None
    tp: int
    dp: int
    dp_attention: bool
    attn_tp: int
    attn_cp: int
    pp: int
    dcp: int
    mla: bool | None
    #: The server's first line in the script, for messages.
    line: int = 0
    #: --disaggregation-decode-allocation-policy as resolved (0.5.23; "early" before it,
    #: where the flag does not exist).
    allocation_policy: str = "early"


#: A rule's test: True holds, False is broken, None is not decidable from what is known.
Check = Callable[[Side, Side], bool | None]


@dataclass(frozen=True)
class PairRule:
    """A rule between a prefill server `p` and a decode server `d` of one deployment."""

    id: str
    check: Check
    #: SGLang's wording (`source` names the function) or meshsat's; `{p.x}`/`{d.x}` fields.
    message: str
    source: str
    #: (release range, severity): "*", ">=0.5.18", "<=0.4.6.post5" or one release.
    releases: Releases
    hint: str
    #: The decode server's facts the fix sets to the prefill's (the decode side follows:
    #: it is the one that reads the prefill's parallel info at the bootstrap). Empty when
    #: the fix changes the decode's layout instead (`layout_fix`).
    follow: tuple[str, ...] = ()
    #: The fix changes the decode's layout: its attention TP becomes the prefill's.
    layout_fix: bool = False
    #: The `Side` fields `check` reads (of either server); None: any. A planner pairing
    #: thousands of layouts judges one pair of servers per distinct value of these
    #: (`reads_of`); tests/test_disagg_pairing.py holds each rule to what it declares.
    reads: tuple[str, ...] | None = None

    def severity(self, release: str) -> Severity | None:
        return severity_in(self.releases, release)

    def text(self, p: Side, d: Side) -> str:
        return self.message.format(p=p, d=d)


def _same(value_p: object, value_d: object) -> bool | None:
    return None if value_p is None or value_d is None else value_p == value_d


def _same_model(p: Side, d: Side) -> bool | None:
    """The same model: the same `--model-path` text (also the same shell variable), or the
    same last path component (one checkpoint copied to each host: `/mnt/models/X` and
    `/data/X`, or a repository id and its local copy); a path that is an expansion on one
    side only is not decided."""
    if p.model is None or d.model is None:
        return None
    if p.model == d.model:
        return True
    if "$" in p.model or "$" in d.model:
        return None

    def name(path: str) -> str:
        return path.rstrip("/").rsplit("/", 1)[-1].lower()

    return name(p.model) == name(d.model)


def _divides(p: Side, d: Side) -> bool:
    small, large = sorted((p.attn_tp, d.attn_tp))
    return large % small == 0


def _mla(p: Side, d: Side) -> bool | None:
    """Whether the KV pool is MLA: the decode's model, else the prefill's (both serve one
    model, or PD-SAME-MODEL says they do not)."""
    return p.mla if d.mla is None else d.mla


def _non_mla_same_tp(p: Side, d: Side) -> bool | None:
    if p.attn_tp == d.attn_tp:
        return True
    return _mla(p, d)


def _nixl_groups(p: Side, d: Side) -> bool | None:
    """0.4.6.post5's NIXL receiver with DP attention on the decode splits the prefill's
    ranks into groups that start every `d.attn_tp` ranks and hold `p.tp // d.attn_tp` each,
    and takes group `attn_tp_rank`: each decode attention rank needs a whole group (else an
    IndexError, logged, then `assert self.bootstrap_info is not None`)."""
    if p.backend is None:
        return None
    if p.backend != "nixl" or not d.dp_attention or p.tp < d.attn_tp:
        return True  # PD-NIXL-PREFILL-TP says the last
    size = p.tp // d.attn_tp
    starts = range(0, p.tp, d.attn_tp)
    return len(starts) >= d.attn_tp and all(s + size <= p.tp for s in starts[: d.attn_tp])


def _mooncake_non_mla_same_tp(p: Side, d: Side) -> bool | None:
    """0.4.6.post5's check lives in the Mooncake receiver; NIXL has its own (below)."""
    if p.backend is None:
        return None
    return True if p.backend != "mooncake" else _non_mla_same_tp(p, d)


_CONN_05 = "sglang/srt/disaggregation/common/conn.py: CommonKVManager.try_ensure_parallel_info"
_MAPPING_05 = "sglang/srt/disaggregation/common/conn.py: CommonKVManager._resolve_rank_mapping"
_MESHSAT = "meshsat: the prefill/decode pair"

PAIR_RULES: tuple[PairRule, ...] = (
    PairRule(
        "PD-SAME-MODEL",
        _same_model,
        "the prefill server (line {p.line}) serves {p.model} and the decode server (line "
        "{d.line}) {d.model}: the decode would read KV cache computed by another model",
        _MESHSAT,
        ((_ALL, "error"),),
        "give both servers the same --model-path",
        follow=("model",),
        reads=("model",),
    ),
    PairRule(
        "PD-TRANSFER-BACKEND",
        lambda p, d: _same(p.backend, d.backend),
        "the prefill server (line {p.line}) transfers KV with {p.backend} and the decode "
        "server (line {d.line}) with {d.backend}: the two ends of a transfer must speak one "
        "protocol",
        _MESHSAT,
        ((_ALL, "error"),),
        "give both servers the same --disaggregation-transfer-backend",
        follow=("backend",),
        reads=("backend",),
    ),
    PairRule(
        "PD-PAGE-SIZE",
        lambda p, d: _same(p.page_size, d.page_size),
        "Page size mismatch: prefill server has page_size={p.page_size}, but decode server "
        "has page_size={d.page_size}. Both servers must use the same --page-size value.",
        _CONN_05 + " (0.5.18+), on the page sizes the servers resolve; meshsat in "
        "0.4.6.post5, which transfers pages unchecked",
        ((_ALL, "error"),),
        "give both servers the same --page-size; an attention back-end may force its own "
        "(flashmla 64; trtllm_mla 32 or 64; trtllm_mha 16 to 128; DeepSeek V3.2 64), so the "
        "other side must run that page",
        follow=("page_size",),
        reads=("page_size",),
    ),
    PairRule(
        "PD-KV-DTYPE",
        lambda p, d: _same(p.kv_cache_dtype, d.kv_cache_dtype),
        "KV cache dtype mismatch: prefill server has kv_cache_dtype={p.kv_cache_dtype}, but "
        "decode server has kv_cache_dtype={d.kv_cache_dtype}. Both servers must use the "
        "same --kv-cache-dtype value.",
        _CONN_05 + " (0.5.18+); meshsat in 0.4.6.post5, which transfers bytes unchecked",
        ((_ALL, "error"),),
        "give both servers the same --kv-cache-dtype",
        follow=("kv_cache_dtype",),
        reads=("kv_cache_dtype",),
    ),
    PairRule(
        "PD-TP-DIVIDES",
        lambda p, d: _divides(p, d),
        "prefill attention TP {p.attn_tp} and decode attention TP {d.attn_tp}: SGLang maps "
        "ranks by dividing one by the other, which needs the larger to be a multiple of the "
        "smaller",
        "meshsat: " + _MAPPING_05 + " (and 0.4.6.post5's MooncakeKVReceiver.__init__) "
        "divides without checking; a decode rank past the multiple reads no prefill rank",
        ((_ALL, "error"),),
        "make the decode's attention TP (tp_size / dp_size with DP attention) divide or be "
        "a multiple of the prefill's",
        layout_fix=True,
        reads=("attn_tp",),
    ),
    PairRule(
        "PD-TP-NON-MLA",
        _mooncake_non_mla_same_tp,
        "PD with different TP sizes per DP rank is not yet supported for non-MLA models",
        "sglang/srt/disaggregation/mooncake/conn.py: MooncakeKVReceiver.__init__ (0.4.6.post5)",
        ((_OLD, "error"),),
        "give the decode the prefill's attention TP (tp_size / dp_size with DP attention)",
        layout_fix=True,
        reads=("backend", "attn_tp", "mla"),
    ),
    PairRule(
        "PD-TP-NON-MLA-PERF",
        _non_mla_same_tp,
        "Performance is NOT guaranteed when using different TP sizes for non-MLA models.",
        _MAPPING_05,
        ((_NEW, "warning"),),
        "give the decode the prefill's attention TP (tp_size / dp_size with DP attention)",
        layout_fix=True,
        reads=("attn_tp", "mla"),
    ),
    PairRule(
        "PD-NIXL-PREFILL-TP",
        lambda p, d: None if p.backend is None else p.backend != "nixl" or p.tp >= d.attn_tp,
        "Only support Prefill TP size >= Decode TP size of DP, now we have {p.tp} vs {d.attn_tp}",
        "sglang/srt/disaggregation/nixl/conn.py: NixlKVReceiver._get_bootstrap_info_from_server"
        " (0.4.6.post5)",
        ((_OLD, "error"),),
        "give the prefill at least the decode's attention TP, or use Mooncake",
        layout_fix=True,
        reads=("backend", "tp", "attn_tp"),
    ),
    PairRule(
        "PD-NIXL-RANK-GROUPS",
        _nixl_groups,
        "NIXL finds no prefill ranks for some decode attention rank: with DP attention it "
        "groups the prefill's {p.tp} ranks every {d.attn_tp} ranks, {d.attn_tp} groups "
        "needed",
        "sglang/srt/disaggregation/nixl/conn.py: NixlKVReceiver._get_bootstrap_info_from_server"
        " (0.4.6.post5; an IndexError it logs, then `assert self.bootstrap_info is not None`)",
        ((_OLD, "error"),),
        "give the decode attention TP 1 (dp_size = tp_size), or a prefill TP of at least its "
        "square; or use Mooncake",
        layout_fix=True,
        reads=("backend", "dp_attention", "tp", "attn_tp"),
    ),
    PairRule(
        "PD-PP",
        lambda p, d: d.pp in (p.pp, 1),
        "Decode pp size ({d.pp}) should be equal to prefill pp size ({p.pp}) or 1",
        _MAPPING_05,
        ((_NEW, "error"),),
        "give the decode the prefill's --pp-size, or 1",
        layout_fix=True,
        reads=("pp",),
    ),
    PairRule(
        "PD-ALLOCATION-POLICY",
        lambda p, d: p.allocation_policy == d.allocation_policy,
        "Disaggregation decode allocation policy mismatch: prefill={p.allocation_policy}, "
        "decode={d.allocation_policy}. Set --disaggregation-decode-allocation-policy "
        "identically on both roles.",
        "sglang/srt/disaggregation/common/conn.py: CommonKVReceiver.init (0.5.23; the decode "
        "fails every request against the prefill's bootstrap info)",
        ((">=0.5.23", "error"),),
        "give the decode the prefill's --disaggregation-decode-allocation-policy",
        layout_fix=True,
        reads=("allocation_policy",),
    ),
    PairRule(
        "PD-DCP-PREFILL-CP",
        lambda p, d: d.dcp <= 1 or p.attn_cp == 1,
        "PD decode DCP currently requires prefill attention CP=1, got {p.attn_cp}.",
        _CONN_05,
        ((_NEW, "error"),),
        "drop --dcp-size on the decode, or attention CP on the prefill",
        layout_fix=True,
        reads=("dcp", "attn_cp"),
    ),
    PairRule(
        "PD-DCP-MLA",
        lambda p, d: True if d.dcp <= 1 else _mla(p, d),
        "PD decode DCP requires an MLA or hybrid-MLA KV pool.",
        _CONN_05,
        ((_NEW, "error"),),
        "drop --dcp-size on the decode server",
        layout_fix=True,
        reads=("dcp", "mla"),
    ),
)


@lru_cache(maxsize=64)
def reads_of(release: str) -> tuple[str, ...] | None:
    """The `Side` fields the pair rules that are errors in `release` read (None: some
    rule does not say, so any field may matter). Two prefill sides equal on these get the
    same error verdict against every decode side, and likewise for decode sides."""
    fields: set[str] = set()
    for rule in PAIR_RULES:
        if rule.severity(release) == "error":
            if rule.reads is None:
                return None
            fields.update(rule.reads)
    return tuple(sorted(fields))


@dataclass(frozen=True)
class DeploymentRule:
    """A rule about the deployment as a whole or its router: what roles it must hold and
    how the router names the servers. Checked by `meshsat.solver.deployment.rules`, which
    holds one function per id; declared here, with the pair rules, so the rules command,
    the docs table and the JSON all list one table."""

    id: str
    message: str
    source: str
    releases: Releases
    hint: str

    def severity(self, release: str) -> Severity | None:
        return severity_in(self.releases, release)


DEPLOYMENT_RULES: tuple[DeploymentRule, ...] = (
    DeploymentRule(
        "PD-BOTH-ROLES",
        "the deployment has {what}: prefill servers need decode servers to finish their "
        "requests, and decode servers need prefill servers to start them",
        "meshsat: the deployment",
        ((_ALL, "error"),),
        "launch at least one prefill and one decode server (--disaggregation-mode)",
    ),
    DeploymentRule(
        "PD-BOOTSTRAP-PORT",
        "{who} reaches the prefill server on line {line} at bootstrap port {port}, but it "
        "listens on {listens} (--disaggregation-bootstrap-port)",
        "sglang/srt/managers/scheduler.py: a request without a bootstrap port takes the "
        "receiving server's own --disaggregation-bootstrap-port",
        ((_ALL, "error"),),
        "give the router the prefill's bootstrap port after its URL, or give the decode "
        "servers the prefill's --disaggregation-bootstrap-port",
    ),
    DeploymentRule(
        "ROUTER-PD-MODE",
        "the router on line {line} is given prefill/decode servers without "
        "--pd-disaggregation: it would send whole requests to a prefill server",
        "sglang_router.launch_router: --pd-disaggregation",
        ((_ALL, "error"),),
        "add --pd-disaggregation to the router",
    ),
    DeploymentRule(
        "ROUTER-ROLE",
        "the router on line {line} sends {kind} work to {url}, which is the {role} server "
        "launched on line {server}",
        "meshsat: the router's view of the servers",
        ((_ALL, "error"),),
        "list prefill servers after --prefill, decode servers after --decode and "
        "aggregated servers after --worker-urls",
    ),
    DeploymentRule(
        "ROUTER-BOOTSTRAP-PORTS",
        "Number of prefill URLs must match number of bootstrap ports",
        "sglang/srt/disaggregation/mini_lb.py: __main__ (0.4.6.post5)",
        ((_ALL, "error"),),
        "give one --prefill-bootstrap-ports value, or one per --prefill URL",
    ),
    DeploymentRule(
        "ROUTER-REPLICA-URLS",
        "the router on line {line} names the leaders of group(s) {named} of {owner}, which "
        "runs {replicas} group(s) (spec.replicas): {why}",
        "LeaderWorkerSet: group g's leader answers at <lws>-<g>.<lws> (the headless Service "
        "of the LWS's name); sglang_router sends work only to the URLs it is given",
        ((_ALL, "warning"),),
        "give the router one URL per group, <lws>-<g>.<lws> for g in 0..replicas-1, or set "
        "the object's spec.replicas to the groups the router names (a hand-scaled "
        "LeaderWorkerSet needs its router edited too)",
    ),
    DeploymentRule(
        "HOST-GPU-OVERLAP",
        "the {a} server on line {line_a} ({how_a}) and the {b} server on line {line_b} "
        "({how_b}) run on one machine and both take its GPU(s) {shared}: the second to "
        "start fails at memory profiling or runs out of GPU memory",
        "sglang/srt/managers/scheduler.py: each rank takes torch.cuda.set_device(gpu_id) "
        "with the share --mem-fraction-static asks; nothing checks GPUs across servers",
        ((_ALL, "error"),),
        "give each server its own GPUs: CUDA_VISIBLE_DEVICES=... per server "
        "(ASCEND_RT_VISIBLE_DEVICES on Ascend), or --base-gpu-id past the other's last GPU; "
        "servers on separate machines: give each its own --host, or start it with ssh/srun",
    ),
    DeploymentRule(
        "HOST-GPU-UNPLACED",
        "the {a} server on line {line_a} ({how_a}) and the {b} server on line {line_b} "
        "({how_b}) choose no GPUs, so on one machine both take its GPU(s) {shared}: the "
        "second to start fails at memory profiling or runs out of GPU memory",
        "sglang/srt/managers/scheduler.py: each rank takes torch.cuda.set_device(gpu_id) "
        "from --base-gpu-id 0; nothing checks GPUs across servers",
        ((_ALL, "warning"),),
        "on one machine, give each server its own GPUs (CUDA_VISIBLE_DEVICES=... per server, "
        "or --base-gpu-id past the other's last GPU); on separate machines, say so: each its "
        "own --host, or start it with ssh/srun",
    ),
    DeploymentRule(
        "HOST-GPU-COUNT",
        "the {count} servers on one machine ({names}) need {need} GPUs together, but the "
        "machine has {gpus_per_node} (gpus_per_node)",
        "meshsat: the servers of one script on one machine",
        ((_ALL, "warning"),),
        "use fewer or smaller servers on the machine, or start some on another machine "
        "(ssh/srun, or their own --host); give the machine's size with --set gpus_per_node=N",
    ),
    DeploymentRule(
        "HOST-PORT-CLASH",
        "the {a} server on line {line_a} ({what_a} {port}) and the {b} server on line "
        "{line_b} ({what_b} {port}) run on one machine and both bind port {port}: the second "
        "to start fails with [Errno 98] Address already in use",
        "sglang/srt/entrypoints/http_server.py: uvicorn binds --host:--port; "
        "sglang/srt/managers/disagg_service.py: start_disagg_service starts a prefill's "
        "bootstrap server on --host:--disaggregation-bootstrap-port",
        ((_ALL, "error"),),
        "give each server on one machine its own --port, and each prefill server its own "
        "--disaggregation-bootstrap-port (the router then names it after the URL: --prefill "
        "URL PORT); servers on separate machines: give each its own --host, or start it "
        "with ssh/srun",
    ),
    DeploymentRule(
        "ROUTER-TWO-ROLES",
        "the router on line {line} lists {url} after both --prefill and --decode: one server "
        "plays one role (its --disaggregation-mode)",
        "meshsat: the router's view of the servers",
        ((_ALL, "error"),),
        "list each server once, under the role its --disaggregation-mode gives it (a prefill "
        "and a decode server on one machine need their own --port)",
    ),
    DeploymentRule(
        "ROUTER-UNKNOWN-URL",
        "the router on line {line} names {url}, which no server in this script listens on",
        "meshsat: the router's view of the servers",
        ((_ALL, "warning"),),
        "check the URL (servers launched elsewhere are fine)",
    ),
)


def rule_ids() -> tuple[str, ...]:
    """Every deployment rule id, pair rules first."""
    return (*(r.id for r in PAIR_RULES), *(r.id for r in DEPLOYMENT_RULES))


def deployment_rule(rule_id: str) -> DeploymentRule:
    return next(r for r in DEPLOYMENT_RULES if r.id == rule_id)
