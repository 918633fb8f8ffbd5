"""Every misuse of `cp` raises a `CPError` subclass whose message names the argument and the
numbers, instead of a bare TypeError / ZeroDivisionError / torch error from deep inside."""

from __future__ import annotations

import pytest
import torch

from meshsat.cp import (
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
    with pytest.raises(CPBatchError, match=r"seqs_len .*got None for num_tokens 5"):
        strategy.build_metadata(5, None)
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
