"""The batch a strategy shards, and the per-forward plan (metadata) it shards by.

`CPBatch` is a small stand-in for SGLang's ForwardBatch: request lengths and, once prepared, the
plan. `CPMetadata` is that plan. It is a pure function of the strategy, the cp size and the lengths,
holds the layout of every rank (so one object serves any rank and can be table-tested without a
process group), and keeps index tensors on the CPU, copying them to a device once on first use.
"""

from __future__ import annotations

import itertools
import operator
import threading
from collections.abc import Callable, Sequence
from dataclasses import InitVar, dataclass, field, replace
from typing import Any

import torch
from torch import Tensor

from meshsat.cp.interface import BaseContextParallelMetadata
from meshsat.cp.kinds import CPBatchError, CPStrategyKind
from meshsat.cp.limits import MAX_TOKENS


def as_lengths(name: str, values: Sequence[int] | None) -> tuple[int, ...]:
    """`values` as a tuple of ints in [0, MAX_TOKENS], or a `CPBatchError` naming `name`.
    Python ints, numpy integers and 1-D integer tensors are lengths (engines pass all three);
    bools and floats are not."""
    if values is None or isinstance(values, (str, bytes)):
        raise CPBatchError(f"{name} is {values!r}; expected a sequence of lengths (ints >= 0)")
    if isinstance(values, Tensor):
        if values.dim() != 1 or values.dtype.is_floating_point or values.dtype == torch.bool:
            raise CPBatchError(
                f"{name} is a {values.dtype} tensor of shape {tuple(values.shape)}; expected "
                "a 1-D integer tensor or a list of ints"
            )
        values = values.tolist()
    try:
        fast = tuple(values)
    except TypeError:
        raise CPBatchError(
            f"{name} is a {type(values).__name__}; expected a sequence of lengths (ints >= 0)"
        ) from None
    if len(fast) > MAX_TOKENS:
        raise CPBatchError(f"{name} has {len(fast)} entries; the limit is {MAX_TOKENS} requests")
    if not fast or (set(map(type, fast)) == {int} and min(fast) >= 0 and max(fast) <= MAX_TOKENS):
        return fast
    return tuple(_as_length(name, i, v) for i, v in enumerate(fast))


def _as_length(name: str, i: int, v: object) -> int:
    """One length: an int or a numpy / 0-d tensor integer (anything with `__index__` that is
    not a bool), bounded by `MAX_TOKENS`."""
    if isinstance(v, bool) or "bool" in type(v).__name__ or not hasattr(type(v), "__index__"):
        raise CPBatchError(f"{name}[{i}] is {v!r}; lengths must be ints")
    try:
        n = operator.index(v)  # type: ignore[arg-type]
    except TypeError:
        raise CPBatchError(f"{name}[{i}] is {v!r}; lengths must be ints") from None
    if n < 0:
        raise CPBatchError(f"{name}[{i}] is {n}; lengths must be >= 0")
    if n > MAX_TOKENS:
        raise CPBatchError(f"{name}[{i}] is {n}; the limit is {MAX_TOKENS} tokens (cp.limits)")
    return n


@dataclass(frozen=True)
class CPBatch:
    """Lengths of one prefill forward: request b has `prefix_lens[b]` cached tokens (a radix-cache
    hit, already in the KV cache) followed by `extend_lens[b]` tokens that are in this forward,
    flattened request after request."""

    extend_lens: tuple[int, ...]
    prefix_lens: tuple[int, ...]
    metadata: CPMetadata | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        ext = as_lengths("extend_lens", self.extend_lens)
        pre = as_lengths("prefix_lens", self.prefix_lens)
        if len(ext) != len(pre):
            raise CPBatchError(
                f"{len(ext)} extend lengths but {len(pre)} prefix lengths; one of each per request"
            )
        total = sum(ext)
        if total > MAX_TOKENS:
            raise CPBatchError(
                f"the batch has {total} tokens in the forward; the limit is {MAX_TOKENS} "
                "(cp.limits)"
            )
        longest = max(map(operator.add, ext, pre), default=0)
        if longest > MAX_TOKENS:
            raise CPBatchError(
                f"a request of {longest} tokens (prefix + extend); the limit is {MAX_TOKENS} "
                "(cp.limits)"
            )
        object.__setattr__(self, "extend_lens", ext)
        object.__setattr__(self, "prefix_lens", pre)
        if self.metadata is not None:
            self.metadata.check_lengths(ext, pre)

    @classmethod
    def from_seq_lens(
        cls, seq_lens: Sequence[int], extend_seq_lens: Sequence[int] | None = None
    ) -> CPBatch:
        """SGLang's convention: total lengths, and the extend part (all of it when omitted)."""
        seq = as_lengths("seq_lens", seq_lens)
        ext = seq if extend_seq_lens is None else as_lengths("extend_seq_lens", extend_seq_lens)
        if len(seq) != len(ext):
            raise CPBatchError(
                f"{len(seq)} seq lengths but {len(ext)} extend lengths; one of each per request"
            )
        prefix = tuple(map(operator.sub, seq, ext))
        if prefix and min(prefix) < 0:
            b = next(i for i, p in enumerate(prefix) if p < 0)
            raise CPBatchError(
                f"request {b}: extend length {ext[b]} exceeds its sequence length {seq[b]}"
            )
        return cls(ext, prefix)

    @property
    def bs(self) -> int:
        return len(self.extend_lens)

    @property
    def num_tokens(self) -> int:
        return sum(self.extend_lens)

    @property
    def seq_lens(self) -> tuple[int, ...]:
        return tuple(p + e for p, e in zip(self.prefix_lens, self.extend_lens, strict=True))

    def with_metadata(self, metadata: CPMetadata) -> CPBatch:
        return replace(self, metadata=metadata)


