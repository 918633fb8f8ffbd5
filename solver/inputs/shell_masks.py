"""Shell syntax the parser meshsat uses (bashlex) cannot read, rewritten at the same width
into syntax it can, so a launch script that holds it is read rather than refused.

Every rewrite keeps each character's position (the reader edits the user's text by
position: `--rewrite`, `fix`) and each command's meaning for what meshsat reads: which
commands run, and in which order, so far as it matters to a launch.

- `$((expression))` (bashlex: "arithmetic expansion" not implemented) becomes `${name}`,
  a parameter whose value `shell_vars` computes from the expression.
- `case WORD in pattern) body ;; ... esac` (bashlex cannot parse a pattern) becomes
  `{ :; body ; :; body ; }`: a group whose branches all appear, each after a no-op
  `:`; a group is read as conditional (`shell_vars.ordered_commands`), so what a branch
  assigns is unknown afterwards, and a launch in a branch is still a launch.
- `$(command)` becomes `$(      :)`: bashlex cannot parse an `&&` or `||` list inside one
  ("unexpected token ')'"), which the commonest line of a script holds (`DIR=$(cd
  "$(dirname "$0")" && pwd)`); meshsat never runs a substitution, its value stays unknown
  as written (read from the user's text), and no launch runs inside one.
- `[[ condition ]]` (bashlex: "unexpected token") becomes `[ ... ]` with the condition
  blanked: meshsat never evaluates a test (a branch is conditional whatever it tests).
- `for ((init; test; step))` becomes `for _ in _`: the loop's body is what matters.
- An array `NAME=(word ...)` (also `+=`, and after `declare -a`, `local`, ...; bashlex:
  "unexpected token '('") becomes `NAME=_`, the words kept apart (`ArrayAssignment`) as a
  command of their own at their own positions, so that a launch's `"${NAME[@]}"` reads
  them (`launch.py`, in the shell's order) and `--rewrite` edits them where written.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

#: Where a command may start: the text's start, a line's, or after a separator or keyword.
_COMMAND_START = re.compile(r"(?:^|(?<=[;&|({\n])|(?<=\bthen)|(?<=\bdo)|(?<=\belse))[ \t]*", re.M)
_CASE = re.compile(r"case[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s;]+)[ \t]+in(?=\s)")


def blanked(text: str) -> str:
    """`text` as blanks of its width, its newlines kept (lines stay where they were)."""
    return re.sub(r"[^\n]", " ", text)


def mask_arithmetic(source: str) -> tuple[str, dict[str, str]]:
    """`source` with each `$((expression))` turned into `${name}` of the same width, and
    the expressions by name; one too narrow to hold a name stays as written."""
    table: dict[str, str] = {}
    if "$((" not in source:
        return source, table
    out, i = [], 0
    while (start := source.find("$((", i)) >= 0:
        depth, j = 0, start + 1
        while j < len(source):
            depth += {"(": 1, ")": -1}.get(source[j], 0)
            j += 1
            if depth == 0:
                break
        if depth or source[j - 2 : j] != "))":
            break
        width = j - start - 3  # `${` and `}` around the name
        name = "_" + _base62(len(table))
        if len(name) > width:
            out.append(source[i:j])
            i = j
            continue
        table[name.ljust(width, "_")] = source[start + 3 : j - 2]
        out += [source[i:start], "${", name.ljust(width, "_"), "}"]
        i = j
    out.append(source[i:])
    return "".join(out), table


def _base62(k: int) -> str:
    """`k` in digits 0-9a-zA-Z: names as short as a `$((1))` leaves room for (62² of them
    in three characters); padded with `_`, which is no digit, so they stay distinct."""
    digits = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    out = digits[k % 62]
    while k := k // 62:
        out = digits[k % 62] + out
    return out


def mask_case(source: str) -> str:
    """`source` with each `case ... esac` that holds no other `case` read as a group of
    its branches (module docstring); one it cannot follow is left for the parser to
    refuse, as before."""
    if "esac" not in source:
        return source
    chars = list(source)
    quoted = _quoted(source)
    for m in _at_command_starts(_CASE, source, quoted):
        edits = _branches(source, quoted, m.end())
        if edits is None:
            continue
        chars[m.start() : m.end()] = "{" + " " * (m.end() - m.start() - 1)
        for at, text in edits:
            chars[at : at + len(text)] = text
    return "".join(chars)


def _at_command_starts(
    pattern: re.Pattern[str], source: str, quoted: list[bool]
) -> Iterator[re.Match[str]]:
    """Each match of `pattern` where a command starts, outside quotes and comments."""
    for start in _COMMAND_START.finditer(source):
        m = pattern.match(source, start.end())
        if m is not None and not quoted[m.start()]:
            yield m


def _branches(source: str, quoted: list[bool], i: int) -> list[tuple[int, str]] | None:
    """The rewrites of one case's branches from just after its `in`, ending with its
    `esac`; None when the text is not what this reads (a nested case, no `esac`)."""
    edits: list[tuple[int, str]] = []
    n = len(source)
    while True:
        while i < n and (source[i].isspace() or source[i] == "#"):
            if source[i] == "#":
                j = source.find("\n", i)
                i = n if j < 0 else j
            else:
                i += 1
        if source.startswith("esac", i) and (i + 4 == n or not source[i + 4].isalnum()):
            edits.append((i, "}   "))
            return edits
        close = i
        while close < n and (quoted[close] or source[close] != ")"):
            if source[close] == "\n":
                return None
            close += 1
        if close >= n or close - i + 1 < 2:
            return None
        edits.append((i, ":;" + " " * (close - i - 1)))
        body = close + 1
        end = body
        while end < n:
            if not quoted[end] and source.startswith(";;", end):
                break
            if not quoted[end] and _word_at(source, end, "case"):
                return None
            if not quoted[end] and _word_at(source, end, "esac"):
                break
            end += 1
        if end >= n:
            return None
        if source.startswith(";;", end):
            # A `;` ends the body unless nothing needs ending: an empty body, or one whose
            # last command a newline (or its own `;`, `&`) already ends.
            tail = source[body:end].rstrip(" \t")
            ended = not tail.strip() or tail.endswith(("\n", ";", "&"))
            width = 3 if source.startswith(";;&", end) else 2
            edits.append((end, " " * width if ended else ";" + " " * (width - 1)))
            i = end + width
        else:
            i = end


def _word_at(source: str, i: int, word: str) -> bool:
    """`word` as a whole word at `i`, where a command starts."""
    if not source.startswith(word, i):
        return False
    after = i + len(word)
    if after < len(source) and (source[after].isalnum() or source[after] == "_"):
        return False
    before = source[:i].rstrip(" \t")
    return not before or before[-1] in ";&|\n"


def _quoted(source: str) -> list[bool]:
    """Per character: inside quotes, after a backslash, or in a comment."""
    out = [False] * len(source)
    quote = ""
    i = 0
    while i < len(source):
        c = source[i]
        if quote:
            out[i] = True
            if c == "\\" and quote == '"' and i + 1 < len(source):
                out[i + 1] = True
                i += 2
                continue
            if c == quote:
                quote = ""
        elif c == "\\":
            out[i] = True
            if i + 1 < len(source):
                out[i + 1] = True
            i += 2
            continue
        elif c in "'\"":
            out[i], quote = True, c
        elif c == "#" and _starts_comment(source, i):
            end = source.find("\n", i)
            end = len(source) if end < 0 else end
            out[i:end] = [True] * (end - i)
            i = end
            continue
        i += 1
    return out


#: `[[` where a test command starts (after a separator, `if`, `while`, `!`, ...).
_TEST = re.compile(r"(?:^|(?<=[\s;&|(!]))\[\[(?=\s)", re.M)
_FOR_ARITH = re.compile(r"\bfor[ \t]*\(\(")
_ARRAY = re.compile(
    r"(?:(?:declare|local|typeset|readonly|export)[ \t]+(?:-\w+[ \t]+)*)?"
    r"(?P<name>[A-Za-z_]\w*)(?P<op>\+?=)\("
)


def mask_tests(source: str) -> str:
    """`source` with each `[[ ... ]]` turned into `[ ... ]` around blanks (module
    docstring); one without its `]]` on the same line stays for the parser to refuse."""
    if "[[" not in source:
        return source
    chars = list(source)
    quoted = _quoted(source)
    for m in _TEST.finditer(source):
        if quoted[m.start()]:
            continue
        close = m.end()
        while close < len(source) and source[close] != "\n":
            if not quoted[close] and source.startswith("]]", close):
                break
            close += 1
        if not source.startswith("]]", close) or not source[close - 1].isspace():
            continue
        chars[m.start() : close + 2] = "[" + " " * (close - m.start()) + "]"
    return "".join(chars)


def mask_for_arith(source: str) -> str:
    """`source` with each `for ((...))` header turned into `for _ in _` (module docstring)."""
    if "((" not in source:
        return source
    chars = list(source)
    quoted = _quoted(source)
    for m in _FOR_ARITH.finditer(source):
        if quoted[m.start()]:
            continue
        close = source.find("))", m.end())
        newline = source.find("\n", m.end())
        if close < 0 or (0 <= newline < close):
            continue
        width = close + 2 - (m.end() - 2)
        if width < 6:
            continue
        chars[m.end() - 2 : close + 2] = "_ in _".ljust(width)
    return "".join(chars)


@dataclass(frozen=True)
class ArrayAssignment:
    """One array assignment (`NAME=(...)`, `NAME+=(...)`): its words as a command of their
    own (the text as wide as the script, blank but for `:` where the `=` was and the
    words, newlines and comments blanked), which the reader takes in the shell's order."""

    name: str
    append: bool
    words: str
    line: int


