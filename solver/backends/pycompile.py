"""Generated Python source to a function: the one place meshsat calls `exec`.

Both code generators (the catalogue's `resolve`/`violations`/`derived` in
`meshsat.solver.backends.pyeval`, and enumeration's per-flag-combination loops in
`meshsat.solver.enumeration.codegen`) hand their source here, so compiled code is always labelled
the same way in tracebacks (`<meshsat:NAME>`) and always keeps its text on
`__meshsat_source__` for debugging and tests.

Choosing a pack costs one compilation of its catalogue per process, and CPython's
compiler needs several milliseconds for the long boolean expressions of a catalogue, more
than the rest of start-up. So, like CPython's own `__pycache__`, the code object of a
`cache=True` source is kept on disk, keyed by the SHA-256 of the exact source text and the
interpreter's bytecode magic number: a cached entry can only ever be the compilation of the
same text by the same interpreter, never stale. Generating the source (under a
millisecond) still happens every time. `MESHSAT_CACHE_DIR` moves the cache,
`MESHSAT_NO_CACHE=1` turns it off; an unwritable or damaged cache only costs the
compilation.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import tempfile
from collections.abc import Callable
from importlib.util import MAGIC_NUMBER
from pathlib import Path
from types import CodeType
from typing import Any


def compile_function(
    source: str, name: str, label: str | None = None, *, cache: bool = False
) -> Callable[..., Any]:
    """Execute `source` in a fresh namespace and return its function `name`.

    `label` names the source in tracebacks (default: the function's name). `cache` keeps
    the code object on disk for the next process (for the few, fixed catalogue sources).
    """
    filename = f"<meshsat:{label or name}>"
    code = _cached_code(source, filename) if cache else None
    if code is None:
        code = compile(source, filename, "exec")
        if cache:
            _store(source, filename, code)
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    fn: Callable[..., Any] = namespace[name]
    fn.__meshsat_source__ = source  # type: ignore[attr-defined]
    return fn


def source_of(fn: Callable[..., Any]) -> str:
    """The generated source a compiled function was made from."""
    text: str = fn.__meshsat_source__  # type: ignore[attr-defined]
    return text


def cache_dir() -> Path | None:
    """Where compiled catalogue code is kept, or None when caching is off."""
    if os.environ.get("MESHSAT_NO_CACHE", "") not in ("", "0"):
        return None
    explicit = os.environ.get("MESHSAT_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "meshsat" / "code"


def _path(source: str, filename: str) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    key = hashlib.sha256(MAGIC_NUMBER + filename.encode() + b"\0" + source.encode()).hexdigest()
    return folder / f"{key}.bin"


def _cached_code(source: str, filename: str) -> CodeType | None:
    path = _path(source, filename)
    if path is None:
        return None
    try:
        code = marshal.loads(path.read_bytes())
    except (OSError, ValueError, EOFError, TypeError):
        return None
    return code if isinstance(code, CodeType) and code.co_filename == filename else None


def _store(source: str, filename: str, code: CodeType) -> None:
    path = _path(source, filename)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.write(marshal.dumps(code))
        os.replace(tmp, path)  # atomic: a reader sees the old file or the whole new one
    except OSError:
        return
