"""Every misuse of `cp` raises a `CPError` subclass whose message names the argument and the
numbers, instead of a bare TypeError / ZeroDivisionError / torch error from deep inside."""

from __future__ import annotations

import pytest
import torch

from meshsat.cp import (
    Comm,
    CPAttentionBackendKind,
    CPBatch,
    CPBatchError,
    CPConfigError,
    CPShapeError,
    InterleaveStrategy,
    LayerKV,
    ZigzagStrategy,
    causal_attention_fn,
)
from tests.cp_helpers import local_sim_comms


def test_none_and_non_integer_lengths_name_the_argument() -> None:
    strategy = ZigzagStrategy(1)
    with pytest.raises(CPBatchError, match="extend_lens is None"):
        CPBatch(None, ())  # type: ignore[arg-type]
    with pytest.raises(CPBatchError, match=r"extend_seq_lens\[1\] is None"):
        strategy.build_metadata(5, [3, 2], [3, None])  # type: ignore[list-item]
    with pytest.raises(CPBatchError, match=r"seq_lens is 'abc'"):
        strategy.build_metadata(3, "abc")  # type: ignore[arg-type]
    with pytest.raises(CPBatchError, match="float32 tensor"):
        strategy.build_metadata(3, torch.tensor([3.0]))  # type: ignore[arg-type]


def test_a_comm_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(CPConfigError, match=r"comm must be a cp\.Comm .*got str"):
        ZigzagStrategy(2, comm="world")  # type: ignore[arg-type]


def test_zero_heads_or_head_dim_are_refused_with_the_shapes() -> None:
    batch = CPBatch((4,), (0,))
    with pytest.raises(CPShapeError, match=r"K \(4, 0, 8\).*kv_heads and head_dim must be >= 1"):
        LayerKV(batch, torch.zeros(4, 0, 8), torch.zeros(4, 0, 8))
    with pytest.raises(CPShapeError, match=r"K \(4, 2, 0\)"):
        LayerKV(batch, torch.zeros(4, 2, 0), torch.zeros(4, 2, 0))
    kv = LayerKV(batch, torch.zeros(4, 1, 8), torch.zeros(4, 1, 8))
    fn = causal_attention_fn(kv, torch.tensor([0]))
    cu, lens = torch.tensor([0, 4], dtype=torch.int32), torch.tensor([4], dtype=torch.int32)
    with pytest.raises(CPShapeError, match=r"q \(4, 0, 8\): heads and head_dim must be >= 1"):
        fn(torch.zeros(4, 0, 8), cu, lens, 4)


@pytest.mark.parametrize("scale", [float("nan"), float("inf"), -float("inf"), "0.1"])
def test_a_non_finite_softmax_scale_is_refused(scale: object) -> None:
    batch = CPBatch((4,), (0,))
    kv = LayerKV(batch, torch.zeros(4, 1, 8), torch.zeros(4, 1, 8))
    with pytest.raises(CPConfigError, match="softmax_scale must be a finite number or None"):
        causal_attention_fn(kv, torch.tensor([0]), softmax_scale=scale)  # type: ignore[arg-type]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only build")
def test_a_cuda_device_on_a_cpu_build_is_refused() -> None:
    strategy = ZigzagStrategy(1)
    batch = CPBatch((4,), (0,)).with_metadata(strategy.build_metadata(4, [4]))
    q = torch.zeros(strategy.metadata(batch).physical, 1, 8)

    def attn(q: torch.Tensor, cu: torch.Tensor, kv: torch.Tensor, m: int) -> torch.Tensor:
        return q

    with pytest.raises(CPConfigError, match="device 'cuda' asked for, but this torch build"):
        strategy.run_attention(q, batch, "cuda", attn)
    with pytest.raises(CPConfigError, match="device 'gpu0' is not a torch device"):
        strategy.run_attention(q, batch, "gpu0", attn)


def test_shard_per_request_refuses_a_tensor_that_disagrees_with_its_list() -> None:
    strategy = InterleaveStrategy(2, comm=local_sim_comms(2)[0])
    with pytest.raises(CPShapeError, match=r"extend_seqs \[5, 4\] disagrees with .* \[5, 3\]"):
        strategy.shard_per_request([5, 3], torch.tensor([5, 4]))
    with pytest.raises(CPShapeError, match=r"extend_seqs \(3,\) must be 1-D with one entry"):
        strategy.shard_per_request([5, 3], torch.tensor([5, 3, 1]))
    with pytest.raises(CPShapeError, match=r"extend_seqs must be a tensor .*got list"):
        strategy.shard_per_request([5, 3], [5, 3])  # type: ignore[arg-type]
    with pytest.raises(CPBatchError, match="extend_seqs_cpu is None"):
        strategy.shard_per_request(None, torch.tensor([5]))  # type: ignore[arg-type]


# ---- issue 28, item 9: misuse that used to escape as a torch error -------------------------


def _prepared(strategy: ZigzagStrategy, lens: tuple[int, ...]) -> CPBatch:
    batch = CPBatch(lens, (0,) * len(lens))
    return batch.with_metadata(strategy.build_metadata(batch.num_tokens, list(lens)))