@dataclass(frozen=True, eq=False)
class AttnChunk:
    """One varlen attention call of one rank: local query rows [row_start, row_start + rows),
    cut into sequences of `q_lens`; the i-th query of a sequence of q queries with kv length K
    sees keys [0, K - q + i] of its request (the kv length counts the cached prefix).
    `rows` and `max_q` are read once, when the plan is built on the host."""

    row_start: int
    q_lens: Tensor
    kv_lens: Tensor
    rows: int = field(init=False)
    max_q: int = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "rows", int(self.q_lens.sum()))
        object.__setattr__(self, "max_q", int(self.q_lens.max()) if self.q_lens.numel() else 0)


@dataclass(frozen=True, eq=False)
class DeviceChunk:
    """An `AttnChunk` as `run_attention` hands it to `attn_fn`: cumulative query lengths and kv
    lengths already int32 on the device, built once per forward (no per-layer host work)."""

    chunk: AttnChunk
    cu_seqlens_q: Tensor
    kv_lens: Tensor


@dataclass(eq=False, kw_only=True)
class CPMetadata(BaseContextParallelMetadata):
    """The plan of one forward for every rank of the CP group.

    `rank_tokens[r]` lists, in rank r's local row order, the global token index of each row: the
    shard is that index map, the gather its inverse. `gather_index` composes the spec's two gather
    steps, cutting each rank's chunk of the padded all-gather to its real rows and undoing the
    permutation, so that a gather is one index_select after the collective.

    A plan built by arithmetic on the lengths may hand in its gather index (`known_gather`);
    the permutation check is then skipped, the round-trip tests holding that plan exact.
    """

    kind: CPStrategyKind
    cp_size: int
    extend_lens: tuple[int, ...]
    prefix_lens: tuple[int, ...]
    align: int
    rank_tokens: tuple[Tensor, ...]
    chunks: tuple[tuple[AttnChunk, ...], ...]
    seq_requests: tuple[Tensor, ...]
    known_gather: InitVar[Tensor | None] = None
    total_seq_lens: int = field(init=False, default=0)
    bs: int = field(init=False, default=0)
    counts: tuple[int, ...] = field(init=False)
    physical: int = field(init=False)
    perm: Tensor = field(init=False)
    gather_index: Tensor = field(init=False)
    _device_cache: dict[tuple[str, int, torch.device], Any] = field(
        init=False, default_factory=dict, repr=False
    )
    _lock: threading.Lock = field(init=False, default_factory=threading.Lock, repr=False)

    def __post_init__(self, known_gather: Tensor | None) -> None:
        counts = tuple(int(t.numel()) for t in self.rank_tokens)
        most = max(counts, default=0)
        physical = round_up(most, self.align)
        perm = torch.cat(self.rank_tokens) if self.rank_tokens else torch.zeros(0, dtype=torch.long)
        self.total_seq_lens = sum(self.extend_lens) + sum(self.prefix_lens)
        self.bs = len(self.extend_lens)
        self.counts = counts
        self.physical = physical
        self.perm = perm
        if known_gather is not None:
            self.gather_index = known_gather
            return
        total = self.total_tokens
        # A permutation check and its inverse in one scatter (no sort): every token written once.
        rank_of_row = segment_ids(torch.tensor(counts, dtype=torch.long))
        row_offset = torch.tensor([0, *counts], dtype=torch.long).cumsum(0)[:-1]
        padded_pos = rank_of_row * physical + (torch.arange(perm.numel()) - row_offset[rank_of_row])
        gather_index = torch.full((total,), -1, dtype=torch.long)
        if perm.numel() != total or (perm.numel() and (perm.min() < 0 or perm.max() >= total)):
            raise RuntimeError(f"internal: {self.kind.name} plan is not a permutation")
        gather_index[perm] = padded_pos
        if bool((gather_index < 0).any()):
            raise RuntimeError(f"internal: {self.kind.name} plan is not a permutation")
        self.gather_index = gather_index

    @property
    def total_tokens(self) -> int:
        return sum(self.extend_lens)

    def check_lengths(self, extend_lens: tuple[int, ...], prefix_lens: tuple[int, ...]) -> None:
        if extend_lens != self.extend_lens or prefix_lens != self.prefix_lens:
            raise CPBatchError(
                f"metadata was built for extend {list(self.extend_lens)} / prefix "
                f"{list(self.prefix_lens)}, not for extend {list(extend_lens)} / prefix "
                f"{list(prefix_lens)}"
            )

    def kv_lens(self, rank: int) -> list[list[int]]:
        """Per attention call of `rank`, the kv length of each sequence (the spec's tables)."""
        return [c.kv_lens.tolist() for c in self.chunks[rank]]

    def on_device(self, name: str, rank: int, device: torch.device) -> Tensor:
        """`rank_tokens` (name "tokens") or `gather_index` ("gather") on `device`, copied once."""

        def build() -> Tensor:
            src = self.rank_tokens[rank] if name == "tokens" else self.gather_index
            return src.to(device)

        out: Tensor = self.memo(name, rank, device, build)
        return out

    def device_chunks(self, rank: int, device: torch.device) -> tuple[DeviceChunk, ...]:
        """Rank `rank`'s attention calls with their arguments on `device`, built once."""

        def build() -> tuple[DeviceChunk, ...]:
            out = []
            for c in self.chunks[rank]:
                cu = torch.zeros(c.q_lens.numel() + 1, dtype=torch.int32)
                torch.cumsum(c.q_lens, 0, out=cu[1:])
                kv = c.kv_lens.to(torch.int32)
                out.append(DeviceChunk(c, cu.to(device), kv.to(device)))
            return tuple(out)

        chunks: tuple[DeviceChunk, ...] = self.memo("chunks", rank, device, build)
        return chunks

    def memo(self, name: str, rank: int, device: torch.device, build: Callable[[], Any]) -> Any:
        """Per-forward state on a device (index tensors, attention schedules): built on first
        use, then shared by every layer of the forward."""
        key = (name, rank, device)
        with self._lock:
            cached = self._device_cache.get(key)
            if cached is None:
                cached = self._device_cache[key] = build()
        return cached


