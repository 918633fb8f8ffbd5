"""A launch script rewritten to another layout, edited in place (`validate --rewrite`).

People keep their launch scripts: comments, continuations, environment prefixes, the flags
that have nothing to do with the layout. So the rewrite touches only the layout flags whose
value changes, node by node: a flag that sets a changed field is replaced where it stands
(a repeat of it is removed), a field the node's command does not set gets its flag after the
command's last word, and every other byte stays as it was. Positions come from the same
reader (`meshsat.solver.inputs.launch`), which keeps them in the user's coordinates.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from meshsat.solver.backends.render import fmt_value
from meshsat.solver.errors import InputError
from meshsat.solver.inputs.command import FACTS_MARK, flag_words
from meshsat.solver.inputs.convert import config_from_values
from meshsat.solver.inputs.launch import FORM_TEXT, LaunchCommand, read_launch_commands
from meshsat.solver.inputs.sglang_cmdline import ENV_FACTS, parse_launch
from meshsat.solver.inputs.spelling import DP_GROUP, spelled
from meshsat.solver.lang.config import IMPLIED_BY_GPU, Config
from meshsat.solver.lang.fields import CONFIG_SPECS

_NOT_REWRITTEN = frozenset({"node_rank", *ENV_FACTS.values()})
_ENV_VARS = {field: var for var, field in ENV_FACTS.items()}
#: A continuation and the blanks around it: one blank on the line `fix` prints.
_CONTINUATION = re.compile(r"[ \t]*\\\r?\n[ \t]*")


def rewrite_script(
    text: str, new: Config, *, attn_dp_spelling: bool, only: Collection[int] | None = None
) -> tuple[str, list[str]]:
    """`text` with every launch carrying `new`'s layout (with `only`, the launches of those
    indices: one server of a deployment); and notes for what could not be written as a flag
    (environment variables, tool-only facts)."""
    text, (notes,) = rewrite_each(text, [(new, only)], attn_dp_spelling=attn_dp_spelling)
    return text, notes


def rewrite_each(
    text: str,
    targets: Sequence[tuple[Config, Collection[int] | None]],
    *,
    attn_dp_spelling: bool,
) -> tuple[str, list[list[str]]]:
    """`rewrite_script` for several servers at once: each `(layout, indices)` carried into
    the launches of those indices (None: every launch), the script read once and edited
    once; the notes of each target in its order. Why: one rewrite per server read the
    whole script again each time (bashlex: 20 s for 250 one-line servers)."""
    commands = read_launch_commands(text)
    edits: list[tuple[int, int, str]] = []
    notes: list[list[str]] = []
    for new, only in targets:
        target = spelled(new, attn_dp_spelling)
        said: list[str] = []
        indices = range(len(commands)) if only is None else sorted(only)
        for index in indices:
            if not 0 <= index < len(commands):
                continue
            command = commands[index]
            if command.form != "shell":
                raise _not_editable(command)
            layout = layout_edits(text, command, target, attn_dp_spelling)
            edits += layout.edits
            said += layout.said
            for name, var in layout.env:
                said.append(f"line {command.line}: set {var} for {name} = {target[name]} by hand")
        notes.append(said)
    return applied(text, edits), notes


def _not_editable(command: LaunchCommand) -> InputError:
    what = FORM_TEXT.get(command.form, command.form)
    return InputError(
        f"line {command.line}: the command is {what}; --rewrite edits shell text only "
        "(apply the fix printed above by hand)"
    )


@dataclass(frozen=True)
class LayoutEdits:
    """What carrying a layout takes in one launch: the edits to its text, and the changed
    fields no flag sets (environment variables as (field, variable); tool-only facts)."""

    edits: list[tuple[int, int, str]]
    env: list[tuple[str, str]]
    facts: list[str]
    #: The command's own `--model-path` (None: it names no model).
    model_path: str | None = None
    #: What to say about fields set inside a variable's value (`Word.via`): overridden by
    #: a flag after the last word (SGLang's parser keeps the last), or to change by hand.
    said: tuple[str, ...] = ()


def layout_edits(
    text: str, command: LaunchCommand, target: dict[str, Any], attn_dp_spelling: bool
) -> LayoutEdits:
    """The edits that give `command` (read from `text`) the `target` values (`spelled`): a
    flag that sets a changed field is replaced where it stands, in the user's spelling of it
    (`--tp=6` becomes `--tp=8`), a repeat of it is removed, a field the command does not set
    gets its flag after the command's last word."""
    parsed = parse_launch(command)
    values = {k: v for k, v in parsed.values.items() if k not in _NOT_REWRITTEN}
    old = spelled(config_from_values(values), attn_dp_spelling)
    changed = [n for n in CONFIG_SPECS if old[n] != target[n] and n not in _NOT_REWRITTEN]
    env = [
        (n, var)
        for n, var in _ENV_VARS.items()
        if parsed.values.get(n, CONFIG_SPECS[n].default) != target[n]
    ]
    # `--gpu`'s class and platform are said by `--gpu` again: no command carries them.
    facts = [n for n in changed if not _writable(n) and n not in IMPLIED_BY_GPU]
    changed = [n for n in changed if _writable(n)]
    groups: list[tuple[str, ...]] = []
    if attn_dp_spelling and any(n in DP_GROUP for n in changed):
        groups.append(DP_GROUP)
    groups += [(n,) for n in changed if not (attn_dp_spelling and n in DP_GROUP)]
    end = command.words[-1].end if command.words else command.span[1]
    edits: list[tuple[int, int, str]] = []
    said: list[str] = []
    typed = {w.pos: w.text for w in command.words}
    via = {w.pos: w.via for w in command.words if w.via is not None}
    for fields in groups:
        flags = " ".join(f for f in (flag_words(n, target[n]) for n in fields) if f)
        spans = sorted(s for n in fields for s in parsed.spans.get(n, []))
        inside = sorted({via[s[0]] for s in spans if s[0] in via})
        if inside:  # the flag is in a variable's value, not where the variable stands
            where = ", ".join(inside)
            if flags and all(target[n] is not False for n in fields):
                edits.append((end, end, " " + flags))
                said.append(f"line {command.line}: {flags} added after {where}, which sets it "
                            "too (SGLang keeps the last)")  # fmt: skip
            else:
                names = ", ".join(fields)
                said.append(f"line {command.line}: {names} is set inside {where}; change it "
                            "where that variable is set")  # fmt: skip
            continue
        if not spans:
            if flags:
                edits.append((end, end, " " + flags))
            continue
        first, *rest = spans
        if len(fields) == 1:
            flags = _as_typed(fields[0], flags, typed[first[0]])
        edits.append((*_with_blank_before(text, first, flags), flags))
        edits += [(*_with_blank_before(text, s, ""), "") for s in rest]
    if old["speculative_algorithm"] is not None and target["speculative_algorithm"] is None:
        set_at = {s[0] for spans in parsed.spans.values() for s in spans}  # edited above
        edits += [
            (*_with_blank_before(text, span, ""), "")
            for span in _prefixed_flags(command, _SPECULATIVE)
            if span[0] not in via and span[0] not in set_at
        ]
    if target["nnodes"] == 1 and old["nnodes"] != 1:
        edits += [
            (*_with_blank_before(text, span, ""), "")
            for span in _node_flags(command, parsed.spans.get("node_rank", []))
            if span[0] not in via
        ]
    return LayoutEdits(edits, env, facts, parsed.model_path, tuple(said))


