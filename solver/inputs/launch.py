"""Launch commands as people paste them: shell text → the words of each SGLang launch.

Servers are started from scripts, READMEs, manifests and issue threads, so the text carries
shell: continuations (also ones that start in column 0), comments, `VAR=value` prefixes,
`export`, `docker run ... IMAGE python3 -m sglang.launch_server ...`, redirections, `&`, `;`.
A real bash parser (`bashlex`) reads it, which also gives every word its position for error
messages; hand-made splitting misread a continuation as a word and silently dropped the flag
after it. A word that is a shell expansion (`$X`, `${X}`, `$(...)`) is not a value meshsat
can know: it is kept as `Word.expansion` and the flag reader leaves the field unset.

bashlex is pure Python and costs 1-8 µs a character (8 s for a megabyte of short flags), so
text that holds no shell syntax at all, only words, blanks, newlines and continuations (the
bulk of any large paste), is split by `_plain` in linear time into the same command and word
nodes (a property test holds the two to each other); text with shell syntax is parsed by
bashlex up to `MAX_SHELL_CHARS`, which keeps every input within the 1 MiB bound to about a
second.

Text copied from a terminal or a document carries more than shell (docs/launch-shapes.md):
a prompt before the command (`$ `, `user@host:~$ `), a placeholder for a value
(`<MODEL_PATH>`, read like a shell variable), a stray `-` where a continuation broke, and
Kubernetes manifests whose `command:`/`args:` lists hold the words one per item.
"""

from __future__ import annotations

import bisect
import csv
import re
import shlex
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from meshsat.solver.errors import InputError
from meshsat.solver.inputs.bench_flags import BENCH_FLAGS
from meshsat.solver.inputs.k8s import replica_count
from meshsat.solver.inputs.manifest import ListedCommand, expansion, manifest_commands
from meshsat.solver.inputs.markdown import fenced_code
from meshsat.solver.inputs.service_files import service_text
from meshsat.solver.inputs.shell_masks import (
    ArrayAssignment,
    mask_arithmetic,
    mask_arrays,
    mask_case,
    mask_for_arith,
    mask_substitutions,
    mask_tests,
)
from meshsat.solver.inputs.shell_vars import (
    Assigned,
    ShellVariables,
    ordered_commands,
    split_assignment,
)

#: `python -m MODULE` launchers that take SGLang's server flags (the benchmarks that start
#: an engine in-process take them too, beside their own; `BENCH_FLAGS` lists those).
LAUNCH_MODULES = (
    "sglang.launch_server",
    "sglang_router.launch_server",
    *BENCH_FLAGS,
)
#: `python -m MODULE` launchers of a PD router: SGLang's router (`--pd-disaggregation
#: --prefill URL [BOOTSTRAP_PORT] --decode URL`), 0.4.6's `mini_lb` (`--prefill URL...
#: --decode URL... --prefill-bootstrap-ports PORT...`) and the `launch_lb` that replaced
#: it. Read only by the deployment reader (`read_launch_commands(text, routers=True)`).
ROUTER_MODULES = (
    "sglang_router.launch_router",
    "sglang.srt.disaggregation.mini_lb",
    "sglang.srt.disaggregation.launch_lb",
)
#: Most characters a pasted command may hold; a launch script is a few kilobytes.
MAX_CHARS = 1 << 20
#: Most characters of text with shell syntax in it (quotes, `$`, `;`, redirections, ...),
#: which only the shell parser reads: about a second of bashlex at its slowest.
MAX_SHELL_CHARS = 1 << 17
#: Any character but these is shell syntax, and so is a backslash that is not a
#: continuation after a blank (one glued to a word joins it to the next line's).
_SHELL_SYNTAX = re.compile(r"[^\w.,:=+@%/\- \t\n\\]|\\(?!\n)|(?<![ \t\n])\\")
#: Words bash reads as syntax at the start of a command: such text goes to bashlex.
_RESERVED = frozenset(
    "if then else elif fi case esac for select while until do done in function time coproc".split()  # noqa: SIM905
)
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_LINE = re.compile(r"[^\n]+")
_PLAIN_WORD = re.compile(r"\S+")
_CONTINUATION = re.compile(r"\\[ \t]+\r?\n")  # "\ " then newline: meant as a continuation
_TRAILING_BACKSLASH = re.compile(r"\\\s*\Z")


def _as_continuation(m: re.Match[str]) -> str:
    r"""`\` + blanks + newline as a real continuation of the same length, so that positions
    in the parsed text are positions in the user's text (`--rewrite` edits it in place)."""
    return " " * (len(m.group()) - 2) + "\\\n"


def _blank(m: re.Match[str]) -> str:
    return " " * len(m.group())


