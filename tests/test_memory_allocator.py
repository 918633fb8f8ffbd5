"""`allocator.reserved_bytes` against cases worked by hand from PyTorch's caching-allocator
rules (`c10/cuda/CUDACachingAllocator.cpp`), and the weight model's per-layer steady state
against the whole sequence of a stage's tensors."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from meshsat.solver.memory import Parallel, load_facts
from meshsat.solver.memory.allocator import reserved_bytes, rounding_bytes
from meshsat.solver.memory.weights import WeightModel

MIB = 1 << 20


def test_a_large_tensor_gets_its_size_rounded_to_2_mib() -> None:
    # 25 MiB + 1 B: a 28 MiB segment? No: 26 MiB (rounded up to 2 MiB); the 1 MiB - 512 B
    # tail is too small to split off, so it stays with the tensor.
    assert reserved_bytes([25 * MIB + 1]) == 26 * MIB
    assert reserved_bytes([24 * MIB]) == 24 * MIB


def test_a_tail_over_1_mib_is_split_off_and_reused() -> None:
    # 62.5 MiB -> a 64 MiB segment whose 1.5 MiB tail is a free block; a 1.25 MiB tensor
    # (large pool, under 10 MiB) takes it instead of opening a 20 MiB segment.
    assert reserved_bytes([62 * MIB + MIB // 2, MIB + MIB // 4]) == 64 * MIB
    # Without the reuse the mid-sized tensor opens its own 20 MiB segment.
    assert reserved_bytes([MIB + MIB // 4]) == 20 * MIB


def test_mid_sized_tensors_share_20_mib_segments() -> None:
    assert reserved_bytes([8 * MIB, 8 * MIB]) == 20 * MIB
    assert reserved_bytes([8 * MIB] * 3) == 40 * MIB


def test_small_tensors_share_2_mib_segments() -> None:
    assert reserved_bytes([1000] * 1000) == 2 * MIB  # 1000 blocks of 1024 B
    assert reserved_bytes([1000] * 3000) == 4 * MIB


@given(st.lists(st.integers(1, 300 * MIB), max_size=40))
def test_segments_hold_at_least_the_tensors(sizes: list[int]) -> None:
    r = reserved_bytes(sizes)
    assert r % (2 * MIB) == 0
    assert r >= sum(-(-s // 512) * 512 for s in sizes)
    assert rounding_bytes(sizes) == r - sum(sizes)


def test_the_per_layer_steady_state_matches_the_whole_stage() -> None:
    wm = WeightModel(load_facts("Qwen/Qwen3-32B"))
    f = wm.facts
    for tp in (1, 2, 4, 8):
        p = Parallel(tp=tp, attn_tp=tp, moe_tp=tp)
        stage = wm.stage(p, 0)
        rows = -(-f.padded_vocab // tp)
        seq = [int(rows * wm.row)]
        seq += wm.layer_tensors(False, tp, tp, 1, 1, 0) * f.num_layers
        seq += [int(rows * wm.row)]
        exact = rounding_bytes(seq)
        modelled = stage.overhead - f.rope_cache_elements * 4.0
        assert abs(modelled - exact) <= 0.05 * exact + 4 * MIB, (tp, modelled, exact)
