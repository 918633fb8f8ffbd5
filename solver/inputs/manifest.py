"""Launch commands held in a manifest's lists: Kubernetes `command:`/`args:`, compose files.

Why a module of its own: a manifest is YAML, not shell. Its list items are the words of the
command already split (`- --tp` then `- "8"`), which no shell parser reads back as one
command. What a container runs is read by `meshsat.solver.inputs.container` (as for whole
Kubernetes manifests); a `sh -c`/`bash -c` script is shell text again and goes back to the
shell reader.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from meshsat.solver.errors import InputError
from meshsat.solver.inputs.container import container_command, has_command
from meshsat.solver.inputs.k8s import group_size, list_items, written_replicas

#: Text that looks like a manifest: a `command:` or `args:` key at the start of a line.
_MANIFEST_KEY = re.compile(r"^[ \t-]*(command|args)[ \t]*:", re.MULTILINE)


@dataclass(frozen=True)
class ListedCommand:
    """One container's command as its manifest lists it: the words with where each starts
    in the text, the environment it sets, and a `sh -c` script where the words are one."""

    line: int
    words: tuple[tuple[str, int], ...]
    env: tuple[tuple[str, str], ...]
    script: str | None = None
    #: Its object's `spec.replicas` as written, and the object (`LeaderWorkerSet/ds`):
    #: `replica_count` reads them once the container is known to launch a server.
    replicas: object = None
    owner: str = ""
    #: Where `replicas` is written, for what is said about it.
    replicas_field: str = "spec.replicas"
    #: Pods per group of a LeaderWorkerSet (`k8s.group_size`); None for any other object.
    group_size: int | None = None


def manifest_commands(text: str) -> list[ListedCommand] | None:
    """The commands of a YAML manifest, or None where the text is not one (the caller reads
    it as shell)."""
    if not _MANIFEST_KEY.search(text):
        return None
    import yaml

    try:
        docs = list_items([d for d in yaml.safe_load_all(text) if d is not None])
    except yaml.YAMLError:
        return None  # shell text with a `command:` word in it
    except RecursionError:
        raise InputError("the manifest is nested too deeply to read") from None
    found: list[ListedCommand] = []
    cursor = 0
    for container, injected, copies in _injected_containers(docs):
        listed = container_command(container)
        if listed.script is not None:
            line, cursor = _script_place(text, listed.script, cursor)
            found.append(ListedCommand(line, (), listed.env, listed.script, *copies))
            continue
        words = []
        for item in listed.words:
            pos = text.find(item, cursor)
            pos = cursor if pos < 0 else pos
            cursor = max(cursor, pos + len(item))
            words.append((_filled(item, injected), pos))
        line = text.count("\n", 0, words[0][1]) + 1 if words else 1
        found.append(ListedCommand(line, tuple(words), listed.env, None, *copies))
    return found or None


def _script_place(text: str, script: str, cursor: int) -> tuple[int, int]:
    """The line of the manifest where a `sh -c` script's first line is (its line 1: a
    launch on the script's line k is on this line + k - 1), and the cursor past the script's
    last line, so that later containers' words are not found inside it. The script is
    found by its first and last lines as written (a block scalar is indented, a flow one
    may be escaped: then the line is the container's best guess, the cursor unmoved)."""
    lines = script.splitlines()
    filled = [i for i, x in enumerate(lines) if x.strip()]
    if not filled:
        return text.count("\n", 0, cursor) + 1, cursor
    first, last = lines[filled[0]].strip(), lines[filled[-1]].strip()
    start = text.find(first, cursor)
    if start < 0:
        return text.count("\n", 0, cursor) + 1, cursor
    end = text.find(last, start)
    end = start + len(first) if end < 0 else end + len(last)
    return text.count("\n", 0, start) + 1 - filled[0], end


_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


#: A container's object: its replicas as written, its name, where the replicas are written
#: and its pods per group (a LeaderWorkerSet's; None for others).
_Copies = tuple[object, str, str, int | None]
#: A container, the `$(VAR)` values injected into it, and its object.
_Injected = tuple[dict[str, Any], dict[str, str], _Copies]


def _injected_containers(docs: list[Any]) -> Iterator[_Injected]:
    """Every container with the `$(VAR)` values its platform injects and the manifest
    states: a LeaderWorkerSet's group size, and its leader's worker index 0 (the worker
    template's index and every leader address stay expansions: one template stands for
    each worker of each group). The leader and worker of one group then read as the
    nodes of one server (meshsat.solver.deployment.reader), as `manifest_launch` judges
    the leader alone; the object's `replicas` are copies of that server, as a compose
    service's `deploy.replicas` (else its `scale`) are of its container."""
    for doc in docs:
        services = _compose_services(doc)
        if services is not None:
            for name, service in services.items():
                copies: _Copies = (
                    _compose_replicas(service),
                    f"compose service {name}",
                    "deploy.replicas",
                    None,
                )
                yield from ((c, {}, copies) for c in _containers(service))
            continue
        copies = _copies(doc)
        lws = doc.get("spec", {}).get("leaderWorkerTemplate") if _is_lws(doc) else None
        if not isinstance(lws, dict):
            yield from ((c, {}, copies) for c in _containers(doc))
            continue
        copies = (*copies[:3], group_size(lws))
        group = {"LWS_GROUP_SIZE": str(lws.get("size", 1))}
        leader = lws.get("leaderTemplate") or lws.get("workerTemplate")
        yield from ((c, {**group, "LWS_WORKER_INDEX": "0"}, copies) for c in _containers(leader))
        if str(lws.get("size", 1)) != "1":  # a group of one pod runs its leader only
            yield from ((c, group, copies) for c in _containers(lws.get("workerTemplate")))


def _copies(doc: Any) -> _Copies:
    """A Kubernetes object's `spec.replicas` as written and its name (`Deployment/r`); no
    replicas for anything else (a bare list)."""
    if not isinstance(doc, dict) or not isinstance(doc.get("spec"), dict):
        return None, "", "spec.replicas", None
    meta = doc.get("metadata")
    name = meta.get("name", "?") if isinstance(meta, dict) else "?"
    return written_replicas(doc), f"{doc.get('kind')}/{name}", "spec.replicas", None


def _compose_services(doc: Any) -> dict[str, Any] | None:
    """A Docker Compose file's services (name -> service), or None for anything else (a
    Kubernetes object has a `kind`)."""
    if not isinstance(doc, dict) or "kind" in doc or not isinstance(doc.get("services"), dict):
        return None
    return {str(k): v for k, v in doc["services"].items() if isinstance(v, dict)}


def _compose_replicas(service: dict[str, Any]) -> object:
    """How many containers Compose runs of a service, as written: `deploy.replicas`, else
    the older `scale` (Compose requires the two to agree where both are given), else None
    (one, Compose's default)."""
    deploy = service.get("deploy")
    if isinstance(deploy, dict) and "replicas" in deploy:
        return deploy["replicas"]
    return service.get("scale")


def _filled(item: str, injected: dict[str, str]) -> str:
    """A listed word with each `$(VAR)` the platform injects filled, as the kubelet does."""
    return _REF.sub(lambda m: injected.get(m.group(1), m.group()), item)


def _is_lws(doc: Any) -> bool:
    return (
        isinstance(doc, dict)
        and doc.get("kind") == "LeaderWorkerSet"
        and isinstance(doc.get("spec"), dict)
    )


def _containers(node: Any) -> Iterator[dict[str, Any]]:
    """Every mapping with a `command` or `args` key, depth first, in document order."""
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if has_command(item):
                yield item
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def expansion(item: str) -> str | None:
    """The shell expansion in one listed word (the kubelet expands `$(VAR)`), or None."""
    m = re.search(r"\$\(?\{?[A-Za-z_][A-Za-z0-9_]*\}?\)?", item)
    return m.group() if m else None