_PYTHON = re.compile(r"(^|/)python[0-9.]*$")
#: A terminal prompt copied with the command: `$ `, `% `, `(venv) $ `, `user@host:~$ `,
#: `[user@host dir]$ `, `root@host:/# ` (a bare `# ` stays a comment).
_PROMPT = re.compile(
    r"^[ \t]*(?:\([\w.\- ]+\)[ \t]*)?"
    r"(?:(?:[\w.\-]+@[\w.\-]+(?::[^\s$#]*)?|\[[\w.\-]+@[\w.\-]+[^\]]*\])[ \t]*[$#%>]"
    r"|[$%])[ \t]+(?=\S)",
    re.MULTILINE,
)
#: A documentation placeholder standing for a value: `<MODEL_PATH>`, `<your-model>`.
_PLACEHOLDER = re.compile(r"(?<=[\s=])<([A-Za-z][\w.\-]*)>(?=\s|$)")
#: A placeholder for the host of a URL or address (`http://<P_IP>:8000`, `<MASTER_IP>:5000`, as
#: SGLang's Ascend docs write a router's targets and a rendezvous): unread, bash takes its `<`
#: and `>` for redirections and the URL for `http://`.
_HOST_PLACEHOLDER = re.compile(r"(?:(?<=://)|(?<=[\s=]))<([A-Za-z][\w.\-]*)>(?=[:/\s]|$)")
#: `\` then a comment ending a line (`--tp 8 \   # the width`): bash takes `\ ` for an
#: escaped blank and ends the command at the comment, the next lines' flags lost; the
#: author meant a continuation, which is how it is read, said in a note.
_COMMENTED_CONTINUATION = re.compile(r"\\[ \t]+#[^\n]*?(?=\r?\n)")
#: ` \ ` inside a line before a flag: a continued command whose newlines a page flattened
#: (bash would read `\ ` as an escaped blank, a word " --tp" no parser takes).
_FLATTENED_CONTINUATION = re.compile(r"(?<=[ \t])\\(?=[ \t]+-)")
#: A lone `-` ending a line whose next line goes on with flags: a `\` mistyped or lost.
_BROKEN_CONTINUATION = re.compile(r"(?<=[ \t])-[ \t]*(?=\r?\n[ \t]*--)")


class Word(NamedTuple):
    """One word of a launch command: its text, where it starts and ends in the text given,
    and the shell expansion that makes its value unknowable here (None for a literal). A
    tuple: a pasted megabyte holds up to half a million words."""

    text: str
    pos: int
    expansion: str | None = None
    end: int = -1
    #: The unquoted expansion, as written, whose value this word is one of (`$ARGS` holding
    #: `--tp 8 --dp 2`): its text is not in the script where the word stands, so
    #: `--rewrite` does not edit it there.
    via: str | None = None

    @property
    def placeholder(self) -> bool:
        """A documentation placeholder (`<MODEL_PATH>`), not a shell expansion."""
        return self.expansion is not None and self.expansion.startswith("<")


@dataclass(frozen=True)
class LaunchCommand:
    """One SGLang launch in the text: environment assignments, then the server's words."""

    line: int
    program: str
    env: tuple[tuple[str, str], ...]
    words: tuple[Word, ...]
    #: "shell" for shell text; "yaml" for a manifest's command list (positions are those of
    #: the list items, which `--rewrite` cannot edit as flags); "quoted" for a launch in a
    #: quoted word whose text differs from what is written (escapes), so is not edited.
    form: str = "shell"
    #: How the text was read beyond plain shell (a prompt removed, a placeholder read as
    #: unknown), as notes for the user.
    notes: tuple[str, ...] = ()
    #: Copies of this launch its manifest object runs apart (`spec.replicas` of a
    #: LeaderWorkerSet, Deployment, StatefulSet or ReplicaSet; 1 in a script): each copy is
    #: its own server, never a node of another (`meshsat.solver.deployment.reader`).
    replicas: int = 1
    #: The manifest object that runs it (`LeaderWorkerSet/pd-prefill`; "" in a script): its
    #: copies' names, which a router's URLs may name (ROUTER-REPLICA-URLS).
    owner: str = ""
    #: Where the whole simple command stands in the text (its environment prefix, `docker
    #: run ...`, the launcher, the flags, its redirections), for the fixed command `fix`
    #: prints in the user's own words; (-1, -1) for a manifest's list.
    span: tuple[int, int] = (-1, -1)
    #: The variables an `export` before the launch set (also in `env`): outside `span`.
    exported: tuple[tuple[str, str], ...] = ()
    #: Pods per group of the LeaderWorkerSet that runs it (`spec.leaderWorkerTemplate.size`),
    #: or of a StatefulSet whose pods are one server's nodes (the deployment reader sets
    #: it): what JOB-GROUP-SIZE holds `--nnodes` to; None otherwise.
    group_size: int | None = None
    #: Where each value of `env` stands in the text, in its order (`VAR=value` before the
    #: launch, or on an `export` line before it): what `fix` edits to move a server onto
    #: other devices. (-1, -1), or absent, where the value is not written there as read
    #: (a manifest, a quoted launch with escapes, docker's `-e`, a value with escapes).
    env_spans: tuple[tuple[int, int], ...] = ()
    #: The GPUs a container runner gives the launch (`docker run --gpus '"device=0,1"'`),
    #: as its machine's ids in the container's order; None where none is listed (no
    #: `--gpus`, `--gpus all`, a count, device UUIDs, a shell expansion).
    container_gpus: tuple[int, ...] | None = None

    def value_span(self, name: str) -> tuple[int, int] | None:
        """Where the value the launch gives `name` last (the one it runs with) stands in
        the text; None when it gives none or the value cannot be edited in place."""
        for i in reversed(range(len(self.env))):
            if self.env[i][0] == name:
                span = self.env_spans[i] if i < len(self.env_spans) else (-1, -1)
                return span if span[0] >= 0 else None
        return None

    @property
    def router(self) -> bool:
        """A PD router's launch (only `read_launch_commands(..., routers=True)` gives one)."""
        return self.program.removeprefix("python -m ") in ROUTER_MODULES


