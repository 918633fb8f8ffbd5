"""Kubernetes manifests: the SGLang launch inside one, and a LeaderWorkerSet for a layout.

Multi-node SGLang on Kubernetes is usually a LeaderWorkerSet (LWS): a group of `size` pods,
one leader and `size - 1` workers, each told its place by the environment LWS injects
(`LWS_LEADER_ADDRESS`, `LWS_GROUP_SIZE`, `LWS_WORKER_INDEX`), which the SGLang command turns
into `--dist-init-addr`, `--nnodes` and `--node-rank`. People paste such manifests (and
Pods, Deployments, StatefulSets) when asking why a launch fails, so:

- `manifest_launch(text)` finds the container that launches SGLang and gives its launch as
  shell text for the launch reader: `command:` + `args:` lists, or a shell's `-c` script
  (`- |` blocks), with the container's literal `env:` in front and Kubernetes' `$(VAR)`
  references replaced as the kubelet would (the container's env, and for an LWS the group
  size and the leader's index 0); a reference it cannot know stays a shell expansion, so
  that field is left unset rather than guessed. It says which container it judged and how
  many copies of that server its object runs (`replica_count`). What a container runs is
  read by `meshsat.solver.inputs.container`, as for bare command lists.
- `lws_manifest(...)` writes the LWS for a launch command (the words of `meshsat plan` or
  `fix`): leader and worker templates with the same command, `size` = nodes, one GPU
  resource request per pod, `replicas` = independent servers (meshsat.solver.cli.node_launch).

Reading a manifest back gives the layout it was written from (tests/test_k8s.py).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from meshsat.solver.catalogue.pd_pairs import DEFAULT_PORT
from meshsat.solver.errors import InputError
from meshsat.solver.inputs.container import ContainerCommand, container_command
from meshsat.solver.inputs.markdown import fenced_code

#: Kinds whose pods are read, and where their pod templates are.
POD_KINDS = ("Pod", "Deployment", "StatefulSet", "LeaderWorkerSet", "Job", "ReplicaSet")
#: Kinds whose `spec.replicas` runs that many copies of the pod template (a
#: LeaderWorkerSet's: copies of the whole group); a Pod or Job runs its template once here.
REPLICATED_KINDS = frozenset({"Deployment", "StatefulSet", "LeaderWorkerSet", "ReplicaSet"})
_REF = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
_SHELL_REF = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_LAUNCHER = re.compile(r"(-m\s+sglang(_router)?\.launch_server|\bsglang\s+serve)\b")
#: The port the leader listens on for `--dist-init-addr` in emitted manifests.
DIST_PORT = 20000


@dataclass(frozen=True)
class Container:
    """One container of a manifest, with where it sits (`LeaderWorkerSet/ds (worker)`)."""

    where: str
    name: str
    runs: ContainerCommand
    #: Values the platform injects for this container's `$(VAR)` references.
    injected: tuple[tuple[str, str], ...] = ()
    #: Its object's `spec.replicas` as written (`replica_count` reads it).
    replicas: object = None
    #: Pods per group of a LeaderWorkerSet (`group_size`); None for any other object.
    group_size: int | None = None

    def launches_sglang(self) -> bool:
        return bool(_LAUNCHER.search(" ".join(self.runs.words)))


def looks_like_manifest(text: str) -> bool:
    """Whether launch text is a Kubernetes manifest rather than a shell script (also in a
    Markdown code block: `markdown.fenced_code`)."""
    text = fenced_code(text)[0]
    return bool(re.search(r"(?m)^\s*apiVersion\s*:", text)) and bool(
        re.search(r"(?m)^\s*kind\s*:", text)
    )


class ReplicasError(InputError):
    """A server's object whose `spec.replicas` runs no server, or is no number: said as it
    is, never read around (the deployment reader reads a text it cannot read as one job)."""


def replica_count(value: object, where: str, field: str = "spec.replicas") -> int:
    """How many copies of its pod template (a LeaderWorkerSet: of its group) an object runs,
    from its `spec.replicas` as written: absent means 1, Kubernetes' default. Each copy is
    its own server, never a node of another. 0 (scaled to zero), a negative number or
    anything but a whole number is an `InputError`: there is no server to check, or the
    API server would refuse the object. `field`: where it is written (a compose service's
    `deploy.replicas`)."""
    if value is None:
        return 1
    if isinstance(value, bool) or not isinstance(value, int):
        raise ReplicasError(f"{where}: {field} must be a whole number, got {value!r}")
    if value < 1:
        raise ReplicasError(
            f"{where}: {field} is {value}: it runs no server to check (give 1 or more)"
        )
    return value


@dataclass(frozen=True)
class ManifestLaunch:
    """The launch a manifest's judged container runs: as shell text for the launch reader,
    the note naming that container, and how many copies of it its object runs."""

    text: str
    #: Which container was judged (`'sglang' of LeaderWorkerSet/ds`); "" for a compose
    #: service, which needs no note.
    container: str
    replicas: int
    #: The object that runs it (`LeaderWorkerSet/ds`), for what is said about its replicas.
    owner: str
    #: Pods per group of a LeaderWorkerSet, or the pods of a StatefulSet whose pods are
    #: one job's nodes (`pods_are_nodes`): JOB-GROUP-SIZE holds `--nnodes` to it. None for
    #: any other object.
    group_size: int | None = None
    #: The other containers that launch SGLang, as the note names them ("" for none).
    also: str = ""

    @property
    def note(self) -> str:
        """What the reading of the manifest says: the container judged, and its copies."""
        note = f"judged container {self.container}"
        if self.replicas > 1:
            lws = self.owner.startswith("LeaderWorkerSet/")
            note += f", one of {self.replicas} {'replica groups' if lws else 'replicas'}"
        elif self.group_size is not None and not self.owner.startswith("LeaderWorkerSet/"):
            note += f", whose {self.group_size} pods are the nodes of one server"
        return note + (f" (also launching SGLang: {self.also})" if self.also else "")

    def as_nodes(self) -> ManifestLaunch:
        """A StatefulSet whose pods are one server's nodes (`pods_are_nodes`): one server,
        whose pods JOB-GROUP-SIZE holds `--nnodes` to."""
        return replace(self, replicas=1, group_size=self.replicas)


def pods_are_nodes(owner: str, nnodes: object) -> bool:
    """Whether a StatefulSet's pods are the nodes of one job rather than servers of their
    own: its launch gives a literal `--nnodes` above 1 (SGLang's
    `docker/k8s-sglang-distributed-sts.yaml`: `replicas: 2`, `--nnodes 2 --node-rank
    $POD_INDEX`, the pod ordinal), so the object runs one server of `spec.replicas` nodes.
    A Deployment's pods have no ordinal to rank by."""
    return owner.startswith("StatefulSet/") and isinstance(nnodes, int) and nnodes > 1