def test_an_integer_q_is_refused_with_its_dtype() -> None:
    strategy = ZigzagStrategy(1)
    batch = _prepared(strategy, (4,))
    kv = LayerKV(batch, torch.zeros(4, 1, 8), torch.zeros(4, 1, 8))
    q = torch.zeros(strategy.metadata(batch).physical, 1, 8, dtype=torch.long)
    with pytest.raises(CPShapeError, match=r"q is a torch\.int64 tensor; .*floating-point"):
        strategy.run_attention(q, batch, "cpu", strategy.default_attn_fn(batch, kv))


def test_a_tensor_that_requires_grad_is_refused_with_the_way_out() -> None:
    strategy = ZigzagStrategy(1)
    batch = _prepared(strategy, (4,))
    x = torch.zeros(4, 8, requires_grad=True)
    with pytest.raises(CPConfigError, match=r"x requires grad, .*inference-only.*no_grad"):
        strategy.shard_hidden_states(x, batch)
    kv = LayerKV(batch, torch.zeros(4, 1, 8), torch.zeros(4, 1, 8))
    q = torch.zeros(strategy.metadata(batch).physical, 1, 8, requires_grad=True)
    with pytest.raises(CPConfigError, match="q requires grad"):
        strategy.run_attention(q, batch, "cpu", strategy.default_attn_fn(batch, kv))
    with torch.no_grad():  # the way out the message names works
        assert torch.equal(strategy.shard_hidden_states(x, batch)[:4], x.detach())


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.build_metadata(2**40, [2**40]),
        lambda s: s.build_metadata(2**40, None),
        lambda s: s.build_metadata(2**27, [2**26, 2**26]),
        lambda s: s.build_metadata(10, [2**26 + 10], [10]),
    ],
)
def test_absurd_token_counts_are_bounded_before_any_allocation(call: object) -> None:
    with pytest.raises(CPBatchError, match=r"limit is 67108864"):
        call(ZigzagStrategy(1))  # type: ignore[operator]


def test_an_absurd_cp_size_is_bounded() -> None:
    with pytest.raises(CPConfigError, match=r"cp_size 1099511627776 is over the limit"):
        ZigzagStrategy(2**40)


def test_a_process_group_that_is_not_one_is_named() -> None:
    from meshsat.cp import ProcessGroupComm

    with pytest.raises(CPConfigError, match=r"group must be a torch\.distributed ProcessGroup"):
        ProcessGroupComm(group="x")  # type: ignore[arg-type]


def test_numpy_integer_lengths_are_lengths() -> None:
    np = pytest.importorskip("numpy")
    batch = CPBatch(np.array([5, 3], dtype=np.int64), [np.int32(2), np.uint8(0)])  # type: ignore[arg-type]
    assert batch == CPBatch((5, 3), (2, 0))
    assert all(type(n) is int for n in (*batch.extend_lens, *batch.prefix_lens))
    meta = ZigzagStrategy(1).build_metadata(np.int64(8), np.array([10, 3]), np.array([5, 3]))
    assert (meta.extend_lens, meta.prefix_lens) == ((5, 3), (5, 0))
    with pytest.raises(CPBatchError, match=r"extend_lens\[0\] is .*True.*lengths must be ints"):
        CPBatch((np.bool_(True),), (0,))  # type: ignore[arg-type]
    with pytest.raises(CPBatchError, match=r"extend_lens\[0\] is .*2\.0.*lengths must be ints"):
        CPBatch((np.float64(2.0),), (0,))  # type: ignore[arg-type]


def test_run_attention_checks_the_attention_backend() -> None:
    strategy = ZigzagStrategy(1)
    batch = _prepared(strategy, (4,))
    kv = LayerKV(batch, torch.zeros(4, 1, 8), torch.zeros(4, 1, 8))
    q = torch.zeros(strategy.metadata(batch).physical, 1, 8)
    fn = strategy.default_attn_fn(batch, kv)
    with pytest.raises(CPConfigError, match=r"attention_backend must be .*FLASH_ATTENTION"):
        strategy.run_attention(q, batch, "cpu", fn, None)  # type: ignore[arg-type]
    out = strategy.run_attention(q, batch, "cpu", fn, CPAttentionBackendKind.FLASH_ATTENTION)
    assert out.shape == q.shape


class EchoComm(Comm):
    """Rank 0 of a group of two whose peer holds the same rows: no thread to wait for."""

    rank = property(lambda self: 0)
    world_size = property(lambda self: 2)

    def all_gather(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, x])


def test_shape_errors_show_the_shapes_the_caller_passed() -> None:
    """Checked after the gather or on a chunk, they showed (10, 3, 16) and (3, 64)."""
    strategy = ZigzagStrategy(2, comm=EchoComm())
    batch = strategy.prepare(CPBatch((10,), (0,)))
    kv = LayerKV.from_prefix(batch, torch.zeros(0, 2, 16), torch.zeros(0, 2, 16))
    k = torch.zeros(8, 3, 16)
    with pytest.raises(CPShapeError, match=r"k \(8, 3, 16\) / v \(8, 3, 16\) do not fit"):
        strategy.materialize_full_kv(batch, kv, k, k)
    strategy.materialize_full_kv(batch, kv, torch.zeros(8, 2, 16), torch.zeros(8, 2, 16))
    with pytest.raises(CPShapeError, match=r"q \(8, 64\) must be \[rows, heads, head_dim\]"):
        strategy.run_attention(
            torch.zeros(8, 64), batch, "cpu", strategy.default_attn_fn(batch, kv)
        )