def read_launch_commands(
    text: str,
    *,
    routers: bool = False,
    variables: ShellVariables | None = None,
    whole: bool = True,
) -> tuple[LaunchCommand, ...]:
    """Every SGLang launch in `text`, in order; an `InputError` naming the problem and its
    position for text a shell would refuse or that launches no SGLang server. With
    `routers`, the PD routers' launches too (`LaunchCommand.router`), in their place.
    `variables`: the shell variables already set where `text` runs (a double-quoted
    command's outer shell); the script's own assignments are added (`shell_vars`).
    `whole`: `text` is the whole script, which must launch a server; a part of one (a
    quoted command, `eval`'s string, a manifest's `sh -c`) may launch only a router
    (`ssh node3 "python3 -m sglang_router.launch_router ..."`), whose servers are
    elsewhere in the script."""
    if len(text) > MAX_CHARS:
        raise InputError(f"the launch command is {len(text)} characters; at most {MAX_CHARS}")
    if "\x00" in text:
        raise InputError("the launch command is binary data (it holds NUL bytes)")
    text, fenced = fenced_code(text)
    service = service_text(text)
    text = service.text
    listed = manifest_commands(text)
    if listed is not None:
        return _from_manifest(listed, routers, whole)
    source, notes = pasted_as_shell(text)
    notes[:0] = [n for n in (fenced, service.note) if n is not None]
    source, arithmetic = mask_arithmetic(source)
    masked = mask_for_arith(mask_tests(mask_case(mask_substitutions(source))))
    source, array_sets = mask_arrays(masked)
    arrays: dict[str, tuple[ArrayAssignment, ...] | None] = {}
    nodes = _parse(source)
    newlines = [m.start() for m in re.finditer("\n", source)]
    exported: list[_Set] = []
    found: list[LaunchCommand] = []
    outer = variables or ShellVariables()
    shell = ShellVariables(dict(outer.known), {**outer.arithmetic, **arithmetic})
    for command, certain in ordered_commands(nodes):
        if array_sets:
            _track_arrays(command, certain, array_sets, arrays)
        words = [p for p in command.parts if p.kind == "word"]
        parts = [p for p in command.parts if p.kind == "assignment"]
        assignments = [a for p in parts if (a := _set(p, text)) is not None]
        texts = [w.word for w in words]
        start = _launcher(texts, routers)
        line = bisect.bisect_right(newlines, command.pos[0]) + 1
        if not words:  # `NAME=value` lines: this shell's variables, not a launch's
            for p in parts:
                shell.assign(p.word, getattr(p, "parts", None), source, line, certain)
            if service.environment:  # a Dockerfile's ENV, a unit's Environment=: exported
                exported += [a for p in parts if (a := _set(p, text)) is not None]
            continue
        if texts[:1] == ["export"] and start is None:
            exported += [a for w in words[1:] if (a := _set(w, text)) is not None]
            for w in words[1:]:
                shell.assign(w.word, getattr(w, "parts", None), source, line, certain)
            continue
        evaluated = (  # eval's words are read again, as the string they join
            _evaluated(words[1:], source, text, (command.pos[0], line), exported, routers, shell)
            if texts[:1] == ["eval"]
            else []
        )
        if evaluated:
            found += evaluated
            continue
        if start is None:
            at = (command.pos[0], line)
            found += _quoted_launches(
                words, texts, text, at, (exported, assignments), routers, shell
            )
            continue
        program_end, program = start
        runner = texts[: program_end - 1]
        env = [
            *_inherited(runner, [*exported, *assignments]),
            *_unplaced(_docker_env(runner)),
        ]
        env += [a for w in words[:program_end] if (a := _set(w, text)) is not None]
        read: list[str] = []
        found.append(
            LaunchCommand(
                line=line,
                program=program,
                env=tuple(pair for pair, _ in env),
                words=tuple(_spliced(words[program_end:], source, text, shell, read, arrays)),
                notes=(*notes, *_variables_note(read)),
                span=(command.pos[0], max(command.pos[1], words[-1].pos[1])),
                exported=tuple(pair for pair, _ in exported),
                env_spans=tuple(at for _, at in env),
                form="json" if service.json_words else "shell",
                container_gpus=_docker_gpus(runner),
            )
        )
    if whole and not any(not c.router for c in found):
        quoted = _quoted_launch([c for c, _ in ordered_commands(nodes)], newlines)
        if quoted is not None:
            raise InputError(
                f"the SGLang launch on line {quoted} is one quoted word (`ssh host "
                '"python -m sglang.launch_server ..."`, `bash -c "..."`), which meshsat '
                "does not read: give the command inside the quotes"
            )
        raise InputError(
            "not an SGLang launch command: no `python -m sglang.launch_server`, "
            "`python -m sglang_router.launch_server` or `sglang serve` in it"
        )
    return tuple(found)


