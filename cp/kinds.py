"""Strategy names and the typed errors of the `cp` package.

Every user-facing failure of this package is a `CPError`, so a caller can catch one root and a
test can name the exact cause. Messages carry the numbers that failed, so that a log line alone
says what to change.
"""

from __future__ import annotations

from enum import IntEnum


class CPError(ValueError):
    """Root of every error this package raises on bad input or bad use."""


class UnknownStrategyError(CPError):
    """A strategy or attention-backend name outside the known set."""


class CPConfigError(CPError):
    """An inconsistent set-up: cp size, communicator, process group or registry arguments."""


class CPBatchError(CPError):
    """Batch lengths or metadata that contradict each other or the strategy."""


class CPNotApplicableError(CPError):
    """The strategy's policy (`can_apply`) rejects this batch; run the forward without CP."""


class CPShapeError(CPError):
    """A tensor whose shape does not match the batch or the strategy's layout."""


class CPCommError(CPError):
    """A collective that cannot complete: mismatched shapes or a failed peer."""


class CPStrategyKind(IntEnum):
    """The three layouts a serving engine can bind; values match SGLang's enum."""

    NONE = 0
    ZIGZAG = 1
    INTERLEAVE = 2

    @classmethod
    def from_string(cls, value: str) -> CPStrategyKind:
        """Parse a CLI name; unknown names list the valid ones instead of guessing."""
        for kind in cls:
            if kind.cli_value == value:
                return kind
        valid = ", ".join(repr(k.cli_value) for k in cls)
        raise UnknownStrategyError(f"unknown cp_strategy {value!r}; expected one of {valid}")

    @property
    def cli_value(self) -> str:
        return self.name.lower()


class CPAttentionBackend(IntEnum):
    """Calling convention of the `attn_fn` handed to `run_attention`.

    Only the FlashAttention varlen convention exists: ``attn_fn(q, cu_seqlens_q, kv_lens,
    max_seqlen_q)``. The enum keeps the seam where another convention (paged, MLA) would go.
    """

    VARLEN = 0

    @classmethod
    def from_string(cls, value: str) -> CPAttentionBackend:
        """Accept the engine's backend names that share the varlen convention."""
        if value in _VARLEN_NAMES:
            return cls.VARLEN
        valid = ", ".join(repr(n) for n in _VARLEN_NAMES)
        raise UnknownStrategyError(
            f"attention backend {value!r} has no CP calling convention; expected one of {valid}"
        )


_VARLEN_NAMES = ("varlen", "torch", "fa3", "flashinfer")
