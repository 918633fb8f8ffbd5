"""Where a command's layout comes from, and the layout it reads: one value each.

`LayoutSources` is what the user gave (an example, a file, an SGLang command or script,
`--set`s, a model); `load_layout` merges them in a fixed order (example, then file, then the
SGLang command line, then `--set`) into a `LayoutInput`: the config, the model facts, and the
notes a command prints on stderr. Every command that reads a layout goes through here, so the
merge order and the refusals are the same everywhere.
"""

from __future__ import annotations

import re
import stat
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from meshsat.solver.errors import InputError
from meshsat.solver.inputs.accelerator import (
    CUDA_VISIBLE_DEVICES_ENV,
    assume_node_size,
    infer_platform,
)
from meshsat.solver.inputs.command import model_path_of
from meshsat.solver.inputs.convert import as_model, coerce, config_from_values
from meshsat.solver.inputs.files import load_config_file
from meshsat.solver.inputs.k8s import (
    ManifestLaunch,
    looks_like_manifest,
    manifest_launch,
    pods_are_nodes,
)
from meshsat.solver.inputs.launch import LaunchCommand
from meshsat.solver.inputs.sglang_cmdline import (
    PER_NODE_FIELDS,
    JobIssue,
    NodePlacement,
    ParsedCommandLine,
    group_size_issue,
    parse_sglang_command,
    release_flags,
    release_refusals,
    taken_elsewhere,
    unmodelled_values,
)
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.limits import clipped, listed
from meshsat.solver.lang.model_spec import ModelSpec

#: A launch script is a few kilobytes; a larger file is refused before it is read.
MAX_SCRIPT_BYTES = 1 << 20

#: Repository id -> its config.json facts (the embedded model catalogue lives with the memory
#: model, above this layer, so a caller that wants repo ids hands its lookup in).
Catalogue = Callable[[str], Mapping[str, Any]]


@dataclass(frozen=True)
class LayoutSources:
    """The layout inputs as given; every field optional."""

    config: Path | None = None
    sets: tuple[str, ...] = ()
    sglang: str | None = None
    sglang_file: Path | None = None
    model: Path | None = None
    example: str | None = None
    #: The launch text of `sglang` / `sglang_file` once read (`with_script`): standard input
    #: or a pipe gives it only once, so every later reader takes it from here.
    script: str | None = None

    @property
    def given(self) -> bool:
        """Whether any layout input was given (a command may then compare layouts)."""
        return any(
            x is not None
            for x in (self.config, self.sglang, self.sglang_file, self.model, self.example)
        ) or bool(self.sets)


@dataclass(frozen=True)
class LayoutInput:
    """What the sources read: the merged config, model facts, and the notes (ignored flags,
    shell expansions) for stderr. Distinct from `solver.Layout`, an enumerated layout.

    From a launch command also: `job`, how the nodes of a multi-node script disagree;
    `missing_flags`, the flags the release would refuse (with the closest it has), for
    `missing_in` (a version, or None: no recorded release has them); `model_source`, the
    config path or repository id the model facts came from."""

    config: Config
    model: ModelSpec | None
    notes: tuple[str, ...] = field(default=())
    job: tuple[JobIssue, ...] = ()
    missing_flags: tuple[tuple[str, str | None], ...] = ()
    missing_in: str | None = None
    model_source: str | None = None
    #: The launch text as read (a script, a pasted command or standard input), for --rewrite.
    script: str | None = None
    #: The model as SGLang's `--model-path` takes it (`--model`, else the command's own), for
    #: the commands meshsat prints (`meshsat.solver.inputs.command`).
    model_path: str | None = None
    #: From a Kubernetes manifest: the object that runs the launch (`LeaderWorkerSet/ds`)
    #: and how many copies of this server it runs (`spec.replicas`); from a compose file,
    #: the service and its `deploy.replicas`; None from anything else.
    manifest: ManifestLaunch | None = None
    #: From a multi-node launch: the nodes whose own GPU ids differ from the first node's.
    nodes: tuple[NodePlacement, ...] = ()
    #: The launch read from `script` (a job's first node), which `fix` prints edited.
    launch: LaunchCommand | None = None
    #: The launch's flags that size the memory pools without being layout fields, as the
    #: memory model's keywords (`memory_flags.MEMORY_FLAGS`): what `--gpu` sizes with.
    memory_flags: Mapping[str, Any] = field(default_factory=dict)
    #: Layout fields the launch gives a value unknown here (a shell expansion), as written:
    #: left unset, so the rules that read them are not decided (`validation.undecided`).
    unknown: Mapping[str, str] = field(default_factory=dict)
    #: Bare shell expansions in the launch (`${EXTRA_ARGS}`): flags they hold are not read.
    opaque: tuple[str, ...] = ()
    #: Each of `missing_flags` that another recorded release takes -> those releases
    #: (`sglang_cmdline.taken_elsewhere`): a flag of the release the command was written
    #: for. One left out starts on no release: an error without --strict, and no fix of
    #: the layout makes the launch valid (`launch_checks.unstartable`).
    elsewhere: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def unknown_widths(self) -> dict[str, str]:
        """`unknown` without a node's rank and placement: the layout's own values."""
        return {k: v for k, v in self.unknown.items() if k not in PER_NODE_FIELDS}

    def unknown_text(self) -> tuple[str, str]:
        """(`tp_size = $TP, ...`, `give the value with --set tp_size=N`): what commands say
        of the layout's unknown values (`unknown_widths`, not empty)."""
        widths = self.unknown_widths
        listed = ", ".join(f"{name} = {text}" for name, text in widths.items())
        return listed, f"give the value with --set {next(iter(widths))}=N"