#: How messages name a launch `--rewrite` cannot edit, by `LaunchCommand.form`.
FORM_TEXT: dict[str, str] = {
    "yaml": "a manifest's list of words",
    "quoted": "quoted inside another command with escapes",
    "json": "a Dockerfile's JSON list of words",
    "eval": "a string that `eval` runs",
}
#: Runners whose quoted command runs without this shell's variables (on another machine,
#: or in a container, which gets only its `-e NAME=value`); any other (`bash -c`, `srun`)
#: passes them on.
_OWN_ENVIRONMENT = frozenset({"ssh", "pdsh", "kubectl", "docker", "podman", "mpirun", "mpiexec"})


#: Runners whose server never inherits this shell's environment, quoted or not: a remote
#: shell, a pod, a container (which gets only its `-e NAME=value`, and a bare `-e NAME`'s
#: value from here). `mpirun` is left out: the ranks it starts on this host inherit.
_ELSEWHERE = frozenset({"ssh", "pdsh", "kubectl", "docker", "podman", "nerdctl"})


def _inherited(runner: list[str], local: list[_Set]) -> list[_Set]:
    """The variables of this shell (`export`ed, or `NAME=value` before the command) that
    reach a launch started by the words `runner` (those before `python -m ...`): all of
    them, unless a word of `runner` starts it elsewhere (`docker run ... IMAGE python3 -m
    sglang.launch_server`, `ssh node python -m ...`). Why: `CUDA_VISIBLE_DEVICES=0,1 docker
    run --gpus all IMAGE ...` gives the container every GPU and no such variable, so
    judging the list (JOB-VISIBLE-DEVICES) refused a launch that works."""
    if not any(word.rsplit("/", 1)[-1] in _ELSEWHERE for word in runner):
        return local
    named = set(_docker_names(runner))
    return [item for item in local if item[0][0] in named]


def _quoted_launches(
    words: list[Any],
    texts: list[str],
    text: str,
    outer: tuple[int, int],
    local: tuple[list[_Set], list[_Set]],
    routers: bool,
    variables: ShellVariables,
) -> list[LaunchCommand]:
    """The launches inside one quoted word of a command that launches nothing itself
    (`ssh node1 "python -m sglang.launch_server ..."`, `bash -c '...'`), read as the
    shell text they are. Where the quoted text stands as written between its quotes (no
    escapes), its words keep their places in `text`, so `--rewrite` and `fix` edit them
    there; otherwise the launch is read but not edited (form "quoted"). `outer`: where the
    command starts and its line; `local`: this shell's exported variables and the
    command's own `NAME=value` prefixes, which the runner passes on (unless it runs
    elsewhere); `variables`: this shell's, which expand inside double quotes before the
    runner runs (inside single quotes the runner's shell expands what it was passed)."""
    start, line = outer
    runner = texts[0].rsplit("/", 1)[-1] if texts else ""
    exported, prefix = ([], []) if runner in _OWN_ENVIRONMENT else local
    passed = (*exported, *prefix, *_unplaced(_docker_env(texts)))
    pairs = tuple(pair for pair, _ in passed)
    environment = _passed_on(pairs, len(exported), variables, line)
    found: list[LaunchCommand] = []
    for word in words:
        if " " not in word.word or _launcher(word.word.split(), routers) is None:
            continue
        base = word.pos[0] + 1
        double = text[base - 1 : base] == '"'
        outer_vars = variables if double else environment
        try:
            inner = read_launch_commands(
                word.word, routers=routers, variables=outer_vars, whole=False
            )
        except InputError:
            continue
        exact = (
            text[base - 1 : base] in ("'", '"') and text[base : base + len(word.word)] == word.word
        )
        for c in inner:
            spans = tuple(
                (a + base, b + base) if exact and a >= 0 else (-1, -1) for a, b in c.env_spans
            )
            found.append(
                _carried(
                    c,
                    passed,
                    spans,
                    line=line + c.line - 1,
                    words=tuple(w._replace(pos=w.pos + base, end=w.end + base) for w in c.words),
                    form=c.form if exact else "quoted",
                    span=(start, max(c.span[1] + base, word.pos[1])),  # the closing quote
                )
            )
    return found


def _carried(
    inner: LaunchCommand,
    passed: Sequence[_Set],
    spans: tuple[tuple[int, int], ...],
    *,
    line: int,
    words: tuple[Word, ...],
    form: str,
    span: tuple[int, int],
) -> LaunchCommand:
    """A launch read from text another command runs (a quoted word, `eval`'s string), as a
    launch of this script: at `line`, with `words` and `span` in this script's text, and
    the variables `passed` to it ahead of its own (`spans`: where its own are written)."""
    pairs = tuple(pair for pair, _ in passed)
    return replace(
        inner,
        line=line,
        env=(*pairs, *inner.env),
        words=words,
        form=form,
        span=span,
        exported=(*pairs, *inner.exported),
        env_spans=(*(at for _, at in passed), *spans),
    )


