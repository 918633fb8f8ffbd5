"""Launch commands held in a manifest's lists: Kubernetes `command:`/`args:`, compose files.

Why a module of its own: a manifest is YAML, not shell. Its list items are the words of the
command already split (`- --tp` then `- "8"`), which no shell parser reads back as one
command. A container's `command` and `args` concatenate, as the kubelet runs them; a
`sh -c`/`bash -c` script among them is shell text again and goes back to the shell reader.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from meshsat.solver.errors import InputError

#: Text that looks like a manifest: a `command:` or `args:` key at the start of a line.
_MANIFEST_KEY = re.compile(r"^[ \t-]*(command|args)[ \t]*:", re.MULTILINE)
_SHELLS = ("sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/bash", "/usr/bin/env bash")


@dataclass(frozen=True)
class ListedCommand:
    """One container's command as its manifest lists it: the words with where each starts
    in the text, the environment it sets, and a `sh -c` script where the words are one."""

    line: int
    words: tuple[tuple[str, int], ...]
    env: tuple[tuple[str, str], ...]
    script: str | None = None


def manifest_commands(text: str) -> list[ListedCommand] | None:
    """The commands of a YAML manifest, or None where the text is not one (the caller reads
    it as shell)."""
    if not _MANIFEST_KEY.search(text):
        return None
    import yaml

    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError:
        return None  # shell text with a `command:` word in it
    except RecursionError:
        raise InputError("the manifest is nested too deeply to read") from None
    found: list[ListedCommand] = []
    cursor = 0
    for container in _containers(docs):
        items = [*_as_list(container.get("command")), *_as_list(container.get("args"))]
        env = tuple(_env(container.get("env", container.get("environment"))))
        if len(items) >= 2 and items[0] in _SHELLS and "-c" in items[1:3]:
            script = " ".join(items[items.index("-c") + 1 :])
            found.append(ListedCommand(1, (), env, script))
            continue
        words = []
        for item in items:
            pos = text.find(item, cursor)
            pos = cursor if pos < 0 else pos
            cursor = max(cursor, pos + len(item))
            words.append((item, pos))
        line = text.count("\n", 0, words[0][1]) + 1 if words else 1
        found.append(ListedCommand(line, tuple(words), env))
    return found or None


def _containers(node: Any) -> Iterator[dict[str, Any]]:
    """Every mapping with a `command` or `args` key, depth first, in document order."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if "command" in item or "args" in item:
                yield item
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _as_list(value: Any) -> list[str]:
    """A command or args entry as words: a list's items, or a string split as shell does."""
    if value is None:
        return []
    if isinstance(value, list):
        return [str(v) for v in value if not isinstance(v, (dict, list))]
    import shlex

    try:
        return shlex.split(str(value), comments=True)
    except ValueError:
        return str(value).split()


def _env(value: Any) -> Iterator[tuple[str, str]]:
    """Kubernetes `env: [{name, value}]` or compose `environment:`-style mappings."""
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict) and "name" in item and "value" in item:
                yield str(item["name"]), str(item["value"])
    elif isinstance(value, dict):
        yield from ((str(k), str(v)) for k, v in value.items())


def expansion(item: str) -> str | None:
    """The shell expansion in one listed word (the kubelet expands `$(VAR)`), or None."""
    m = re.search(r"\$\(?\{?[A-Za-z_][A-Za-z0-9_]*\}?\)?", item)
    return m.group() if m else None
