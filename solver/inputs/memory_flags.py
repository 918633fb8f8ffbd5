"""SGLang flags that size the memory pools without being layout fields.

`--mem-fraction-static`, `--context-length`, `--kv-cache-dtype`, `--page-size`,
`--swa-full-tokens-ratio` and `--mamba-full-memory-ratio` change no rule, so they are not
`Config` fields; but the memory verdict (`MEM-FIT`, the KV tokens) of a pasted launch must
be the one SGLang would reach with them, or a command `meshsat plan` printed with a raised
`--mem-fraction-static` reads "does not fit" when pasted back. A launch command's values are
kept here under the memory model's keyword names (`meshsat.solver.memory.MemoryModel`),
and the CLI sizes memory with them (`meshsat.solver.cli.memory_options`); meshsat's own
option, given explicitly, wins. Flags the memory model has no option for
(`--max-total-tokens`, `--cpu-offload-gb`, ...) stay "not checked by meshsat".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from meshsat.solver.errors import InputError

#: flag -> (the memory model's keyword, the value's type), as SGLang's parser types it.
MEMORY_FLAGS: Mapping[str, tuple[str, Callable[[str], Any]]] = {
    "--mem-fraction-static": ("mem_fraction_static", float),
    "--context-length": ("context_length", int),
    "--kv-cache-dtype": ("kv_cache_dtype", str),
    "--page-size": ("page_size", int),
    "--swa-full-tokens-ratio": ("swa_full_tokens_ratio", float),
    "--mamba-full-memory-ratio": ("mamba_full_memory_ratio", float),
}
#: keyword -> the flag that spells it, for notes.
FLAG_OF: Mapping[str, str] = {keyword: flag for flag, (keyword, _) in MEMORY_FLAGS.items()}


def memory_value(flag: str, text: str) -> tuple[str, Any]:
    """The memory model's keyword and value for `flag text`; a value SGLang's parser would
    refuse (`--page-size big`) is refused here in one line, as it would be there."""
    keyword, kind = MEMORY_FLAGS[flag]
    try:
        return keyword, kind(text)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise InputError(f"{flag} expects {what}, got {text!r}") from None
