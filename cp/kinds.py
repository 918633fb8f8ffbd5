"""Strategy names and the typed errors of the `cp` package.

Every user-facing failure of this package is a `CPError`, so a caller can catch one root and a
test can name the exact cause. Messages carry the numbers that failed, so that a log line alone
says what to change.
"""

from __future__ import annotations

from enum import IntEnum


class CPError(ValueError):
    """Root of every error this package raises on bad input or bad use."""


class CPConfigError(CPError):
    """An inconsistent set-up: cp size, communicator, process group or registry arguments."""


class UnknownStrategyError(CPConfigError):
    """A strategy or attention-backend name outside the known set: a set-up error, so a
    `CPConfigError` too, whether or not the layout would run the strategy."""


class CPBatchError(CPError):
    """Batch lengths or metadata that contradict each other or the strategy."""


class CPNotApplicableError(CPError):
    """The strategy's policy (`can_apply`) rejects this batch; run the forward without CP."""


class CPShapeError(CPError):
    """A tensor whose shape or dtype does not fit the batch, the strategy's layout or attention."""


class CPCommError(CPError):
    """A collective that cannot complete: ranks that disagree on a tensor's dtype or shape or
    on the forward's plan, raised on every rank before the collective (`ProcessGroupComm`
    checks collectives of CPU tensors by default and CUDA ones with `check=True`), or a
    failed peer of a simulated group."""


class ContextParallelStrategyKind(IntEnum):
    """The layouts a serving engine can bind; values match SGLang's enum.

    `from_string` is SGLang's parser exactly: it knows only the two names a user may configure
    ("none" is the absence of CP, not a strategy, and raises). RING is this package's own layout;
    it is no SGLang value, so the parser never yields it and only `parse` (the core's wider
    vocabulary, used by `bind_cp_strategy` and `instantiate`) names it.
    """

    NONE = 0
    ZIGZAG = 1
    INTERLEAVE = 2
    RING = 3

    @classmethod
    def from_string(cls, value: str) -> ContextParallelStrategyKind:
        """SGLang's `--cp-strategy` parser: 'zigzag' or 'interleave', anything else raises."""
        if value == "zigzag":
            return cls.ZIGZAG
        if value == "interleave":
            return cls.INTERLEAVE
        raise UnknownStrategyError(
            f"Unknown cp_strategy={value!r}; expected one of {{'zigzag', 'interleave'}}"
        )

    @classmethod
    def parse(cls, value: str) -> ContextParallelStrategyKind:
        """Every name of this package ('none', 'zigzag', 'interleave', 'ring')."""
        for kind in cls:
            if kind.cli_value == value:
                return kind
        valid = ", ".join(repr(k.cli_value) for k in cls)
        raise UnknownStrategyError(f"unknown cp_strategy {value!r}; expected one of {valid}")

    @property
    def cli_value(self) -> str:
        return self.name.lower()


CPStrategyKind = ContextParallelStrategyKind
"""The core's name for the same enum."""


class CPAttentionBackendKind(IntEnum):
    """Calling convention of the `attn_fn` handed to `run_attention` (SGLang's enum).

    Only the FlashAttention varlen convention exists: ``attn_fn(q, cu_seqlens_q, kv_lens,
    max_seqlen_q)``; VARLEN is the core's name for it. The enum keeps the seam where another
    convention (paged, MLA) would go.
    """

    FLASH_ATTENTION = 0
    VARLEN = 0

    @classmethod
    def from_string(cls, value: str) -> CPAttentionBackendKind:
        """SGLang's parser: the engine backends that share the varlen convention."""
        if value in ("fa3", "flashinfer"):
            return cls.FLASH_ATTENTION
        raise UnknownStrategyError(
            f"Unsupported attention_backend={value!r} for CP strategy; expected one of "
            "{'fa3', 'flashinfer'}"
        )


CPAttentionBackend = CPAttentionBackendKind
"""The core's name for the same enum."""
