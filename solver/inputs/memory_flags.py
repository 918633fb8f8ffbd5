"""SGLang flags that size the memory pools without being layout fields.

`--mem-fraction-static`, `--context-length`, `--kv-cache-dtype`, `--page-size`,
`--swa-full-tokens-ratio`, `--mamba-full-memory-ratio`, `--max-total-tokens` (a cap on
each rank's KV pool), `--cpu-offload-gb` (decoder-layer weights kept in host memory) and
`--dtype` (what unquantized weights, and an `auto` KV cache, are served in) size the pools.
`--context-length`, `--kv-cache-dtype`, `--swa-full-tokens-ratio` and `--page-size` are
`Config` fields too (rules read them: solver/catalogue/kv_cache.py, page_size.py, and the
speculative page-tree checks, speculative.py), and are kept here as well; the others change
no rule, so they are not `Config` fields. The memory verdict (`MEM-FIT`, the KV tokens) of a
pasted launch must be the one SGLang would reach with them, or a command `meshsat plan`
printed with a raised `--mem-fraction-static` reads "does not fit" when pasted back. A
launch command's values are kept here under the memory model's keyword names
(`meshsat.solver.memory.MemoryModel`), and the CLI sizes memory with them
(`meshsat.solver.cli.memory_options`); meshsat's own option, given explicitly, wins. Flags
the memory model has no option for (`--offload-group-size`, ...) stay "not checked by
meshsat".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any

from meshsat.solver.errors import InputError

_SI = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_IEC = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def human_readable_int(text: str) -> int:
    """An integer as SGLang's `human_readable_int` (0.5.18 to 0.5.23) reads
    `--max-total-tokens`: plain, or with a case-sensitive SI suffix (`25.6k` is 25,600) or
    an IEC one, whole numbers only (`1Ki` is 1,024); anything else is refused."""
    value = text.strip()
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(Ki|Mi|Gi|Ti|k|M|G|T)", value)
    if match is None:
        return int(value)
    number, suffix = match.groups()
    if suffix in _IEC:
        if "." in number:
            raise ValueError(text)
        return int(number) * _IEC[suffix]
    return int(Decimal(number) * _SI[suffix])


#: flag -> (the memory model's keyword, the value's type), as SGLang's parser types it.
MEMORY_FLAGS: Mapping[str, tuple[str, Callable[[str], Any]]] = {
    "--mem-fraction-static": ("mem_fraction_static", float),
    "--context-length": ("context_length", int),
    "--kv-cache-dtype": ("kv_cache_dtype", str),
    "--page-size": ("page_size", int),
    "--swa-full-tokens-ratio": ("swa_full_tokens_ratio", float),
    "--mamba-full-memory-ratio": ("mamba_full_memory_ratio", float),
    "--max-total-tokens": ("max_total_tokens", human_readable_int),
    "--cpu-offload-gb": ("cpu_offload_gb", int),
    "--dtype": ("dtype", str),
}
#: How an error names what each parser takes.
_WHAT: Mapping[Callable[[str], Any], str] = {
    int: "an integer",
    human_readable_int: "an integer (or 1k, 1M, 1Ki, ...)",
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
        what = _WHAT.get(kind, "a number")
        raise InputError(f"{flag} expects {what}, got {text!r}") from None