def mask_arrays(source: str) -> tuple[str, dict[int, ArrayAssignment]]:
    """`source` with each array assignment turned into `NAME=_` of the same width, and the
    assignments by where their name starts (module docstring); one whose `)` is not found
    stays as written."""
    found: dict[int, ArrayAssignment] = {}
    if "=(" not in source:
        return source, found
    chars = list(source)
    quoted = _quoted(source)
    for m in _at_command_starts(_ARRAY, source, quoted):
        close = _closing(source, quoted, m.end())
        if close is None:
            continue
        opened = m.end() - 1
        body = [" "] * len(source)
        body[opened - 1] = ":"  # on the `=`: a blank then stands where the `(` was
        for i in range(opened + 1, close):
            if source[i] != "\n" and not _comment(source, quoted, i):
                body[i] = source[i]
        line = source.count("\n", 0, m.start()) + 1
        found[m.start("name")] = ArrayAssignment(m["name"], m["op"] == "+=", "".join(body), line)
        chars[opened] = "_"
        for i in range(opened + 1, close + 1):
            if source[i] != "\n":
                chars[i] = " "
    return "".join(chars), found


def _comment(source: str, quoted: list[bool], i: int) -> bool:
    """Whether `i` is in a comment (`_quoted` marks comments as it marks quotes)."""
    if not quoted[i]:
        return False
    j = i
    while j > 0 and quoted[j - 1] and source[j - 1] != "\n":
        j -= 1
    return source[j] == "#" and _starts_comment(source, j)


