"""A container's launch as a manifest lists it: the words, the environment, a shell's script.

Both manifest readers need this, and must agree on it: `k8s.py` (whole Kubernetes manifests,
judged by pod template) and `manifest.py` (bare `command:`/`args:` lists and compose
services, read word by word with positions). A container's `command` and `args` concatenate,
as the kubelet runs them, and so do a compose service's `entrypoint` and `command` (the
image's entry point replaced, then its arguments: SGLang's own compose file launches so); a
string where a list belongs is split as a shell would (compose allows it); a shell run with
`-c` runs the one word after it as a script, the words after that being its `$0`, `$1`, ...
(what `sh -c` does), so only that word is the launch.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

#: A shell program: `sh`, `bash`, `zsh` or `dash`, with or without a path or `env`.
_SHELL = re.compile(r"(^|/)(env\s+)?(ba|z|da)?sh$")
_ENV = re.compile(r"(^|/)env$")


@dataclass(frozen=True)
class ContainerCommand:
    """The launch of one container: `command` then `args`, the literal environment it sets,
    and the script when the words run a shell's `-c` (None otherwise)."""

    words: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    script: str | None


def has_command(node: Mapping[str, Any]) -> bool:
    """Whether a mapping is a container (or compose service) that says what it runs."""
    return "command" in node or "args" in node or "entrypoint" in node


def container_command(container: Mapping[str, Any]) -> ContainerCommand:
    """What a container (a Kubernetes container or a compose service) runs."""
    listed = (container.get(key) for key in ("entrypoint", "command", "args"))
    words = tuple(word for value in listed for word in _as_words(value))
    env = tuple(_env(container.get("env", container.get("environment"))))
    return ContainerCommand(words, env, shell_script(words))


def shell_script(words: tuple[str, ...]) -> str | None:
    """The `-c` script of a shell among its leading options, or None where the words do not
    run one (a shell with `-c` and nothing after it runs an empty script)."""
    start = 1 if words and _ENV.search(words[0]) else 0
    if len(words) <= start or not _SHELL.search(words[start]):
        return None
    for i in range(start + 1, len(words)):
        if words[i] == "-c":
            return words[i + 1] if i + 1 < len(words) else ""
        if not words[i].startswith("-"):
            return None
    return None


def _as_words(value: Any) -> list[str]:
    """A command or args entry as words: a list's scalar items, or a string split as the
    shell does (compose's `command: python3 -m ...`)."""
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value if not isinstance(v, (dict, list))]
    try:
        return shlex.split(str(value), comments=True)
    except ValueError:
        return str(value).split()


def _env(value: Any) -> Iterator[tuple[str, str]]:
    """Kubernetes `env: [{name, value}]` or a compose `environment:` mapping; a variable
    without a literal value (`valueFrom:`, a bare compose key) is not known here."""
    if isinstance(value, list):
        for item in value:
            if isinstance(item, Mapping) and "name" in item and _scalar(item.get("value")):
                yield str(item["name"]), str(item["value"])
    elif isinstance(value, Mapping):
        yield from ((str(k), str(v)) for k, v in value.items() if _scalar(v))


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float)