def manifest_launch(text: str) -> ManifestLaunch:
    """The SGLang launch of a manifest and what it says about it. An `InputError` when no
    container launches SGLang, or the object that runs it has a `spec.replicas` that runs
    no server."""
    containers = list(_containers(_documents(fenced_code(text)[0])))
    launching = [c for c in containers if c.launches_sglang()]
    if not launching:
        kinds = ", ".join(sorted({c.where for c in containers})) or "no pod template"
        raise InputError(f"no container of the manifest launches SGLang (read: {kinds})")
    counts = [replica_count(c.replicas, c.where.partition(" ")[0]) for c in launching]
    chosen, replicas = launching[0], counts[0]  # the leader comes before its workers
    owner = chosen.where.partition(" ")[0]
    others = ", ".join(f"{c.name!r} of {c.where}" for c in launching[1:])
    container = f"{chosen.name!r} of {chosen.where}"
    return ManifestLaunch(
        _shell_text(chosen), container, replicas, owner, chosen.group_size, others
    )


def _documents(text: str) -> list[Mapping[str, Any]]:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        docs = [d for d in yaml.load_all(text, Loader=loader) if d is not None]
    except Exception as exc:  # yaml.YAMLError and its subclasses
        first = " ".join(str(exc).strip().splitlines()[:3])[:200]
        raise InputError(f"the manifest is not valid YAML: {first}") from None
    return [d for d in list_items(docs) if isinstance(d, Mapping)]