def _evaluated(
    words: list[Any],
    source: str,
    text: str,
    outer: tuple[int, int],
    exported: list[_Set],
    routers: bool,
    variables: ShellVariables,
) -> list[LaunchCommand]:
    """The launch an `eval` runs (`CMD="python -m sglang.launch_server --tp $TP"` ...
    `eval "$CMD"`): its words as this shell expands them, joined and read as the shell
    text `eval` reads, where every expansion in them is known here; none otherwise (the
    command is then read as any other, `eval` as a runner). Its text is not where its words
    stand, so it is read, not edited (form "eval")."""
    values: list[str] = []
    for word in words:
        parts = getattr(word, "parts", None)
        got = variables.expand(word.word, parts, source, text) if parts else (word.word, [])
        if got is None:
            return []
        values.append(got[0])
    joined = " ".join(values)
    if not words or _launcher(joined.split(), routers) is None:
        return []
    try:
        inner = read_launch_commands(joined, routers=routers, variables=variables, whole=False)
    except InputError:
        return []
    start, line = outer
    at, end = words[0].pos[0], words[-1].pos[1]
    said = f"read from the string `eval` runs on line {line}, as this shell expands it"
    return [
        _carried(
            replace(c, notes=(said, *c.notes)),
            exported,
            tuple((-1, -1) for _ in c.env_spans),
            line=line,
            words=tuple(w._replace(pos=at, end=end) for w in c.words),
            form="eval",
            span=(start, end),
        )
        for c in inner
    ]


def _passed_on(
    pairs: tuple[tuple[str, str], ...], exported: int, variables: ShellVariables, line: int
) -> ShellVariables:
    """The variables a runner's own shell starts with (`bash -c '...'`, `srun ...`): the
    first `exported` pairs are exported names, which carry their value in this shell when
    the runner starts; the rest (`NAME=value` before the runner, docker's `-e`) carry the
    value written, where it is plain text. Anything else is unknown there."""
    known: dict[str, Assigned] = {}
    for i, (name, value) in enumerate(pairs):
        got = variables.known.get(name) if i < exported else None
        if got is not None:
            known[name] = got
        elif not re.search(r"[$`\\]", value):
            known[name] = Assigned(value, line)
        else:
            known[name] = Assigned(None, line)
    return ShellVariables(known, variables.arithmetic)


def _variables_note(read: list[str]) -> list[str]:
    """One note naming the script's variables a launch's words were read with."""
    if not read:
        return []
    return ["read with the script's shell variables: " + "; ".join(read)]


def _quoted_launch(commands: list[Any], newlines: list[int]) -> int | None:
    """The line of the first command that holds a server's launch inside one word (a
    remote runner's or a shell's quoted command), or None: said so rather than "no
    launch in it", which the user can see is false."""
    for command in commands:
        for part in command.parts:
            if part.kind != "word" or " " not in part.word:
                continue
            try:
                inner = shlex.split(part.word)
            except ValueError:
                inner = part.word.split()
            if _launcher(inner) is not None:
                return bisect.bisect_right(newlines, command.pos[0]) + 1
    return None


class _Node(NamedTuple):
    """What `_plain` makes of plain text, in the shape of bashlex's nodes that
    `read_launch_commands` reads (kind, pos, word, parts); a tuple, since a megabyte of
    flags makes hundreds of thousands of them."""

    kind: str
    pos: tuple[int, int]
    word: str = ""
    parts: tuple[_Node, ...] = ()


def _plain(source: str) -> list[Any] | None:
    """The commands of text without shell syntax, as bashlex would give them (one command
    node per line, leading `NAME=value` words as assignments); None for text that needs
    the shell parser."""
    if _SHELL_SYNTAX.search(source) is not None:
        return None
    flat = source.replace("\\\n", "  ")  # a continuation is a blank of the same length
    commands: list[Any] = []
    for line in _LINE.finditer(flat):
        words = list(_PLAIN_WORD.finditer(flat, line.start(), line.end()))
        if not words:
            continue
        if words[0].group() in _RESERVED:
            return None
        parts: list[_Node] = []
        leading = True
        for w in words:
            text = w.group()
            leading = leading and _ASSIGNMENT.match(text) is not None
            parts.append(_Node("assignment" if leading else "word", w.span(), text))
        commands.append(_Node("command", (words[0].start(), words[-1].end()), parts=tuple(parts)))
    return commands