def load_layout(
    sources: LayoutSources,
    catalogue: Catalogue | None = None,
    release: str | None = None,
    *,
    local_files: bool = True,
    launch: ParsedCommandLine | None = None,
) -> LayoutInput:
    """Merge the sources: example, then file, then SGLang command line, then --set.

    `release` is the SGLang version whose flag table judges the command's flags (None, or a
    release that was not recorded: flags no recorded release has). `local_files=False` (the
    web app, whose requests come from a browser) reads nothing from this machine: no file,
    script or model path, no standard input, and a command's `--model-path` is looked up in
    `catalogue` only. `launch`: one server of a deployment, already read from the script
    (`parse_job`), in place of parsing the whole text as one job."""
    if not local_files:
        _refuse_local(sources)
    values: dict[str, Any] = {}
    model_facts: Any = None
    notes: list[str] = []
    job: tuple[JobIssue, ...] = ()
    nodes: tuple[NodePlacement, ...] = ()
    signs: list[str] = []
    missing: list[tuple[str, str | None]] = []
    missing_in: str | None = None
    elsewhere: dict[str, tuple[str, ...]] = {}
    model_path: str | None = None
    first: LaunchCommand | None = None
    sizing: dict[str, Any] = {}
    unknown: dict[str, str] = {}
    opaque: tuple[str, ...] = ()
    if sources.example is not None:
        from meshsat.solver.examples import path_of

        values.update(load_config_file(path_of(sources.example)))
        model_facts = values.pop("model", None) or model_facts
    if sources.config is not None:
        values.update(load_config_file(sources.config))
        model_facts = values.pop("model", None) or model_facts
    if sources.sglang is not None and sources.sglang_file is not None:
        raise InputError("give --sglang or --sglang-file, not both")
    given = sources.sglang_file is not None or sources.sglang is not None
    text = script_text(sources) if given else None
    manifest: ManifestLaunch | None = None
    yaml_line = 1
    if text is not None and looks_like_manifest(text):  # Kubernetes YAML: its SGLang container
        manifest = manifest_launch(text)
        yaml_line = text.count("\n", 0, max(0, text.find("--nnodes"))) + 1
        text = manifest.text
    # The manifest's note goes first, once the launch has said whether its pods are nodes.
    note_at = len(notes) if manifest is not None else None
    if text is not None or launch is not None:
        search = script_folders(sources)
        parsed = launch if launch is not None else parse_sglang_command(text or "", search)
        values.update(parsed.values)
        notes.extend(parsed.notes)
        if release is not None and release_flags(release) is not None:
            missing = release_refusals(parsed, release)
            elsewhere = taken_elsewhere(parsed, missing, release)
            missing_in = release
        else:
            missing = [(f, None) for f in parsed.unknown_flags]
        notes.extend(unmodelled_values(parsed.outside, missing))
        # The visible-devices list is checked against the ranks' GPU ids (JOB-VISIBLE-DEVICES).
        ignored = list(dict.fromkeys(f for f in parsed.ignored if f != CUDA_VISIBLE_DEVICES_ENV))
        # A flag the release refuses is said as that (CMD-UNKNOWN-FLAG), not as one SGLang
        # still reads.
        refused = {_refused_flag(item) for item, _ in missing}
        flags = [f for f in ignored if f.startswith("-") and f not in refused]
        if flags:
            notes.append(
                f"{len(flags)} flag(s) not checked by meshsat (not layout "
                "flags; SGLang still reads them): " + listed(flags)
            )
        # Environment assignments are not flags: most are the shell's or NCCL's, not SGLang's.
        variables = [f for f in ignored if not f.startswith("-")]
        if variables:
            notes.append(
                f"{len(variables)} environment variable(s) not read by meshsat (none sets a "
                "layout field): " + listed(variables)
            )
        job, model_path, signs = tuple(parsed.job), parsed.model_path, parsed.ascend_signs
        if manifest is not None and pods_are_nodes(manifest.owner, parsed.values.get("nnodes")):
            # SGLang's StatefulSet recipe: the replicas are the nodes of one job, each told
            # its --node-rank by its pod ordinal, so the object runs one server.
            manifest = manifest.as_nodes()
        if manifest is not None and manifest.group_size is not None:
            pods = group_size_issue(manifest.owner, manifest.group_size, parsed, yaml_line)
            job += (pods,) if pods is not None else ()
        if manifest is not None and note_at is not None:
            notes.insert(note_at, manifest.note)
        nodes = tuple(parsed.nodes)
        if manifest is None and parsed.owner:  # a compose service: its deploy.replicas
            manifest = ManifestLaunch(text or "", "", parsed.replicas, parsed.owner)
        first = parsed.launch
        sizing = parsed.memory
        unknown = dict(parsed.unknown_values)
        opaque = tuple(parsed.opaque)
    for item in sources.sets:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            raise InputError(f"--set expects FIELD=VALUE, got {item!r}")
        key = name.strip().replace("-", "_")
        values[key] = coerce(key, value)
        unknown.pop(key, None)
    for inferred in (infer_platform(values, signs), assume_node_size(values)):
        if inferred is not None:
            notes.append(inferred)
    spec = _model_spec(sources.model, catalogue) if sources.model is not None else None
    source = None if sources.model is None else str(sources.model)
    if spec is None and model_facts is not None:
        if not isinstance(model_facts, dict):
            raise InputError("the `model:` entry of a layout file must be a mapping")
        spec = as_model(model_facts)
    elif model_path is not None and sources.model is not None:
        if str(sources.model) != model_path:
            notes.append(f"--model {sources.model} is used; the command's --model-path is not")
    elif model_path is not None:
        spec, source, said = _model_from_path(model_path, catalogue, local_files)
        notes.extend(said)
    return LayoutInput(
        config_from_values(values),
        spec,
        tuple(notes),
        job,
        tuple(missing),
        missing_in,
        source,
        text,
        model_path_of(sources.model) if sources.model is not None else model_path,
        manifest,
        nodes,
        first,
        sizing,
        unknown,
        opaque,
        elsewhere,
    )


