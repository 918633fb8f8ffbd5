"""A launch script rewritten to another layout, edited in place (`validate --rewrite`).

People keep their launch scripts: comments, continuations, environment prefixes, the flags
that have nothing to do with the layout. So the rewrite touches only the layout flags whose
value changes, node by node: a flag that sets a changed field is replaced where it stands
(a repeat of it is removed), a field the node's command does not set gets its flag after the
command's last word, and every other byte stays as it was. Positions come from the same
reader (`meshsat.solver.inputs.launch`), which keeps them in the user's coordinates.
"""

from __future__ import annotations

from collections.abc import Collection

from meshsat.solver.errors import InputError
from meshsat.solver.inputs.command import DP_GROUP, flag_words
from meshsat.solver.inputs.convert import config_from_values
from meshsat.solver.inputs.launch import read_launch_commands
from meshsat.solver.inputs.sglang_cmdline import ENV_FACTS, parse_launch
from meshsat.solver.inputs.spelling import spelled
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.fields import CONFIG_SPECS

_NOT_REWRITTEN = frozenset({"node_rank", *ENV_FACTS.values()})


def rewrite_script(
    text: str, new: Config, *, attn_dp_spelling: bool, only: Collection[int] | None = None
) -> tuple[str, list[str]]:
    """`text` with every launch carrying `new`'s layout (with `only`, the launches of those
    indices: one server of a deployment); and notes for what could not be written as a flag
    (environment variables, tool-only facts)."""
    target = spelled(new, attn_dp_spelling)
    edits: list[tuple[int, int, str]] = []
    notes: list[str] = []
    for index, command in enumerate(read_launch_commands(text)):
        if only is not None and index not in only:
            continue
        if command.form != "shell":
            raise InputError(
                f"line {command.line}: the command is a manifest's list of words; --rewrite "
                "edits shell text only (apply the fix printed above to the list by hand)"
            )
        parsed = parse_launch(command)
        values = {k: v for k, v in parsed.values.items() if k not in _NOT_REWRITTEN}
        old = spelled(config_from_values(values), attn_dp_spelling)
        changed = [
            n
            for n in CONFIG_SPECS
            if old[n] != target[n] and n not in _NOT_REWRITTEN and _writable(n)
        ]
        for name in (n for n in CONFIG_SPECS if n in ENV_FACTS.values() and old[n] != target[n]):
            env = next(var for var, field in ENV_FACTS.items() if field == name)
            notes.append(f"line {command.line}: set {env} for {name} = {target[name]} by hand")
        groups: list[tuple[str, ...]] = []
        if attn_dp_spelling and any(n in DP_GROUP for n in changed):
            groups.append(DP_GROUP)
        groups += [(n,) for n in changed if not (attn_dp_spelling and n in DP_GROUP)]
        end = command.words[-1].end
        for fields in groups:
            flags = " ".join(f for f in (flag_words(n, target[n]) for n in fields) if f)
            spans = sorted(s for n in fields for s in parsed.spans.get(n, []))
            if not spans:
                if flags:
                    edits.append((end, end, " " + flags))
                continue
            first, *rest = spans
            edits.append((*_with_blank_before(text, first, flags), flags))
            edits += [(*_with_blank_before(text, s, ""), "") for s in rest]
    return applied(text, edits), notes


def set_flags(text: str, flags: dict[int, list[tuple[str, str]]]) -> str:
    """`text` with flags that are not layout fields set on some launches (launch index ->
    (flag, value) pairs): a flag given is replaced where it stands with its value, a flag
    absent goes after the launch's last word. A deployment's fix gives a decode server its
    prefill's `--page-size`, `--kv-cache-dtype`, transfer backend and so on this way."""
    edits: list[tuple[int, int, str]] = []
    for index, command in enumerate(read_launch_commands(text)):
        if index in flags and command.form != "shell":
            raise InputError(
                f"line {command.line}: the command is a manifest's list of words; --rewrite "
                "edits shell text only (apply the fix printed above to the list by hand)"
            )
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