def list_items(docs: list[Any]) -> list[Any]:
    """The documents with each `kind: List` (what `kubectl get -o yaml` prints for several
    objects) replaced by its `items`, in order: every reader of manifests sees the objects,
    never the wrapper."""
    out: list[Any] = []
    for d in docs:
        if isinstance(d, Mapping) and d.get("kind") == "List":
            items = d.get("items")
            out += items if isinstance(items, list) else []
        else:
            out.append(d)
    return out


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, Mapping):
            return None
        obj = obj.get(key)
    return obj


def written_replicas(doc: Mapping[str, Any]) -> object:
    """An object's `spec.replicas` as written, for `replica_count`; None for a kind that
    has none (a Pod, a Job)."""
    return _get(doc, "spec", "replicas") if doc.get("kind") in REPLICATED_KINDS else None


def group_size(template: Any) -> int | None:
    """The pods of one group of a LeaderWorkerSet from its `spec.leaderWorkerTemplate`:
    `size` as written (absent: 1, LWS's default); None when it is no whole number (a
    template placeholder), which no rule then reads."""
    size = template.get("size", 1) if isinstance(template, Mapping) else None
    if isinstance(size, bool):
        return None
    if isinstance(size, int):
        return size
    return int(size) if isinstance(size, str) and size.strip().isdigit() else None


def _containers(docs: list[Mapping[str, Any]]) -> Iterator[Container]:
    for doc in docs:
        kind, name = doc.get("kind"), _get(doc, "metadata", "name") or "?"
        if kind not in POD_KINDS:
            continue
        # `replicas` copies run the same server apart (for an LWS, plain DP replicas
        # across nodes, meshsat.solver.cli.node_launch): the one judged is one copy.
        replicas = written_replicas(doc)
        if kind == "Pod":
            yield from _pod(f"Pod/{name}", doc.get("spec"), (), replicas)
        elif kind == "LeaderWorkerSet":
            lws = _get(doc, "spec", "leaderWorkerTemplate") or {}
            size = str(lws.get("size", 1))
            worker = _get(lws, "workerTemplate", "spec")
            leader = _get(lws, "leaderTemplate", "spec") or worker
            group = (("LWS_GROUP_SIZE", size),)
            leader_env = (*group, ("LWS_WORKER_INDEX", "0"))
            pods = group_size(lws)
            where = f"LeaderWorkerSet/{name}"
            yield from _pod(f"{where} (leader)", leader, leader_env, replicas, pods)
            yield from _pod(f"{where} (worker)", worker, group, replicas, pods)
        else:
            template = _get(doc, "spec", "template", "spec")
            yield from _pod(f"{kind}/{name}", template, (), replicas)


def _pod(
    where: str,
    spec: Any,
    injected: tuple[tuple[str, str], ...],
    replicas: object,
    pods: int | None = None,
) -> Iterator[Container]:
    if not isinstance(spec, Mapping):
        return
    for c in spec.get("containers") or []:
        if isinstance(c, Mapping):
            name = str(c.get("name", "?"))
            yield Container(where, name, container_command(c), injected, replicas, pods)


def _shell_text(c: Container) -> str:
    """The container's launch as the shell would see it: env assignments, then either the
    `-c` script of a shell or the words, each `$(VAR)` resolved where known."""
    env = c.runs.env
    known = {**dict(c.injected), **dict(env)}
    prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in env)
    if c.runs.script is not None:
        script = _REF.sub(lambda m: _known_or_shell(m, known), c.runs.script)
        script = _SHELL_REF.sub(lambda m: _shell_value(m, known), script)
        return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in env) + script
    rendered = [_word(w, known) for w in c.runs.words]
    return " ".join(x for x in (prefix, *rendered) if x)


def _shell_value(m: re.Match[str], known: Mapping[str, str]) -> str:
    """The shell fills `$VAR` and `${VAR}` from the container's environment."""
    name = m.group(1) or m.group(2)
    return known.get(name, m.group())


def _known_or_shell(m: re.Match[str], known: Mapping[str, str]) -> str:
    name = m.group(1)
    return known[name] if name in known else "${" + name + "}"


def _word(word: str, known: Mapping[str, str]) -> str:
    """One list item as a shell word: `$(VAR)` the kubelet would fill is filled; one it
    would not know becomes `${VAR}` (an expansion: that field stays unset)."""
    if not _REF.search(word):
        return shlex.quote(word)
    parts, last = [], 0
    for m in _REF.finditer(word):
        parts.append(shlex.quote(word[last : m.start()]) if m.start() > last else "")
        name = m.group(1)
        parts.append(shlex.quote(known[name]) if name in known else '"${' + name + '}"')
        last = m.end()
    parts.append(shlex.quote(word[last:]) if last < len(word) else "")
    return "".join(parts)