def _from_manifest(
    listed: list[ListedCommand], routers: bool, whole: bool = True
) -> tuple[LaunchCommand, ...]:
    """The SGLang launches among a manifest's commands (a `sh -c` script read as shell)."""
    found: list[LaunchCommand] = []
    for command in listed:
        if command.script is not None:
            try:
                inner = read_launch_commands(command.script, routers=routers, whole=False)
            except InputError:
                continue
            found += [
                LaunchCommand(
                    command.line + c.line - 1, c.program, (*command.env, *c.env), c.words,
                    "yaml", c.notes, _copies(command, c.program), command.owner,
                    group_size=command.group_size,
                )
                for c in inner
            ]  # fmt: skip
            continue
        texts = [w for w, _ in command.words]
        start = _launcher(texts, routers)
        if start is None:
            continue
        end, program = start
        words = tuple(Word(w, pos, expansion(w), pos + len(w)) for w, pos in command.words[end:])
        env = [*command.env, *(a for w in texts[: end - 1] if (a := split_assignment(w)))]
        note = ("read from the manifest's command/args list",)
        copies = _copies(command, program)
        found.append(
            LaunchCommand(
                command.line,
                program,
                tuple(env),
                words,
                "yaml",
                note,
                copies,
                command.owner,
                group_size=command.group_size,
            )
        )
    if whole and not any(not c.router for c in found):
        raise InputError("the manifest's command lists launch no SGLang server")
    return tuple(found)


def _copies(command: ListedCommand, program: str) -> int:
    """How many copies of a server launch its object runs; a router's object is not read
    (a deployment counts its routers by their launches)."""
    if program.removeprefix("python -m ") in ROUTER_MODULES:
        return 1
    return replica_count(command.replicas, command.owner, command.replicas_field)


def normalised(text: str) -> str:
    """The text as a shell would read it, at the same positions: `\\ ` + newline is a
    continuation, a backslash at the very end is nothing."""
    return _TRAILING_BACKSLASH.sub(_blank, _CONTINUATION.sub(_as_continuation, text))


def pasted_as_shell(text: str) -> tuple[str, list[str]]:
    """The text as a shell would take it, every position kept (same length): prompts and
    stray continuation dashes blanked, placeholders turned into shell variables of the same
    width; and a note for each kind of repair."""
    notes: list[str] = []
    source = _CONTINUATION.sub(_as_continuation, text)
    prompts = [m.group().strip() for m in _PROMPT.finditer(source)]
    if prompts:
        source = _PROMPT.sub(_blank, source)
        notes.append(f"a terminal prompt ({prompts[0]!r}) before the command is not read")
    commented = [
        source.count("\n", 0, m.start()) + 1 for m in _COMMENTED_CONTINUATION.finditer(source)
    ]
    if commented:
        source = _COMMENTED_CONTINUATION.sub(lambda m: " " * (len(m.group()) - 1) + "\\", source)
        notes.append(
            f"a '\\' followed by a comment is read as a line continuation (line "
            f"{', '.join(map(str, commented))}): bash ends the command there, and the flags on the "
            "next lines never reach SGLang; move the comment"
        )
    source, flattened = _FLATTENED_CONTINUATION.subn(" ", source)
    if flattened:
        notes.append(f"' \\ ' inside a line is read as a line continuation ({flattened}x)")
    dashes = len(_BROKEN_CONTINUATION.findall(source))
    if dashes:
        source = _BROKEN_CONTINUATION.sub(lambda m: "\\" + " " * (len(m.group()) - 1), source)
        notes.append(f"a lone '-' ending a line is read as a line continuation ({dashes}x)")
    # `<NAME>` -> `$NAME ` (same width): a value unknown here, as a shell variable is.
    source = _PLACEHOLDER.sub(lambda m: "$" + re.sub(r"[.\-]", "_", m.group(1)) + " ", source)
    # Inside a word a blank would split it: `<NAME>` -> `$NAME_`, as wide.
    source = _HOST_PLACEHOLDER.sub(lambda m: "$" + re.sub(r"[.\-]", "_", m.group(1)) + "_", source)
    source = _TRAILING_BACKSLASH.sub(_blank, source)
    return source, notes


def _parse(source: str) -> list[Any]:
    plain = _plain(source)
    if plain is not None:
        return plain
    if len(source) > MAX_SHELL_CHARS:
        raise InputError(
            f"the launch command is {len(source)} characters with shell syntax (quotes, $, ;, "
            f"redirections, ...) in it; at most {MAX_SHELL_CHARS} such characters are read "
            f"(plain words: up to {MAX_CHARS})"
        )
    return _shell_parse(source)


def _shell_parse(source: str) -> list[Any]:
    import bashlex
    import bashlex.errors

    if all(not line.strip() or line.lstrip().startswith("#") for line in source.splitlines()):
        return []  # blank or comments only (bashlex itself fails on such text)
    try:
        return list(bashlex.parse(source))
    except bashlex.errors.ParsingError as exc:
        line = source.count("\n", 0, max(exc.position, 0)) + 1
        raise InputError(f"cannot parse the launch command: {exc.message} (line {line})") from None
    except Exception as exc:  # bashlex fails in its own ways on text no shell would run
        raise InputError(f"cannot parse the launch command: {exc}") from None


#: The interpreter's own options a launch may put before `-m` (`python -u -m ...`, `python3
#: -X faulthandler -m ...`): without a value, and the two that take one (`-X`, `-W`).
_PYTHON_FLAGS = re.compile(r"-[bBdEiIOPqRsSuv]+|-[XW].+")
_PYTHON_VALUED = frozenset({"-X", "-W"})


