"""The device memory PyTorch's caching allocator reserves for tensors that stay allocated.

Why: SGLang's `mem usage` is the drop in free device memory across loading, after
`torch.cuda.empty_cache()` (`get_available_gpu_memory`), so it counts every segment the
allocator holds, not the tensors' bytes. A segment is released only when nothing in it is
allocated, so the rounding of each weight tensor to its segment stays. The rules
(`c10/cuda/CUDACachingAllocator.cpp`): sizes round up to 512 B; requests up to 1 MiB come
from 2 MiB segments (the small pool); larger ones first reuse the best-fitting free block of
the large pool, else get a new segment of 20 MiB (requests under 10 MiB) or the request
rounded up to 2 MiB; a block is split when the rest is at least 512 B (small pool) or more
than 1 MiB (large pool), so a tail of at most 1 MiB is never reusable and a larger one only
by a later request that fits it. At tp 4 most of a dense model's tensors stop being whole
multiples of 2 MiB: this is the memory `mem usage` shows beyond the parameters (Qwen3-32B at
tp 4: 0.22 GiB a rank, which the logs show).
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Iterable

_MIN_BLOCK = 512
_SMALL = 1 << 20
_SMALL_SEGMENT = 2 << 20
_LARGE_SEGMENT = 20 << 20
_MIN_LARGE_ALLOC = 10 << 20
_ROUND_LARGE = 2 << 20

#: Identical layers simulated to find one layer's share of the segments its tensors fill
#: (`weights.py`, `mla.py`).
STEADY_LAYERS = 32


def _rounded(size: int) -> int:
    return max(_MIN_BLOCK, -(-size // _MIN_BLOCK) * _MIN_BLOCK)


def _segment(size: int) -> int:
    if size <= _SMALL:
        return _SMALL_SEGMENT
    if size < _MIN_LARGE_ALLOC:
        return _LARGE_SEGMENT
    return -(-size // _ROUND_LARGE) * _ROUND_LARGE


def reserved_bytes(sizes: Iterable[int]) -> int:
    """Bytes of the segments holding tensors of `sizes` (bytes), allocated in that order
    and never freed."""
    # Free blocks per pool, sorted, as (size, order, segment): best fit is the first block
    # at least as large, the oldest among equals (the allocator's address order stands in).
    free: dict[bool, list[tuple[int, int, int]]] = {True: [], False: []}
    segments: list[int] = []
    used: list[bool] = []
    order = 0
    for raw in sizes:
        if raw <= 0:
            continue
        size = _rounded(raw)
        small = size <= _SMALL
        pool = free[small]
        i = bisect.bisect_left(pool, (size, -1, -1))
        if i == len(pool):
            segments.append(_segment(size))
            used.append(False)
            block_size, seg = segments[-1], len(segments) - 1
        else:
            block_size, _, seg = pool.pop(i)
        rest = block_size - size
        if rest >= _MIN_BLOCK if small else rest > _SMALL:
            order += 1
            bisect.insort(pool, (rest, order, seg))
        used[seg] = True
    return sum(s for s, u in zip(segments, used, strict=True) if u)


def rounding_bytes(sizes: Iterable[int]) -> int:
    """What the allocator holds beyond the tensors themselves."""
    listed = [s for s in sizes if s > 0]
    return reserved_bytes(listed) - sum(listed)


@functools.lru_cache(maxsize=4096)
def run_rounding(tensors: tuple[int, ...], repeats: int) -> int:
    """`rounding_bytes` of `tensors` allocated `repeats` times over, cached for the process:
    layouts of one width share a layer's tensors, and so do models built again."""
    return rounding_bytes(tensors * repeats)
