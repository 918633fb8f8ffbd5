"""Tier 1: the plans (pure functions of cp size and lengths) against docs/cp.md's rules, restated
here token by token, for random batches."""

from __future__ import annotations

import torch
from hypothesis import given, settings

from meshsat.cp import CPBatch, CPMetadata, interleave_plan, zigzag_plan
from tests.cp_helpers import cp_batches


def request_and_position(ext: tuple[int, ...]) -> list[tuple[int, int]]:
    return [(b, i) for b, n in enumerate(ext) for i in range(n)]


def zigzag_owner(i: int, n: int, cp: int) -> tuple[int, int]:
    """(rank, block) of position i of a request of n tokens, from docs/cp.md's block rule."""
    base, rem = divmod(n, 2 * cp)
    sizes = [base + 1 if j < rem else base for j in range(2 * cp)]
    acc = 0
    for j, size in enumerate(sizes):
        if i < acc + size:
            return (j if j < cp else 2 * cp - 1 - j), j
        acc += size
    raise AssertionError("position outside the request")


def check_common(meta: CPMetadata, cp: int, ext: tuple[int, ...], pre: tuple[int, ...]) -> None:
    total = sum(ext)
    assert len(meta.rank_tokens) == cp
    assert sorted(meta.perm.tolist()) == list(range(total))
    assert meta.counts == tuple(t.numel() for t in meta.rank_tokens)
    most = max(meta.counts)
    assert meta.physical % meta.align == 0 and meta.physical >= most
    assert meta.physical - most < meta.align
    # gather_index: for token t, its row in the rank-major padded stream
    for t, row in enumerate(meta.gather_index.tolist()):
        rank, slot = divmod(row, meta.physical)
        assert meta.rank_tokens[rank][slot] == t
    # attention bookkeeping agrees with the permutation: every local row's last visible key is
    # its own position in the request's full sequence (prefix included)
    where = request_and_position(ext)
    for r in range(cp):
        rows = meta.rank_tokens[r].tolist()
        covered = 0
        for chunk in meta.chunks[r]:
            assert chunk.row_start == covered
            requests = meta.seq_requests[r].tolist()
            assert len(requests) == chunk.q_lens.numel() == chunk.kv_lens.numel()
            row = chunk.row_start
            for q, kv, b in zip(
                chunk.q_lens.tolist(), chunk.kv_lens.tolist(), requests, strict=True
            ):
                for i in range(q):
                    req, pos = where[rows[row]]
                    assert req == b
                    assert kv - q + i == pre[b] + pos
                    row += 1
            covered = row
        assert covered == len(rows)


@settings(max_examples=150, deadline=None)
@given(cp_batches(max_extend=60, max_prefix=30))
def test_zigzag_plan_follows_the_block_rule(case: tuple[int, CPBatch]) -> None:
    cp, batch = case
    ext, pre = batch.extend_lens, batch.prefix_lens
    meta = zigzag_plan(cp, ext, pre)
    assert meta.align == 2 * cp
    check_common(meta, cp, ext, pre)
    where = request_and_position(ext)
    for r in range(cp):
        owned = [
            (where[t], zigzag_owner(where[t][1], ext[where[t][0]], cp))
            for t in meta.rank_tokens[r].tolist()
        ]
        assert all(rank == r for _, (rank, _) in owned)
        # prev blocks (block r) of every request first, then next blocks, request order within
        keys = [(j != r, b, i) for (b, i), (_, j) in owned]
        assert keys == sorted(keys)
    for b, sizes in enumerate(meta.block_sizes):
        assert sum(sizes) == ext[b] and max(sizes) - min(sizes) <= 1


@settings(max_examples=150, deadline=None)
@given(cp_batches(max_extend=60, max_prefix=30))
def test_interleave_plan_is_global_round_robin(case: tuple[int, CPBatch]) -> None:
    cp, batch = case
    ext, pre = batch.extend_lens, batch.prefix_lens
    meta = interleave_plan(cp, ext, pre)
    assert meta.align == cp
    check_common(meta, cp, ext, pre)
    total = sum(ext)
    where = request_and_position(ext)
    for r in range(cp):
        assert meta.rank_tokens[r].tolist() == list(range(r, total, cp))
        per_request = [0] * len(ext)
        for t in range(r, total, cp):
            per_request[where[t][0]] += 1
        assert list(meta.request_counts[r]) == per_request
        assert all(q == 1 for c in meta.chunks[r] for q in c.q_lens.tolist())


def test_interleave_at_cp1_is_the_identity() -> None:
    meta = interleave_plan(1, (4, 0, 3), (2, 5, 0))
    assert meta.perm.tolist() == list(range(7))
    assert torch.equal(meta.gather_index, torch.arange(7))


def test_zigzag_at_cp1_still_orders_prev_blocks_before_next_blocks() -> None:
    # one rank owns blocks 0 and 1 of each request: identity for one request, not for several
    assert zigzag_plan(1, (5,), (0,)).perm.tolist() == list(range(5))
    assert zigzag_plan(1, (4, 3), (0, 0)).perm.tolist() == [0, 1, 4, 5, 2, 3, 6]


def test_empty_batch_plans_have_no_rows() -> None:
    for plan in (zigzag_plan, interleave_plan):
        meta = plan(3, (), ())
        assert meta.counts == (0, 0, 0) and meta.physical == 0 and meta.perm.numel() == 0
