"""Tier 1 for the default attention: the varlen causal rule against the plain oracle, without
any CP, across dtypes, head dims, GQA and sequence shapes; and its refusals."""

from __future__ import annotations

import pytest
import torch

from meshsat.cp import CPBatch, CPConfigError, CPShapeError, LayerKV, causal_attention_fn
from tests.cp_helpers import AttnInputs, cp_test_device, make_inputs, tolerance


def cache(batch: CPBatch, x: AttnInputs) -> LayerKV:
    kv = LayerKV.from_prefix(batch, x.prefix_k, x.prefix_v)
    kv.write_extend(x.k, x.v)
    return kv


def ints(values: list[int], device: torch.device) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.int32, device=device)


@pytest.mark.parametrize(
    ("dtype", "heads", "kv_heads", "dim"),
    [
        (torch.float32, 4, 4, 16),
        (torch.float32, 6, 2, 7),  # GQA, odd head dim
        (torch.float32, 8, 1, 80),  # MQA
        (torch.bfloat16, 4, 2, 64),
        (torch.float16, 4, 2, 32),
    ],
)
def test_one_sequence_per_request_matches_the_oracle(
    dtype: torch.dtype, heads: int, kv_heads: int, dim: int
) -> None:
    device = cp_test_device()
    batch = CPBatch((13, 1, 30), (7, 0, 25))
    x = make_inputs(
        batch, heads=heads, kv_heads=kv_heads, dim=dim, dtype=dtype, device=device, seed=1
    )
    fn = causal_attention_fn(cache(batch, x), torch.arange(3))
    cu = ints([0, 13, 14, 44], device)
    out = fn(x.q, cu, ints(list(batch.seq_lens), device), 30)
    assert out.dtype == dtype
    torch.testing.assert_close(out.double().cpu(), x.oracle(batch), **tolerance(dtype))


def test_sub_chunks_and_length_one_sequences_match_the_oracle_rows() -> None:
    """A chunk that is the last q tokens of the first K tokens, and per-token sequences several
    of which read the same request (the interleave shape)."""
    device = cp_test_device()
    batch = CPBatch((20, 11), (5, 0))
    x = make_inputs(batch, heads=4, kv_heads=2, dim=16, dtype=torch.float32, device=device, seed=2)
    expected = x.oracle(batch)
    # request 0 tokens 6..9 (K = 5 + 10), request 1 tokens 0..2 (K = 3), request 0 tokens 15..19
    rows = [*range(6, 10), *range(20, 23), *range(15, 20)]
    fn = causal_attention_fn(cache(batch, x), torch.tensor([0, 1, 0]))
    out = fn(x.q[rows], ints([0, 4, 7, 12], device), ints([15, 3, 25], device), 5)
    torch.testing.assert_close(out.double().cpu(), expected[rows], **tolerance(torch.float32))
    # every token of both requests as its own sequence, interleaved across requests
    order = [t for pair in zip(range(20), range(20, 31), strict=False) for t in pair] + list(
        range(11, 20)
    )
    req = [0 if t < 20 else 1 for t in order]
    kv_len = [5 + t + 1 if t < 20 else t - 20 + 1 for t in order]
    fn = causal_attention_fn(cache(batch, x), torch.tensor(req))
    out = fn(x.q[order], ints(list(range(len(order) + 1)), device), ints(kv_len, device), 1)
    torch.testing.assert_close(out.double().cpu(), expected[order], **tolerance(torch.float32))


def test_unwritten_extend_keys_poison_the_output() -> None:
    batch = CPBatch((4,), (2,))
    x = make_inputs(
        batch, heads=2, kv_heads=2, dim=8, dtype=torch.float32, device=torch.device("cpu"), seed=3
    )
    kv = LayerKV.from_prefix(batch, x.prefix_k, x.prefix_v)  # extend rows never written
    out = causal_attention_fn(kv, torch.arange(1))(
        x.q, ints([0, 4], x.q.device), ints([6], x.q.device), 4
    )
    assert torch.isnan(out).all()


def test_calls_that_cannot_be_answered_exactly_are_refused() -> None:
    cpu = torch.device("cpu")
    batch = CPBatch((6,), (2,))
    x = make_inputs(batch, heads=4, kv_heads=2, dim=8, dtype=torch.float32, device=cpu, seed=4)
    kv = cache(batch, x)
    fn = causal_attention_fn(kv, torch.arange(1))
    with pytest.raises(
        CPShapeError, match=r"kv length 9 must lie in \[q length 6, sequence length 8\]"
    ):
        fn(x.q, ints([0, 6], cpu), ints([9], cpu), 6)
    with pytest.raises(CPShapeError, match=r"kv length 5 must lie in \[q length 6"):
        fn(x.q, ints([0, 6], cpu), ints([5], cpu), 6)
    with pytest.raises(CPShapeError, match="max_seqlen_q 3 < longest sequence 6"):
        fn(x.q, ints([0, 6], cpu), ints([8], cpu), 3)
    with pytest.raises(CPShapeError, match="cu_seqlens_q must run from 0 to the 6 query rows"):
        fn(x.q, ints([0, 5], cpu), ints([8], cpu), 6)
    with pytest.raises(CPShapeError, match="for 1 bound sequences"):
        fn(x.q, ints([0, 3, 6], cpu), ints([8, 8], cpu), 6)
    with pytest.raises(CPShapeError, match="3 query heads are not a multiple of 2 kv heads"):
        fn(x.q[:, :3], ints([0, 6], cpu), ints([8], cpu), 6)
    with pytest.raises(CPShapeError, match="names request 1; the batch has 1 requests"):
        causal_attention_fn(kv, torch.tensor([1]))
    with pytest.raises(CPShapeError, match="do not cover the batch's 8"):
        LayerKV(batch, torch.zeros(7, 2, 8), torch.zeros(7, 2, 8))


@pytest.mark.skipif(
    torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA"
)
def test_requiring_flash_without_it_is_an_error() -> None:
    batch = CPBatch((2,), (0,))
    kv = LayerKV(batch, torch.zeros(2, 1, 8), torch.zeros(2, 1, 8))
    with pytest.raises(CPConfigError, match="flash_attn is not importable"):
        causal_attention_fn(kv, torch.arange(1), use_flash=True)
