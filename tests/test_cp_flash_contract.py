"""The calls `cp` makes into FlashAttention, checked on the CPU against the kernel's documented
contract.

No GPU is lent here, so the real kernel cannot run (benchmarks/gpu_check.sh runs it where one
is). What can be checked is our half of the contract: the arguments `meshsat.cp.attention` builds (a
paged cache with 256-row pages, an int32 `block_table` and cumulative lengths, causal masking
aligned bottom-right) fed to a float64 stand-in that implements `flash_attn_varlen_func`'s
documented semantics independently of the torch path, and compared with the single-process
oracle for both strategies. A stand-in that asserts the contract's shapes and dtypes also
catches arguments the real kernel would refuse.
"""

from __future__ import annotations

import types
from typing import Any

import pytest
import torch
from torch import Tensor

import meshsat.cp.attention as attention
from meshsat.cp import CPBatch, CPStrategy, InterleaveStrategy, RingStrategy, ZigzagStrategy
from tests.cp_helpers import LocalSimComm, check_cp_attention, make_inputs, run_local_ranks


def _varlen(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    cu_seqlens_q: Tensor,
    cu_seqlens_k: Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    *,
    softmax_scale: float,
    causal: bool,
    block_table: Tensor,
    calls: list[int],
) -> Tensor:
    """flash_attn_varlen_func with a paged cache: sequence i's keys are the first
    cu_k[i+1] - cu_k[i] rows of its pages block_table[i] laid end to end; with causal, query j
    of a sequence of q rows and K keys sees keys [0, K - q + j] (bottom-right alignment)."""
    assert causal and q.dim() == 3 and k.dim() == 4 and v.shape[:3] == k.shape[:3]
    assert k.shape[1] % 256 == 0 and k.stride(-1) == 1 and v.stride(-1) == 1
    assert cu_seqlens_q.dtype == cu_seqlens_k.dtype == block_table.dtype == torch.int32
    assert block_table.dim() == 2 and block_table.shape[0] == cu_seqlens_q.numel() - 1
    assert int(block_table.max()) < k.shape[0] and int(block_table.min()) >= 0
    assert int(cu_seqlens_q[-1]) == q.shape[0]
    q_lens, k_lens = cu_seqlens_q.diff().tolist(), cu_seqlens_k.diff().tolist()
    assert max(q_lens, default=0) <= max_seqlen_q and max(k_lens, default=0) <= max_seqlen_k
    page = k.shape[1]
    group = q.shape[1] // k.shape[2]
    out = torch.zeros(q.shape[0], q.shape[1], v.shape[-1], dtype=torch.float64)
    for i, (n, keys) in enumerate(zip(q_lens, k_lens, strict=True)):
        assert keys <= block_table.shape[1] * page
        kk = k[block_table[i].long()].reshape(-1, k.shape[2], k.shape[3])[:keys].double()
        vv = v[block_table[i].long()].reshape(-1, v.shape[2], v.shape[3])[:keys].double()
        kk, vv = kk.repeat_interleave(group, 1), vv.repeat_interleave(group, 1)
        first = int(cu_seqlens_q[i])
        qq = q[first : first + n].double()
        scores = torch.einsum("qhd,khd->hqk", qq, kk) * softmax_scale
        visible = torch.arange(keys)[None, :] <= (keys - n + torch.arange(n))[:, None]
        scores = scores.masked_fill(~visible, float("-inf"))
        out[first : first + n] = torch.einsum("hqk,khd->qhd", scores.softmax(-1), vv)
    calls.append(q.shape[0])
    return out.to(q.dtype)


@pytest.fixture
def flash_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Install the stand-in as `flash_attn` and let CPU tensors count as GPU tensors."""
    calls: list[int] = []
    fake = types.ModuleType("flash_attn")

    def varlen(*args: Any, **kwargs: Any) -> Tensor:
        return _varlen(*args, **kwargs, calls=calls)

    fake.flash_attn_varlen_func = varlen  # type: ignore[attr-defined]
    monkeypatch.setitem(__import__("sys").modules, "flash_attn", fake)
    monkeypatch.setattr(attention, "_flash_installed", lambda: True)
    monkeypatch.setattr(attention, "_on_gpu", lambda t: True)
    return calls


@pytest.mark.parametrize("cls", [ZigzagStrategy, InterleaveStrategy])
@pytest.mark.parametrize(
    ("cp", "extend", "prefix"), [(2, (70, 4, 300), (30, 0, 12)), (3, (6, 600), (0, 5))]
)
def test_both_strategies_reach_the_kernel_and_match_the_oracle(
    flash_calls: list[int],
    cls: type[CPStrategy],
    cp: int,
    extend: tuple[int, ...],
    prefix: tuple[int, ...],
) -> None:
    """Requests longer than one page, prefixes, GQA; interleave's one-sequence-per-query call
    reads shared pages. Every rank's attention goes through the kernel, none through torch."""
    batch = CPBatch(extend, prefix)
    x = make_inputs(
        batch,
        heads=4,
        kv_heads=2,
        dim=32,
        dtype=torch.bfloat16,
        device=torch.device("cpu"),
        seed=cp,
    )
    expected = x.oracle(batch)

    def rank(comm: LocalSimComm) -> None:
        strategy = cls(cp, comm=comm)
        check_cp_attention(strategy, strategy.prepare(batch), x, expected)

    run_local_ranks(cp, rank)
    assert flash_calls and sum(flash_calls) > 0