def round_up(n: int, multiple: int) -> int:
    """The least multiple of `multiple` that is >= n."""
    return -(-n // multiple) * multiple


def plan_starts(lengths: Sequence[int]) -> list[int]:
    """Exclusive prefix sums: where each request's tokens begin in the flattened batch."""
    return list(itertools.accumulate(lengths, initial=0))[:-1]


def segment_aranges(first: Tensor, sizes: Tensor) -> Tensor:
    """Concatenation of arange(first[i], first[i] + sizes[i]) over i, in tensor operations: a
    piecewise-constant shift built by one scatter-add and one cumsum (torch's CPU
    repeat_interleave is slow for many short segments)."""
    total = int(sizes.sum())
    starts = torch.cumsum(sizes, 0) - sizes
    shift = first - starts
    step = shift - torch.cat([shift.new_zeros(1), shift[:-1]])
    inside = starts < total
    delta = torch.zeros(total, dtype=torch.long)
    delta.index_add_(0, starts[inside], step[inside])
    return torch.arange(total) + torch.cumsum(delta, 0)


def segment_ids(sizes: Tensor) -> Tensor:
    """For each of the sum(sizes) positions, the index of its segment (repeat_interleave of
    arange(len(sizes)) by `sizes`, without torch's slow CPU kernel)."""
    total = int(sizes.sum())
    starts = torch.cumsum(sizes, 0) - sizes
    inside = starts < total
    marks = torch.zeros(total, dtype=torch.long)
    marks.index_add_(0, starts[inside], torch.ones_like(starts[inside]))
    return torch.cumsum(marks, 0) - 1