def _refused_flag(item: str) -> str:
    """The flag of a refusal as `missing_from_release` and its kin write it: the flag
    itself, `--flag value` (a refused choice) or `--flag=value` (a value glued to a flag
    that takes none); a flag holds neither a blank nor `=`."""
    return item.split(" ", 1)[0].partition("=")[0]


def script_text(sources: LayoutSources) -> str:
    """The launch text the sources give: as read already (`script`), else the script file's,
    `--sglang`'s, or standard input for `--sglang -` / `--sglang-file -`."""
    if sources.script is not None:
        return sources.script
    text = _script(sources.sglang_file) if sources.sglang_file is not None else sources.sglang
    if text == "-":
        text = _stdin()
    return text or ""


def with_script(sources: LayoutSources) -> LayoutSources:
    """The sources with their launch text read, once: a command that looks at the text
    before `load_layout` (is it a PD deployment?) hands this on, so the file is not opened
    again and standard input or a pipe, which give their text only once, still work."""
    if sources.script is not None or (sources.sglang is None) == (sources.sglang_file is None):
        return sources  # read already, no launch text, or both (load_layout refuses that)
    return replace(sources, script=script_text(sources))


def script_folders(sources: LayoutSources) -> tuple[Path, ...]:
    """Where a script's `--config FILE` may be when not found as written: the script's own
    folder (none for standard input or a pasted command)."""
    path = sources.sglang_file
    return () if path is None or str(path) == "-" else (path.parent,)


def _stdin() -> str:
    """Standard input's text; bytes that are not UTF-8 (which Python's stdin turns into
    lone surrogates) are refused as a file's are, by byte offset, not as a strange word."""
    text = sys.stdin.read(MAX_SCRIPT_BYTES + 1)
    bad = re.search("[\ud800-\udfff]", text)
    if bad is not None:
        offset = len(text[: bad.start()].encode("utf-8"))
        raise InputError(f"standard input: not UTF-8 text (byte {offset})")
    return text