# --- writing -------------------------------------------------------------------------------


def lws_manifest(
    command: Sequence[str],
    *,
    nodes: int,
    gpus_per_node: int,
    replicas: int = 1,
    env: Sequence[tuple[str, str]] = (),
    name: str = "sglang",
    image: str = "lmsysorg/sglang:latest",
    gpu_resource: str = "nvidia.com/gpu",
    port: int = DEFAULT_PORT,
) -> str:
    """A LeaderWorkerSet running `command` (the SGLang launch words, without node flags)
    on `nodes` pods of `gpus_per_node` GPUs each; with more than one node, the command
    gets `--dist-init-addr $(LWS_LEADER_ADDRESS):20000 --nnodes $(LWS_GROUP_SIZE)
    --node-rank $(LWS_WORKER_INDEX)`; `replicas` groups run the same server independently
    (plain DP replicas, each its own server behind a router). The leader's `containerPort`
    is `port`, the one the command's `--port` says the server listens on."""
    import yaml

    if nodes < 1 or gpus_per_node < 1 or replicas < 1:
        raise InputError("a LeaderWorkerSet needs at least one group of one node of one GPU")
    words = list(command)
    if nodes > 1:
        words += [
            "--dist-init-addr",
            f"$(LWS_LEADER_ADDRESS):{DIST_PORT}",
            "--nnodes",
            "$(LWS_GROUP_SIZE)",
            "--node-rank",
            "$(LWS_WORKER_INDEX)",
        ]

    def template(role: str) -> dict[str, Any]:
        container: dict[str, Any] = {
            "name": f"sglang-{role}",
            "image": image,
            "command": list(words),  # a copy each: no YAML anchors in the output
            "resources": {"limits": {gpu_resource: gpus_per_node}},
        }
        if env:
            container["env"] = [{"name": k, "value": v} for k, v in env]
        if role == "leader":
            container["ports"] = [{"containerPort": port, "name": "http"}]
        return {
            "metadata": {"labels": {"role": role}},
            "spec": {"containers": [container]},
        }

    doc = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "leaderWorkerTemplate": {
                "size": nodes,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": template("leader"),
                "workerTemplate": template("worker"),
            },
        },
    }
    text: str = yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)
    return text


def leader_urls(lws: str, groups: int, port: int) -> list[str]:
    """The HTTP URL of each group's leader pod of LeaderWorkerSet `lws`: LWS names group
    g's leader `<lws>-<g>` and creates the headless Service `<lws>` (its default
    `subdomainPolicy: Shared`), so it answers at `<lws>-<g>.<lws>` in the namespace."""
    return [f"http://{lws}-{g}.{lws}:{port}" for g in range(groups)]


def router_manifest(
    command: Sequence[str],
    *,
    name: str,
    port: int,
    image: str = "lmsysorg/sglang:latest",
) -> str:
    """A Deployment of one pod running `command` (a router's launch words, listening on
    `port`) and a Service of the same name in front of it: the router holds no GPU and no
    state a restart loses, so it needs neither a LeaderWorkerSet nor a StatefulSet."""
    import yaml

    labels = {"app": name}
    container = {
        "name": name,
        "image": image,
        "command": list(command),
        "ports": [{"containerPort": port, "name": "http"}],
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": dict(labels)},
            "template": {"metadata": {"labels": dict(labels)}, "spec": {"containers": [container]}},
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {"selector": dict(labels), "ports": [{"name": "http", "port": port}]},
    }
    text: str = yaml.safe_dump_all([deployment, service], sort_keys=False, default_flow_style=False)
    return text


def launch_words(command_line: str) -> tuple[list[str], list[tuple[str, str]]]:
    """A rendered launch command (`VAR=1 python -m sglang.launch_server --tp 8  # ...`) as
    its words and its leading environment assignments."""
    words = shlex.split(command_line, comments=True)
    env: list[tuple[str, str]] = []
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        key, _, value = words.pop(0).partition("=")
        env.append((key, value))
    return words, env
