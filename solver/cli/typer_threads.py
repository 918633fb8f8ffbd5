"""One lock around typer's adapter building, so that threads may run the CLI at once.

Why: typer 0.29 builds each parameter's pydantic adapter inside
`typer._adapters.disabled_pydantic_plugins`, which sets `PYDANTIC_DISABLE_PLUGINS` in
`os.environ` and deletes it afterwards. Two threads parsing arguments at the same moment
can both see it unset and both delete it: the second raises `KeyError`
(tests/test_cli_threads.py caught it, once in several `.ci/run`s). Serialising that one
short step keeps `meshsat.solver.cli.main` safe to call from threads; nothing else of the
command is serialised.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

_LOCK = threading.RLock()
_installed = False


def install() -> None:
    """Wrap typer's context manager in `_LOCK` (once; a typer without it is left as is)."""
    global _installed
    try:
        from typer import _adapters
    except ImportError:
        return
    original: Callable[[], AbstractContextManager[None]] | None = getattr(
        _adapters, "disabled_pydantic_plugins", None
    )
    if _installed or original is None:
        return

    @contextmanager
    def locked() -> Iterator[None]:
        with _LOCK, original():
            yield

    _adapters.disabled_pydantic_plugins = locked
    _installed = True
