"""A model's context length as SGLang reads it, and the workloads that exceed it.

Why: SGLang's tokenizer manager refuses a request whose prompt plus `max_new_tokens`
exceeds the server's context length ("Requested token count exceeds the model's maximum
context length"), which by default is the config's (`get_context_length`,
utils/hf_transformers/common.py in 0.5.23). An estimate for such requests describes a
server that answers none of them: `plan -m meta-llama/Llama-3.1-8B-Instruct --isl 200000`
planned layouts meeting the SLA for a model of 131,072 positions. A server launched with a
longer `--context-length` does not start either (`ModelConfig._derive_context_length`
raises "... is greater than the derived context_length" unless
SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1), so meshsat's own `--context-length` (the
tokens of one request, for the requests that fit) is held to the same limit.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from meshsat.solver.errors import InputError
from meshsat.solver.lang.context import CONTEXT_KEYS, DEFAULT_CONTEXT, context_length

__all__ = ["CONTEXT_KEYS", "DEFAULT_CONTEXT", "context_length"]

#: meshsat's `--context-length` (`plan --rank kv`, `enumerate --gpu`, `validate --gpu`)
#: where neither the user nor a launch command gives one, cut to the model's own where
#: that is shorter (TinyLlama's 2,048): a request that long is all the model takes.
DEFAULT_CONTEXT_LENGTH = 4096


def check_request_fits(config: Mapping[str, Any], isl: int, osl: int, model: str) -> None:
    """One line (exit 2) for requests of `isl` + `osl` tokens the server would refuse."""
    limit, key = context_length(config)
    if isl + osl > limit:
        raise InputError(
            f"--isl {isl:,} + --osl {osl:,} = {isl + osl:,} tokens is more than the context "
            f"length of {model}, {limit:,} ({key}): SGLang refuses such requests"
        )


def checked_context_length(config: Mapping[str, Any], given: int | None, model: str) -> int:
    """The tokens per request the memory verdict counts requests of: `given` (a user's
    `--context-length`), refused with one line (exit 2) beyond the model's context length,
    as `check_request_fits` refuses `--isl` + `--osl`; `DEFAULT_CONTEXT_LENGTH` (or the
    model's, where shorter) when None. `plan --rank kv --context-length 10000000` counted
    0 requests that fit and exited 0."""
    limit, key = context_length(config)
    if given is None:
        return min(DEFAULT_CONTEXT_LENGTH, limit)
    if given > limit:
        raise InputError(
            f"--context-length {given:,} is more than the context length of {model}, "
            f"{limit:,} ({key}): SGLang refuses such requests (and to start with that "
            "--context-length unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1)"
        )
    return given