def _refuse_local(sources: LayoutSources) -> None:
    if sources.config is not None or sources.sglang_file is not None:
        raise InputError("layout files are not read here: paste the layout or the command")
    if sources.model is not None:
        raise InputError("model paths are not read here: give an embedded repo id")
    if sources.sglang is not None and sources.sglang.strip() == "-":
        raise InputError("'-' (standard input) is not read here: paste the command")


def _model_from_path(
    path: str, catalogue: Catalogue | None, local_files: bool = True
) -> tuple[ModelSpec | None, str | None, list[str]]:
    """The model facts a launch command's `--model-path` gives offline: a local directory
    (or config.json), the local Hugging Face cache, or the embedded catalogue, in that order
    (the catalogue only, without `local_files`). What could not be found is a note, never an
    error: the layout is still checked."""
    found = False
    if local_files:
        try:  # a name too long for the file system is no local model either
            local = Path(path).expanduser()
            config = local / "config.json" if local.is_dir() else local
            found = config.is_file() and config.name.endswith(".json")
        except (OSError, RuntimeError, ValueError):
            found = False
    if found:
        return ModelSpec.from_file(config), str(config), []
    if path.count("/") != 1 or path.startswith((".", "/", "~")):
        return (
            None,
            None,
            [f"--model-path {clipped(path)}: no config.json there; model facts unknown"],
        )
    cached = hf_cache_config(path) if local_files else None
    if cached is not None:
        note = f"model facts of {clipped(path)} from the local Hugging Face cache ({cached})"
        return ModelSpec.from_file(cached), str(cached), [note]
    if catalogue is not None:
        try:
            facts = catalogue(path)
        except InputError:
            pass
        else:
            note = (
                f"{clipped(path)} is not in the local Hugging Face cache; using meshsat's "
                "embedded facts"
            )
            return ModelSpec.from_hf_config(facts), path, [note]
    return (
        None,
        None,
        [
            f"--model-path {clipped(path)}: not a local directory, not in the local Hugging "
            "Face cache and not embedded; rules that need model facts are not checked "
            "(give --model)"
        ],
    )


def hf_cache_config(repo_id: str) -> Path | None:
    """`config.json` of a repository in the local Hugging Face hub cache (`HF_HUB_CACHE`,
    else `HF_HOME/hub`, else `~/.cache/huggingface/hub`): the newest snapshot holding one."""
    import os

    hub = os.environ.get("HF_HUB_CACHE") or (
        str(Path(os.environ["HF_HOME"]) / "hub") if os.environ.get("HF_HOME") else None
    )
    root = Path(hub) if hub else Path.home() / ".cache" / "huggingface" / "hub"
    snapshots = root / ("models--" + repo_id.replace("/", "--")) / "snapshots"
    try:
        found = [p / "config.json" for p in snapshots.iterdir() if (p / "config.json").is_file()]
    except OSError:
        return None
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def _model_spec(model: Path, catalogue: Catalogue | None) -> ModelSpec:
    """A config.json (or its folder), or a repository id of the embedded model catalogue."""
    text = str(model)
    looks_like_repo_id = text.count("/") == 1 and not text.startswith((".", "/", "~"))
    if model.exists() or not looks_like_repo_id or text.endswith(".json") or catalogue is None:
        return ModelSpec.from_file(model)
    return ModelSpec.from_hf_config(catalogue(text))


def _script(path: Path) -> str:
    """A launch script's text, UTF-8, bounded in size: a regular file, a pipe (`<(...)`,
    /dev/stdin) or standard input (`-`), each read once. A pipe is read up to the bound:
    what is past it is refused, not waited for."""
    if str(path) == "-":
        return _stdin()
    try:
        st = path.stat()
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
            raise InputError(f"--sglang-file {path}: not a regular file or a pipe")
        size = st.st_size
        if size <= MAX_SCRIPT_BYTES:
            with path.open("rb") as f:
                data = f.read(MAX_SCRIPT_BYTES + 1)
            size = len(data)
        if size > MAX_SCRIPT_BYTES:
            shown = f"{size}" if stat.S_ISREG(st.st_mode) else f"over {MAX_SCRIPT_BYTES}"
            raise InputError(
                f"--sglang-file {path}: {shown} bytes; a launch script is at most "
                f"{MAX_SCRIPT_BYTES}"
            )
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"--sglang-file {path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise InputError(f"--sglang-file {path}: {exc.strerror}") from None
