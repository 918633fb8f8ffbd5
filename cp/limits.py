"""The documented bounds on what `cp` accepts, like the solver's (`meshsat.solver.lang.limits`).

Why: a plan holds a few int64 index tensors of the forward's token count, and FlashAttention
takes kv lengths as int32, so an absurd length (`build_metadata(2**40, [2**40])`) must be
refused with one `CPBatchError` naming the argument before any allocation, not fail deep in
torch's allocator. The bounds are far above any real prefill:

- `MAX_TOKENS` (2**26, about 67 million): tokens in one forward, and the length of any one
  sequence (its cached prefix included). The longest context windows served today are about
  10 million tokens; 2**26 keeps every kv length well inside int32 and a plan's index tensors
  under 512 MiB each.
- `MAX_CP_SIZE`: the solver's `MAX_GPUS` (2**20); a CP group is a set of GPUs.
"""

from __future__ import annotations

from meshsat.solver.lang.limits import MAX_GPUS

MAX_TOKENS = 1 << 26
MAX_CP_SIZE = MAX_GPUS


def check_cp_size(cp_size: object) -> int:
    """`cp_size` as an int in [1, MAX_CP_SIZE], or a `CPConfigError` naming it."""
    from meshsat.cp.kinds import CPConfigError

    if isinstance(cp_size, bool) or not isinstance(cp_size, int) or cp_size < 1:
        raise CPConfigError(f"cp_size must be an int >= 1, got {cp_size!r}")
    if cp_size > MAX_CP_SIZE:
        raise CPConfigError(f"cp_size {cp_size} is over the limit of {MAX_CP_SIZE} ranks")
    return cp_size
