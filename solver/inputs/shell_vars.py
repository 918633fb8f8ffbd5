"""Shell variables a launch script sets before it launches, so `--tp "$TP"` reads as the
`TP=16` the script wrote above it.

Launch scripts name their sizes once and expand them (SGLang's own SLURM example sets
`tp_size=16` and passes `--tp "$tp_size"`); read as unknown, such a size was left unset and
judged at 1, so a valid two-node launch broke TOPO-NNODES. A value is known only where the
shell's order of execution makes it certain, so each rule here errs towards "unknown":

- an assignment counts where it runs unconditionally: a top-level `NAME=value` line or
  `export NAME=value`; one inside an `if`, a loop, a `case`, a function, a subshell or an
  `&&`/`||` list makes the name unknown from there on (which branch runs is not known);
- `NAME=value cmd` sets NAME for `cmd`'s environment only, and the shell expands `cmd`'s
  words before that, so it never feeds an expansion;
- a value is known when its own expansions are (`B=${A}0`); `$(...)` never is;
- `$NAME` and `${NAME}` take the value; `${NAME:-word}` and `${NAME-word}` take `word` when
  the script never set NAME (what it runs unless the caller's environment sets NAME,
  which the notes say); any other parameter form (`$1`, `${#NAME}`, `${NAME%x}`) is
  unknown;
- `$((expression))` (which `shell_masks` turns into a parameter the parser reads) takes
  its value when it is integer `+ - * / %` over known values, bash's truncating division.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

#: A parameter expansion meshsat reads: NAME, or NAME with a default (`:-`, `-`).
_PARAMETER = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?-)(?P<default>.*))?", re.S)
#: bashlex nodes whose commands run conditionally, repeatedly or elsewhere.
_CONDITIONAL = frozenset(
    {"if", "for", "while", "until", "function", "case", "compound", "pipeline"}
)


@dataclass(frozen=True)
class Assigned:
    """A variable's value where it is certain (None: set, but not knowably), and the line
    that set it."""

    value: str | None
    line: int


@dataclass
class ShellVariables:
    """The variables a script has set so far, in its order of execution."""

    known: dict[str, Assigned] = field(default_factory=dict)
    #: The script's arithmetic expansions, by the name each stands in for (`mask_arithmetic`).
    arithmetic: dict[str, str] = field(default_factory=dict)

    def assign(self, word: str, parts: Any, source: str, line: int, certain: bool) -> None:
        """Record `NAME=value` (a word as bashlex gives it, its parts for expansions)."""
        pair = split_assignment(word)
        if pair is None:
            return
        name, value = pair
        read = self.expand(value, parts, source) if certain else None
        self.known[name] = Assigned(None if read is None else read[0], line)

    def expand(
        self, word: str, parts: Any, source: str, text: str | None = None
    ) -> tuple[str, list[str]] | None:
        """`word` with its parameter expansions replaced by their values, and a note per
        expansion read (as `text`, the user's, writes it); None when any expansion in it
        is unknown here."""
        out, notes, cursor = word, [], 0
        for part in parts or ():
            if part.kind != "parameter":
                return None
            written = source[part.pos[0] : part.pos[1]]
            shown = written if text is None else text[part.pos[0] : part.pos[1]]
            value = self._value(part.value)
            if value is None:
                return None
            at = out.find(written, cursor)
            if at < 0:
                return None
            out = out[:at] + value[0] + out[at + len(written) :]
            cursor = at + len(value[0])
            notes.append(f"{shown} = {value[0]!r} ({value[1]})")
        return out, notes

    def _value(self, parameter: str) -> tuple[str, str] | None:
        m = _PARAMETER.fullmatch(parameter)
        if m is None:
            return None
        name, op, default = m["name"], m["op"], m["default"]
        if name in self.arithmetic and op is None:
            return self._arithmetic(self.arithmetic[name])
        got = self.known.get(name)
        if got is not None:
            if got.value is None:
                return None
            if op == ":-" and got.value == "":
                return _literal(default, f"{name} is empty on line {got.line}; its default")
            return got.value, f"set on line {got.line}"
        if op is None:
            return None
        return _literal(default, f"the script's default; {name} is not set in the script")

    def _arithmetic(self, expression: str) -> tuple[str, str] | None:
        """`$((expression))` over integers and the variables known here, or None."""
        lines: list[str] = []

        def known(m: re.Match[str]) -> str:
            name = m["braced"] or m["name"]
            got = self.known.get(name)
            if got is None or got.value is None or not re.fullmatch(r"-?\d+", got.value):
                raise LookupError(name)
            lines.append(f"{name} set on line {got.line}")
            return f"({got.value})"

        try:
            body = _ARITH_NAME.sub(known, expression)
            value = _evaluate(ast.parse(body.strip(), mode="eval").body)
        except (LookupError, SyntaxError, ValueError, ZeroDivisionError):
            return None
        return str(value), "; ".join(dict.fromkeys(lines)) or "arithmetic"


#: A variable inside `$((...))`: `$N`, `${N}` or a bare `N`.
_ARITH_NAME = re.compile(r"\$\{(?P<braced>[A-Za-z_]\w*)\}|\$?\b(?P<name>[A-Za-z_]\w*)\b")
_ARITH_OPS: dict[type, Any] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: _truncated(a, b),
    ast.FloorDiv: lambda a, b: _truncated(a, b),
    ast.Mod: lambda a, b: a - b * _truncated(a, b),
}


def _truncated(a: int, b: int) -> int:
    """Bash's integer division: towards zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def _evaluate(node: ast.expr) -> int:
    """An arithmetic expression of integers, + - * / % and parentheses (ValueError on
    anything else: a comparison, a call, a name left over)."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
        return int(_ARITH_OPS[type(node.op)](_evaluate(node.left), _evaluate(node.right)))
    raise ValueError("not plain integer arithmetic")


def _literal(default: str, why: str) -> tuple[str, str] | None:
    """A default that is itself plain text (a nested expansion or quote is unknown)."""
    if any(c in default for c in "$`\"'\\"):
        return None
    return default, why


def split_assignment(text: str) -> tuple[str, str] | None:
    """`NAME=value` as (NAME, value); None for a word that assigns nothing."""
    name, eq, value = text.partition("=")
    if eq and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        return name, value
    return None


def ordered_commands(nodes: list[Any]) -> list[tuple[Any, bool]]:
    """Every simple command, in order, through lists, pipelines and compounds, each with
    whether it surely runs once, in this shell, when the script gets to it (False inside
    a branch, loop, function, pipeline or subshell, or in an `&&`/`||` list)."""
    out: list[tuple[Any, bool]] = []
    stack: list[tuple[Any, bool]] = [(n, True) for n in reversed(nodes)]
    while stack:
        node, certain = stack.pop()
        if node.kind == "command":
            out.append((node, certain))
            continue
        children = getattr(node, "parts", None) or getattr(node, "list", None) or []
        inner = certain and node.kind not in _CONDITIONAL
        if node.kind == "list" and any(
            c.kind == "operator" and c.op in ("&&", "||") for c in children
        ):
            inner = False
        stack.extend((c, inner) for c in reversed(children))
    return out
