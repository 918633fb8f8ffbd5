"""A transparent roofline of one prefill pass and one decode step, from the model facts,
the GPU's datasheet speeds and the layout's widths: the estimate where AIConfigurator has
no data or cannot express the layout (context parallelism, DWDP, AMD GPUs, ...).

Assumptions (docs/perf.md lists them with their effect):
- a pass costs max(compute, memory) per rank plus communication, with compute at
  `MFU` of the dense tensor-core peak of the weights' type and memory at `MBU` of HBM;
- memory: the rank's weights are read once per pass (routed experts only as far as the
  batch's tokens touch them) and the KV cache of every request in the batch once per step;
- FLOPs: 2 per active parameter per token on the rank, plus attention (4·ctx·heads·dim per
  token, causal halving in prefill);
- attention CP and decode CP split the tokens / the KV read over their width and add one
  all-gather of the KV per layer; attention DP splits the batch;
- communication: a ring all-reduce over attention TP twice per layer (2·(n-1)/n of the
  activation bytes), the EP all-to-all (dispatch + combine of top-k copies of each token's
  hidden state), PP sends of the activations between stages; each collective also costs
  `COLLECTIVE_US` of latency; NVLink inside the scale-up domain, the NIC across it;
- `STEP_OVERHEAD_MS` of scheduling and launch per pass (CUDA graphs in decode);
- pipeline parallelism: every figure above is one stage's (its layers); a token crosses the
  `pp` stages in turn, so a decode step of `b` requests runs as min(b, pp) micro-batches of
  b / m requests, each taking `pp` stage times per token, and a prefill pass of `n` prompts
  as m = min(n, pp) micro-batches through the pipeline, (m + pp - 1) stage times.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from meshsat.solver.memory.facts import ModelFacts
from meshsat.solver.memory.gpus import Gpu
from meshsat.solver.memory.kv import layer_kv_bytes
from meshsat.solver.memory.layout import Parallel
from meshsat.solver.memory.weights import WeightModel

MFU = 0.5
MBU = 0.75
COLLECTIVE_US = 10.0
STEP_OVERHEAD_MS = 1.0
#: Bytes per activation element on the wire (bf16).
ACT_BYTES = 2.0


@dataclass(frozen=True)
class RooflineSteps:
    """Step latencies (ms) of one layout by the roofline; `label` names the source."""

    facts: ModelFacts
    p: Parallel
    gpu: Gpu
    gpus_per_node: int
    weight_bytes: float
    kv_cache_dtype: str | None = None
    label: str = "roofline"
    #: Per-layout constants (see `__post_init__`).
    _c: tuple[float, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        # Per-layout constants, computed once: a plan evaluates thousands of passes.
        f, p = self.facts, self.p
        layers = f.num_layers / p.pp
        kv = layer_kv_bytes(f, p.attn_tp, self.kv_cache_dtype, dcp=p.dcp) * layers
        object.__setattr__(self, "_c", (
            self._active_params_per_rank(),
            self._all_expert_bytes(),
            kv,
            self._flops_per_s(),
            self.gpu.hbm_tbps * 1e12 * MBU,
            layers,
        ))  # fmt: skip

    @classmethod
    def of(
        cls,
        facts: ModelFacts,
        p: Parallel,
        gpu: Gpu,
        gpus_per_node: int,
        kv_cache_dtype: str | None = None,
        weights: WeightModel | None = None,
    ) -> RooflineSteps:
        """`weights`: the model's `WeightModel(facts, gpu)` when the caller keeps one (it
        holds per-model constants and caches: a plan asks thousands of layouts)."""
        w = (weights or WeightModel(facts, gpu)).per_rank(p)
        return cls(facts, p, gpu, gpus_per_node, w, kv_cache_dtype)

    def layout_inputs(self) -> tuple[Any, ...]:
        """What of the layout the step latencies read: its widths but the replicas, MoE DP
        and the chunk size, its weight bytes, the node size and the KV dtype. Two
        `RooflineSteps` of one model on one GPU type equal here answer alike, which lets
        a planner share them (`disagg.RoleCosts`: DeepSeek-V3 on 256 H200 has 15,944
        roofline role layouts and 6,641 distinct inputs); tests/test_disagg_pairing.py
        holds it to the answers."""
        p = self.p
        widths = (p.tp, p.pp, p.attn_tp, p.attn_dp, p.attn_cp, p.ep, p.moe_tp, p.dcp)
        return (widths, self.weight_bytes, self.gpus_per_node, self.kv_cache_dtype)

    # ---- speeds -------------------------------------------------------------------------
    def _flops_per_s(self) -> float:
        g, q = self.gpu, self.facts.quant.name
        peak = g.bf16_tflops
        if q in ("fp8",) and g.fp8_tflops:
            peak = g.fp8_tflops
        elif q in ("nvfp4", "mxfp4") and (g.fp4_tflops or g.fp8_tflops):
            peak = g.fp4_tflops or g.fp8_tflops
        return peak * 1e12 * MFU

    def _bw(self, width: int) -> float:
        """Bytes/s of a group of `width` ranks: NVLink inside a node, the NIC across."""
        g = self.gpu
        if width <= max(1, min(self.gpus_per_node, g.fabric)):
            return max(g.scale_up_gbps, 1.0) * 1e9
        return max(g.scale_out_gbps, 1.0) * 1e9

    # ---- pieces -------------------------------------------------------------------------
    def _layers(self) -> float:
        return self.facts.num_layers / self.p.pp

    def _comm_s(self, tokens: float) -> float:
        f, p = self.facts, self.p
        h = f.hidden_size
        layers = self._layers()
        t = 0.0
        if p.attn_tp > 1:
            size = tokens * h * ACT_BYTES
            ring = 2 * (p.attn_tp - 1) / p.attn_tp * size / self._bw(p.attn_tp)
            t += 2 * layers * (ring + COLLECTIVE_US * 1e-6)
        t += self.ep_all_to_all_s(tokens)
        if p.pp > 1:
            t += (
                (tokens * h * ACT_BYTES / self._bw(p.pp * p.tp) + COLLECTIVE_US * 1e-6)
                * (p.pp - 1)
                / p.pp
            )
        return t

    def ep_all_to_all_s(self, tokens: float) -> float:
        """The expert-parallel all-to-all of one pass over `tokens` tokens per attention-DP
        rank: dispatch and combine of top-k copies of each token's hidden state, per MoE
        layer, each also costing one collective's latency (0 without EP)."""
        f, p = self.facts, self.p
        if not f.is_moe or p.ep <= 1:
            return 0.0
        moe_layers = f.num_moe_layers / p.pp
        size = tokens * p.attn_dp * f.experts_per_token * f.hidden_size * ACT_BYTES / p.ep
        a2a = 2 * (p.ep - 1) / p.ep * size / self._bw(p.ep)
        return moe_layers * (a2a + 2 * COLLECTIVE_US * 1e-6)

    def _active_params_per_rank(self) -> float:
        """Parameters one token multiplies on one rank (its share of the layout)."""
        f, p = self.facts, self.p
        dense = f.active_params() - (f.expert_params() * f.experts_per_token * f.num_moe_layers)
        experts = f.expert_params() * f.experts_per_token * f.num_moe_layers
        # attention and dense parts split over attention TP; routed experts over the EP x
        # MoE-TP group, which sees the tokens of all attention-DP ranks.
        per = dense / max(1, p.attn_tp) + experts * p.attn_dp / max(1, p.ep * p.moe_tp)
        return per / p.pp

    def _expert_bytes_touched(self, tokens: float) -> float:
        f, p = self.facts, self.p
        if not f.is_moe:
            return 0.0
        local = max(1.0, f.num_experts / p.ep)
        routed = tokens * p.attn_dp * f.experts_per_token / p.ep  # token-expert pairs here
        touched = local * (1 - float((1 - 1 / local) ** routed))
        per_expert = f.expert_params() * f.quant.experts / max(1, p.moe_tp)
        return touched * per_expert * f.num_moe_layers / p.pp

    def _all_expert_bytes(self) -> float:
        f, p = self.facts, self.p
        if not f.is_moe:
            return 0.0
        per_expert = f.expert_params() * f.quant.experts / max(1, p.moe_tp)
        return (f.num_experts / p.ep) * per_expert * f.num_moe_layers / p.pp

    def _attn_flops(self, tokens: float, ctx: float) -> float:
        f, p = self.facts, self.p
        dim = (f.kv_lora_rank + f.qk_rope_head_dim) if f.is_mla else f.head_dim
        heads = max(1, f.num_heads // max(1, p.attn_tp))
        return 4.0 * tokens * ctx * heads * dim * self._layers()

    def _pass_s(self, tokens: float, ctx: float, kv_tokens: float) -> float:
        """One forward pass over `tokens` new tokens on one rank, reading `kv_tokens` of
        cached context; `ctx` is the mean attention span per token."""
        p = self.p
        active, all_experts, kv_per_token, flops_per_s, bytes_per_s, layers = self._c
        cp = p.attn_cp * p.dcp
        flops = 2 * active * tokens + self._attn_flops(
            tokens / max(1, p.attn_cp), ctx / max(1, p.dcp)
        )
        static = self.weight_bytes - all_experts + self._expert_bytes_touched(tokens)
        mem = (static + kv_tokens / max(1, cp) * kv_per_token) / bytes_per_s
        t = max(flops / flops_per_s, mem) + self._comm_s(tokens / max(1, p.attn_cp))
        if cp > 1:  # gather the KV shards of each layer over the CP group
            t += layers * COLLECTIVE_US * 1e-6
        return t + STEP_OVERHEAD_MS * 1e-3

    # ---- the interface schedule.py reads -------------------------------------------------
    def prefill_ms(self, requests: int, isl: int, prefix: int = 0) -> float:
        pp = self.p.pp
        m = max(1, min(requests, pp))  # micro-batches (module docstring, last point)
        per = requests / m
        new = isl - prefix  # tokens computed; each attends to the prefix and half the rest
        span = prefix + new / 2
        return 1e3 * (m + pp - 1) * self._pass_s(per * new, span, per * span)

    def decode_ms(self, batch: int, isl: int, osl: int) -> float:
        ctx = isl + osl / 2
        per = batch / max(1, min(batch, self.p.pp))
        return 1e3 * self.p.pp * self._pass_s(per, ctx, per * ctx)

    def ep_journey_s(self, tokens: float) -> float:
        """The EP all-to-all a pass's tokens meet on their way through every stage (the
        engine's step latencies are whole passes, so `WithEpComm` adds this, not one
        stage's `ep_all_to_all_s`)."""
        return self.p.pp * self.ep_all_to_all_s(tokens)