def _starts_comment(source: str, i: int) -> bool:
    """Whether the `#` at `i` begins a comment: where a word begins (after a blank, an
    operator or a parenthesis, as in an array's `(# note`)."""
    return i == 0 or source[i - 1].isspace() or source[i - 1] in ";&|()"


def _closing(source: str, quoted: list[bool], i: int) -> int | None:
    """The `)` closing an array's `(` just before `i`, past nested `$(...)`."""
    depth = 1
    while i < len(source):
        if not quoted[i]:
            if source[i] == "(":
                depth += 1
            elif source[i] == ")":
                depth -= 1
                if depth == 0:
                    return i
        i += 1
    return None


def mask_substitutions(source: str) -> str:
    """`source` with the inside of each `$(...)` blanked before a `:` (module docstring);
    from one whose `)` is not found on, the text stays as written."""
    if "$(" not in source:
        return source
    chars = list(source)
    n, i, quote = len(source), 0, ""
    while i < n:
        c = source[i]
        if c == "\\":
            i += 2
            continue
        if quote == "'" or (c == "'" and not quote):
            quote = "" if quote == "'" and c == "'" else "'"
        elif c == '"':
            quote = "" if quote == '"' else '"'
        elif c == "#" and not quote and _starts_comment(source, i):
            end = source.find("\n", i)
            i = n if end < 0 else end
            continue
        elif source.startswith("$(", i) and not source.startswith("$((", i):
            close = _substitution_end(source, i + 2)
            if close is None:
                break
            inside = [k for k in range(i + 2, close) if source[k] != "\n"]
            for k in inside:
                chars[k] = " "
            if inside:  # last: the parser then ends the substitution where the user's does
                chars[inside[-1]] = ":"
            i = close + 1
            continue
        i += 1
    return "".join(chars)


def _substitution_end(source: str, i: int) -> int | None:
    """The `)` that closes a `$(` whose inside starts at `i`: past quotes, escapes and
    nested parentheses."""
    depth, quote, n = 1, "", len(source)
    while i < n:
        c = source[i]
        if c == "\\" and quote != "'":
            i += 2
            continue
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None
