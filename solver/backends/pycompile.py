"""Generated Python source to a function: the one place meshsat calls `exec`.

Both code generators (the catalogue's `resolve`/`violations`/`derived` in
`solver.backends.pyeval`, and enumeration's per-flag-combination loops in
`solver.enumeration.codegen`) hand their source here, so compiled code is always labelled
the same way in tracebacks (`<meshsat:NAME>`) and always keeps its text on
`__meshsat_source__` for debugging and tests.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def compile_function(source: str, name: str, label: str | None = None) -> Callable[..., Any]:
    """Execute `source` in a fresh namespace and return its function `name`.

    `label` names the source in tracebacks (default: the function's name).
    """
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<meshsat:{label or name}>", "exec"), namespace)
    fn: Callable[..., Any] = namespace[name]
    fn.__meshsat_source__ = source  # type: ignore[attr-defined]
    return fn


def source_of(fn: Callable[..., Any]) -> str:
    """The generated source a compiled function was made from."""
    text: str = fn.__meshsat_source__  # type: ignore[attr-defined]
    return text