def _python_entrypoint(texts: list[str]) -> int | None:
    """The index of a `docker run --entrypoint` naming Python (`--entrypoint=python3`,
    `--entrypoint python3`), or None."""
    for i, t in enumerate(texts):
        name = t.removeprefix("--entrypoint=") if t.startswith("--entrypoint=") else None
        if t == "--entrypoint" and i + 1 < len(texts):
            name = texts[i + 1]
        if name is not None and _PYTHON.search(name):
            return i
    return None


def _past_python_options(texts: list[str], i: int) -> int:
    """The index of the first word at or after `i` that is not an interpreter option."""
    while i < len(texts):
        if texts[i] in _PYTHON_VALUED:
            i += 2
        elif _PYTHON_FLAGS.fullmatch(texts[i]):
            i += 1
        else:
            break
    return i


def _launcher(texts: list[str], routers: bool = False) -> tuple[int, str] | None:
    """Index just past the launcher words and the launcher as text, or None. A container
    whose entry point is Python (`docker run --entrypoint=python3 IMAGE -m ...`) runs the
    module named after its image."""
    entry = _python_entrypoint(texts)
    for i, t in enumerate(texts):
        python = _PYTHON.search(t) or (
            entry is not None and i > entry and texts[i + 1 : i + 2] == ["-m"]
        )
        m = _past_python_options(texts, i + 1) if python else len(texts)
        if texts[m : m + 1] == ["-m"] and m + 1 < len(texts):
            module = texts[m + 1]
            if module in LAUNCH_MODULES or (routers and module in ROUTER_MODULES):
                return m + 2, f"python -m {module}"
        if t.endswith("sglang") and texts[i + 1 : i + 2] == ["serve"]:
            return i + 2, "sglang serve"
    return None


def _docker_env_words(texts: list[str]) -> list[str]:
    """What each `docker run -e X` / `--env X` / `--env=X` passes, as written."""
    out = []
    for i, t in enumerate(texts):
        if t in ("-e", "--env") and i + 1 < len(texts):
            out.append(texts[i + 1])
        elif t.startswith("--env="):
            out.append(t[len("--env=") :])
    return out


#: Container runners whose `--gpus` takes docker's device request (`opts/gpus.go`).
_GPU_RUNNERS = frozenset({"docker", "podman", "nerdctl"})


def _docker_gpus(runner: list[str]) -> tuple[int, ...] | None:
    """The machine's GPUs `docker run --gpus VALUE` (or `--gpus=VALUE`) gives the
    container, in its order: the container's GPU i is the list's i-th, as
    CUDA_VISIBLE_DEVICES maps it, so the HOST-GPU rules read it as the server's placement
    (`--gpus '"device=0,1"'` beside `'"device=2,3"'` chose disjoint GPUs; both read as
    GPUs 0, 1 was HOST-GPU-UNPLACED). Docker reads VALUE as one CSV record
    (`GpuOpts.Set`): `device=0,1` unquoted is two fields, `device=0` and a count `1`,
    which docker refuses, so only the quoted list (`"device=0,1"`) names two. None for
    `all`, a count, UUIDs, an expansion: not known here."""
    if not any(w.rsplit("/", 1)[-1] in _GPU_RUNNERS for w in runner):
        return None
    value = None
    for i, word in enumerate(runner):
        if word == "--gpus" and i + 1 < len(runner):
            value = runner[i + 1]
        elif word.startswith("--gpus="):
            value = word.removeprefix("--gpus=")
    if value is None or "$" in value:
        return None
    try:
        fields = next(csv.reader([value]))
    except (csv.Error, StopIteration):
        return None
    if len(fields) != 1 or not fields[0].startswith("device="):
        return None
    ids = fields[0].removeprefix("device=").split(",")
    if not all(i.strip().isdigit() for i in ids):
        return None
    return tuple(int(i) for i in ids)