def test_interleave_pages_each_request_once(flash_calls: list[int]) -> None:
    """The paged cache holds each request's keys once, however many of its queries a call
    carries: pages = ceil(longest key prefix read / 256) per request, not per sequence."""
    # request 0 holds cache rows 0..599, request 1 rows 600..619
    pages = attention._flash_pages(
        torch.tensor([600, 599, 20, 300]), torch.tensor([0, 0, 1, 0]), (0, 600), torch.device("cpu")
    )
    assert pages.page_rows.numel() == (3 + 1) * 256
    assert pages.block_table.tolist() == [[0, 1, 2], [0, 1, 2], [3, 0, 0], [0, 1, 2]]
    assert pages.cu_k.tolist() == [0, 600, 1199, 1219, 1519]
    # each request's pages start at its first cache row; the last page is padded with its last row
    assert pages.page_rows[:600].tolist() == list(range(600))
    assert set(pages.page_rows[600:768].tolist()) == {599}
    assert pages.page_rows[768:788].tolist() == list(range(600, 620))


def _dense(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    softmax_scale: float,
    causal: bool,
    return_attn_probs: bool,
    calls: list[int],
) -> tuple[Tensor, Tensor, None]:
    """flash_attn_func with return_attn_probs: q [1, n, H, d], k/v [1, K, Hk, d] (H a multiple
    of Hk); with causal, query j of n sees keys [0, K - n + j] (bottom-right, flash-attn >= 2.1).
    Returns the output and the rows' log-sum-exp [1, H, n] in float32."""
    assert return_attn_probs and q.dim() == k.dim() == v.dim() == 4 and q.shape[0] == 1
    assert q.dtype == k.dtype == v.dtype and q.dtype in (torch.float16, torch.bfloat16)
    n, keys = q.shape[1], k.shape[1]
    assert not causal or keys >= n  # ring's causal tiles: every row sees a key
    group = q.shape[2] // k.shape[2]
    kk = k[0].double().repeat_interleave(group, 1)
    vv = v[0].double().repeat_interleave(group, 1)
    scores = torch.einsum("qhd,khd->hqk", q[0].double(), kk) * softmax_scale
    if causal:
        visible = torch.arange(keys)[None, :] <= (keys - n + torch.arange(n))[:, None]
        scores = scores.masked_fill(~visible, float("-inf"))
    out = torch.einsum("hqk,khd->qhd", scores.softmax(-1), vv)
    calls.append(n)
    return out[None].to(q.dtype), torch.logsumexp(scores, -1)[None].float(), None


def test_ring_tiles_reach_the_kernel_and_match_the_oracle(
    flash_calls: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ring on FlashAttention: every tile (own shard, passed shards, cached prefix; unmasked
    and bottom-right causal) is one `flash_attn_func` call whose log-sum-exp the merge folds."""
    fake = __import__("sys").modules["flash_attn"]
    dense: list[int] = []
    fake.flash_attn_func = lambda *a, **k: _dense(*a, **k, calls=dense)
    batch = CPBatch((70, 300, 9), (30, 0, 12))
    x = make_inputs(
        batch, heads=4, kv_heads=2, dim=32, dtype=torch.bfloat16, device=torch.device("cpu"), seed=4
    )
    expected = x.oracle(batch)

    def rank(comm: LocalSimComm) -> None:
        strategy = RingStrategy(2, comm=comm)
        check_cp_attention(strategy, strategy.prepare(batch), x, expected)

    run_local_ranks(2, rank)
    assert dense and sum(dense) > 0 and not flash_calls  # tiles only, no varlen call