#: The flags that tune speculative decoding (`--speculative-num-steps 3`, the draft model):
#: with the algorithm switched off they do nothing, and go with it.
_SPECULATIVE = "--speculative-"


def _prefixed_flags(command: LaunchCommand, prefix: str) -> list[tuple[int, int]]:
    """Where `command` gives a flag starting with `prefix`, with its value if it takes one."""
    spans = []
    words = command.words
    for i, word in enumerate(words):
        flag, eq, _ = word.text.partition("=")
        if not flag.startswith(prefix):
            continue
        value = i + 1 < len(words) and not eq and not words[i + 1].text.startswith("-")
        spans.append((word.pos, words[i + 1].end if value else word.end))
    return spans


def _node_flags(command: LaunchCommand, node_rank: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Where `command` says which node of a job it is (`--node-rank`, spans as read) and
    where the job meets (`--dist-init-addr` and its value): what a launch the fix moves
    onto one node no longer needs, and is harmed by. SGLang 0.5.23 reads both with
    `--nnodes 1` too: torch.distributed still rendezvouses at `--dist-init-addr`
    (`distributed/bootstrap.py`, `_resolve_dist_init_method`), so a host that is not that
    address never starts; a node of rank 1 or more runs no HTTP server (node 0's job,
    `entrypoints/http_server.py`) and takes ranks past the layout's (`engine.py`,
    `_calculate_rank_ranges`)."""
    spans = list(node_rank)
    words = command.words
    for i, word in enumerate(words):
        flag, eq, _ = word.text.partition("=")
        if flag != "--dist-init-addr":
            continue
        value = i + 1 < len(words) and not eq and not words[i + 1].text.startswith("--")
        spans.append((word.pos, words[i + 1].end if value else word.end))
    return spans


def _as_typed(name: str, flags: str, typed: str) -> str:
    """`flags` (`--tp-size 8`) in the spelling of the flag the user typed for `name`
    (`--tp=6` gives `--tp=8`): an alias or `=` form of a flag that takes a value."""
    spec = CONFIG_SPECS[name]
    flag, eq, _ = typed.partition("=")
    written, blank, value = flags.partition(" ")
    if not blank or written != spec.flags[0] or flag not in spec.flags:
        return flags
    return f"{flag}{eq or ' '}{value}"


def fixed_command(
    text: str,
    command: LaunchCommand,
    new: Config,
    *,
    attn_dp_spelling: bool,
    model_path: str | None = None,
    bare: bool = False,
) -> str:
    """`command` (a launch read from `text`) carrying `new`'s layout, on one line, in the
    user's own words: `fix` prints it for the user to paste back, so every word the fix does
    not change stays as typed and where it was (`--port`, `--trust-remote-code`, `NCCL_*=`
    prefixes, `nohup`, `docker run ...`, redirections), edited as `validate --rewrite` edits
    a script (`layout_edits`). Variables the script `export`s before the launch lead the
    line; a changed environment fact is set there; tool-only facts follow in a comment, as
    `launch_command` writes them; `model_path` is added when the command names no model.
    `bare`: only the environment, the launcher and its flags (what a pod runs: no wrapper,
    no redirection), for `--emit lws`. Nothing is parsed again but the edited line for
    `bare`: a pasted megabyte is read once."""
    exported = command.exported
    if command.form != "shell":  # a manifest's list: its words, as a shell would take them
        exported = command.env
        text = " ".join([command.program, *(shlex.quote(w.text) for w in command.words)])
        command = read_launch_commands(text)[0]
    target = spelled(new, attn_dp_spelling)
    layout = layout_edits(text, command, target, attn_dp_spelling)
    edits = list(layout.edits)
    start, stop = command.span
    if model_path is not None and layout.model_path is None:
        end = command.words[-1].end if command.words else stop
        edits.append((end, end, f" --model-path {shlex.quote(model_path)}"))
    changed = {var for _, var in layout.env}
    before = command.words[0].pos if command.words else stop
    edits += [(m.start(), m.end(), "") for m in _assignments(changed).finditer(text, start, before)]
    line = applied(text[start:stop], [(a - start, b - start, r) for a, b, r in edits])
    line = _CONTINUATION.sub(" ", line)
    if bare:
        read = read_launch_commands(line)[0]
        own = [f"{k}={shlex.quote(v)}" for k, v in dict(read.env).items()]
        line = " ".join([*own, read.program, *(shlex.quote(w.text) for w in read.words)])
    # An exported variable the launch sets again itself is said once, in the launch's words.
    spans = zip(command.env, command.env_spans, strict=False)
    set_here = {k for (k, _), (a, _) in spans if start <= a < stop}
    env = [f"{k}={shlex.quote(v)}" for k, v in exported if k not in changed | set_here]
    env += [f"{var}={_env_value(target[n])}" for n, var in layout.env if target[n] is not None]
    line = " ".join([*env, line])
    if layout.facts:
        line += FACTS_MARK
        line += " ".join(f"{n}={fmt_value(target[n])}" for n in layout.facts)
    return line


def _assignments(variables: Collection[str]) -> re.Pattern[str]:
    """A `VAR=value` word (or docker's `-e VAR=value`) of one of `variables`, with its
    trailing blanks; a pattern that matches nothing for none."""
    if not variables:
        return re.compile(r"(?!)")
    names = "|".join(map(re.escape, sorted(variables)))
    return re.compile(rf"(?:(?:-e|--env)[ =])?(?:{names})=\S*[ \t]*")


def _env_value(value: Any) -> str:
    """An environment fact as SGLang reads its variable: 1/0 for a switch."""
    if isinstance(value, bool):
        return "1" if value else "0"
    return shlex.quote(str(value))


def set_flags(text: str, flags: dict[int, list[tuple[str, str]]]) -> str:
    """`text` with flags that are not layout fields set on some launches (launch index ->
    (flag, value) pairs): a flag given is replaced where it stands with its value, a flag
    absent goes after the launch's last word. A deployment's fix gives a decode server its
    prefill's `--page-size`, `--kv-cache-dtype`, transfer backend and so on this way."""
    edits: list[tuple[int, int, str]] = []
    for index, command in enumerate(read_launch_commands(text)):
        if index in flags and command.form != "shell":
            raise _not_editable(command)
        words = command.words
        for flag, value in flags.get(index, []):
            written = f"{flag} {value}"
            at = [i for i, w in enumerate(words) if w.text.partition("=")[0] == flag]
            if not at:
                edits.append((words[-1].end, words[-1].end, " " + written))
                continue
            for n, i in enumerate(at):
                inline = "=" in words[i].text
                last = i if inline or i + 1 >= len(words) else i + 1
                span = (words[i].pos, words[last].end)
                replacement = written if n == 0 else ""
                edits.append((*_with_blank_before(text, span, replacement), replacement))
    return applied(text, edits)


def set_env_values(text: str, values: dict[int, list[tuple[str, str]]]) -> tuple[str, list[str]]:
    """`text` with environment variables given other values on some launches (launch
    index -> (variable, value) pairs), edited where each value is written: the `VAR=value`
    before the launch, or the `export VAR=value` line before it when no other launch runs
    with that line's value; else (an export other launches share) a `VAR=value` put before
    the launch. A value not written as read (docker's `-e`, escapes, a manifest) is left,
    with a note to set it by hand."""
    commands = read_launch_commands(text)
    edits: list[tuple[int, int, str]] = []
    notes: list[str] = []
    for index, command in enumerate(commands):
        for name, value in values.get(index, []):
            span = command.value_span(name) if command.form == "shell" else None
            if span is None:
                notes.append(
                    f"line {command.line}: set {name}={value} by hand (its value is not "
                    "written in the script as it is read: docker's -e, escapes, a manifest)"
                )
                continue
            shared = any(other is not command and span in other.env_spans for other in commands)
            if shared:
                edits.append((command.span[0], command.span[0], f"{name}={value} "))
            else:
                edits.append((*span, value))
    return applied(text, edits), notes


def applied(text: str, edits: list[tuple[int, int, str]]) -> str:
    out = text
    for start, stop, replacement in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:start] + replacement + out[stop:]
    return out


def _writable(name: str) -> bool:
    spec = CONFIG_SPECS[name]
    return bool(spec.flags) and not spec.tool_only


def _with_blank_before(text: str, span: tuple[int, int], replacement: str) -> tuple[int, int]:
    """A span to remove takes the blanks before it on its line with it (no double spaces)."""
    start, stop = span
    if replacement:
        return start, stop
    while start > 0 and text[start - 1] in " \t":
        start -= 1
    return start, stop