def _docker_names(texts: list[str]) -> list[str]:
    """`docker run -e NAME` / `--env NAME` / `--env=NAME`: the caller's own value passed."""
    return [w for w in _docker_env_words(texts) if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", w)]


def _docker_env(texts: list[str]) -> list[tuple[str, str]]:
    """`docker run -e NAME=value` / `--env NAME=value` / `--env=NAME=value` before the image."""
    return [p for w in _docker_env_words(texts) if (p := split_assignment(w)) is not None]


#: An environment assignment and where its value stands in the text ((-1, -1): not as read).
_Set = tuple[tuple[str, str], tuple[int, int]]


def _set(node: Any, text: str) -> _Set | None:
    """A `NAME=value` word (an assignment before a command, an `export`'s word) and where
    its value stands in `text`: as read, or inside the quotes around it (`NAME="2,3"`)."""
    pair = split_assignment(node.word)
    if pair is None:
        return None if node.kind == "word" else ((node.word, ""), (-1, -1))
    start, stop = node.pos[0] + len(pair[0]) + 1, node.pos[1]
    written, value = text[start:stop], pair[1]
    if written == value:
        return pair, (start, stop)
    if written[1:-1] == value and len(written) > 1 and written[0] == written[-1] in "'\"":
        return pair, (start + 1, stop - 1)
    return pair, (-1, -1)


def _unplaced(pairs: list[tuple[str, str]]) -> list[_Set]:
    """Assignments whose values are not edited in place (docker's `-e NAME=value`)."""
    return [(pair, (-1, -1)) for pair in pairs]


#: A whole word that expands an array to its words: `"${NAME[@]}"`, or unquoted
#: `${NAME[@]}` / `${NAME[*]}` (each word then split at blanks); `"${NAME[*]}"` is one word.
_ARRAY_USE = re.compile(r'"\$\{(?P<name>[A-Za-z_]\w*)\[@\]\}"|\$\{(?P<bare>[A-Za-z_]\w*)\[[@*]\]\}')


def _track_arrays(
    command: Any,
    certain: bool,
    assignments: dict[int, ArrayAssignment],
    arrays: dict[str, tuple[ArrayAssignment, ...] | None],
) -> None:
    """Follow the arrays `command` sets, in the shell's order: each array's word lists
    (`NAME=(...)` starts one, `NAME+=(...)` adds one), None where not known for certain (set
    or appended to in a branch, a loop or an `&&` list; appended to before it was set);
    a plain `NAME=value` makes it no array meshsat reads."""
    for part in command.parts:
        if part.kind not in ("assignment", "word"):
            continue
        array = assignments.get(part.pos[0])
        if array is None:
            pair = split_assignment(part.word) if part.kind == "assignment" else None
            if pair is not None:
                arrays.pop(pair[0], None)
            continue
        before = arrays.get(array.name)
        if not certain or (array.append and before is None):
            arrays[array.name] = None
        else:
            arrays[array.name] = (*(before or ()), array) if array.append else (array,)


def _spliced(
    nodes: list[Any],
    source: str,
    text: str,
    variables: ShellVariables,
    read: list[str],
    arrays: dict[str, tuple[ArrayAssignment, ...] | None],
) -> Iterator[Word]:
    """Each word (`_word`), and for a word that expands an array the script sets for
    certain before the launch, the array's words where they are written
    (`shell_masks.mask_arrays`): `--rewrite` edits them there."""
    for node in nodes:
        m = _ARRAY_USE.fullmatch(source, node.pos[0], node.pos[1])
        name = None if m is None else m["name"] or m["bare"]
        bodies = None if name is None else arrays.get(name)
        if m is None or bodies is None:
            yield from _split(_word(node, source, text, variables, read), source, text)
            continue
        inner = [w for array in bodies for w in _array_words(array.words)]
        shown = text[node.pos[0] : node.pos[1]]
        lines = ", ".join(str(array.line) for array in bodies)
        read.append(f"{shown} = its {len(inner)} word(s) (set on line {lines})")
        for w, body in inner:
            word = _word(w, body, text, variables, read)
            if m["bare"] is None or word.expansion is not None:
                yield word
            else:  # unquoted: bash splits each word's value at blanks
                yield from (word._replace(text=part) for part in word.text.split())


def _array_words(body: str) -> list[tuple[Any, str]]:
    """The words of one array assignment (`ArrayAssignment.words`), each with the text its
    positions are in."""
    commands = ordered_commands(_shell_parse(body))
    if not commands:
        return []
    return [(p, body) for p in commands[0][0].parts if p.kind == "word"][1:]


def _split(word: Word, source: str, text: str) -> Iterator[Word]:
    """`word`, or where an unquoted expansion gave it blanks (`ARGS="--tp 8 --dp 2"` then
    `$ARGS`), the words bash splits it into, each marked `via` the expansion."""
    written = source[word.pos : word.end]
    if (
        word.expansion is not None
        or "$" not in written
        or any(q in written for q in "\"'\\")
        or not any(c.isspace() for c in word.text)
    ):
        yield word
        return
    shown = text[word.pos : word.end]
    yield from (word._replace(text=part, via=shown) for part in word.text.split())


def _word(
    node: Any,
    source: str,
    text: str,
    variables: ShellVariables | None = None,
    read: list[str] | None = None,
) -> Word:
    """One word; `text` is the user's text, where a placeholder still reads `<NAME>`. An
    expansion of `variables` the script set is read as its value (noted in `read`)."""
    if type(node) is _Node:  # plain text: no expansion in it
        return Word(node.word, node.pos[0], None, node.pos[1])
    parts = getattr(node, "parts", None)
    if variables is not None and parts and text[node.pos[0]] != "<":
        known = variables.expand(node.word, parts, source, text)
        if known is not None:
            if read is not None:
                read += [n for n in known[1] if n not in read]
            return Word(known[0], node.pos[0], None, node.pos[1])
    expansion = None
    for part in getattr(node, "parts", None) or []:
        if part.kind in ("parameter", "commandsubstitution", "processsubstitution"):
            start, end = part.pos
            expansion = text[start:end]  # as written (an arithmetic one is masked in source)
            if text[start] == "<":
                expansion = text[start : text.index(">", start) + 1]
            break
    return Word(node.word, node.pos[0], expansion, node.pos[1])
