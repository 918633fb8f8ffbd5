"""The process's registered server arguments, read by the strategies and the registry.

Kept apart from the registry so that the seed's strategy class (which reads one server
argument per layer) does not import the registry that imports the strategies.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_server_args: Any = None


def set_global_server_args(server_args: Any) -> None:
    """Register the process's server arguments, from which `get_cp_strategy` initialises lazily
    (SGLang's worker processes re-import the module and recover the binding this way)."""
    global _server_args
    _server_args = server_args


def global_server_args() -> Any:
    return _server_args


def server_arg(server_args: Any, name: str, default: Any) -> Any:
    """`server_args.name` (an SGLang `ServerArgs`, a meshsat `Config`, a namespace) or
    `server_args[name]` (a mapping), `default` when absent."""
    if isinstance(server_args, Mapping):
        return server_args.get(name, default)
    return getattr(server_args, name, default)
