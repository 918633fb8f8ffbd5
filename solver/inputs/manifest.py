"""Launch commands held in a manifest's lists: Kubernetes `command:`/`args:`, compose files.

Why a module of its own: a manifest is YAML, not shell. Its list items are the words of the
command already split (`- --tp` then `- "8"`), which no shell parser reads back as one
command. A container's `command` and `args` concatenate, as the kubelet runs them; a
`sh -c`/`bash -c` script among them is shell text again and goes back to the shell reader.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from meshsat.solver.errors import InputError

if TYPE_CHECKING:
    from meshsat.solver.inputs.launch import LaunchCommand

#: Text that looks like a manifest: a `command:` or `args:` key at the start of a line.
_MANIFEST_KEY = re.compile(r"^[ \t-]*(command|args)[ \t]*:", re.MULTILINE)
_SHELLS = ("sh", "bash", "/bin/sh", "/bin/bash", "/usr/bin/bash", "/usr/bin/env bash")


def manifest_commands(text: str) -> tuple[LaunchCommand, ...] | None:
    """The launches of a YAML manifest (a tuple of `LaunchCommand`), or None where the text
    is not one (the caller reads it as shell)."""
    if not _MANIFEST_KEY.search(text):
        return None
    import yaml

    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError:
        return None  # shell text with a `command:` word in it
    except RecursionError:
        raise InputError("the manifest is nested too deeply to read") from None
    from meshsat.solver.inputs.launch import (
        LaunchCommand,
        Word,
        _launcher,
        _split_assignment,
        read_launch_commands,
    )

    found: list[LaunchCommand] = []
    cursor = 0
    for container in _containers(docs):
        items = [*_as_list(container.get("command")), *_as_list(container.get("args"))]
        env = tuple(_env(container.get("env", container.get("environment"))))
        if len(items) >= 2 and items[0] in _SHELLS and "-c" in items[1:3]:
            script = " ".join(items[items.index("-c") + 1 :])
            try:
                inner = read_launch_commands(script)
            except InputError:
                continue
            found += [
                LaunchCommand(c.line, c.program, (*env, *c.env), c.words, "yaml", c.notes)
                for c in inner
            ]
            continue
        start = _launcher(items)
        if start is None:
            continue
        end, program = start
        words = []
        for item in items:
            pos = text.find(item, cursor)
            pos = cursor if pos < 0 else pos
            cursor = pos + len(item) if pos >= cursor else cursor
            words.append(Word(item, pos, _expansion(item), pos + len(item)))
        assignments = [a for w in items[: end - 1] if (a := _split_assignment(w)) is not None]
        line = text.count("\n", 0, words[0].pos) + 1 if words else 1
        found.append(
            LaunchCommand(
                line,
                program,
                (*env, *assignments),
                tuple(words[end:]),
                "yaml",
                ("read from the manifest's command/args list",),
            )
        )
    return tuple(found) if found else None


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


def _expansion(item: str) -> str | None:
    m = re.search(r"\$\(?\{?[A-Za-z_][A-Za-z0-9_]*\}?\)?", item)
    return m.group() if m else None
