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
"""

from __future__ import annotations

import re

#: Where a command may start: the text's start, a line's, or after a separator or keyword.
_COMMAND_START = re.compile(r"(?:^|(?<=[;&|({\n])|(?<=\bthen)|(?<=\bdo)|(?<=\belse))[ \t]*", re.M)
_CASE = re.compile(r"case[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s;]+)[ \t]+in(?=\s)")


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
    for start in _COMMAND_START.finditer(source):
        m = _CASE.match(source, start.end())
        if m is None or quoted[m.start()]:
            continue
        edits = _branches(source, quoted, m.end())
        if edits is None:
            continue
        chars[m.start() : m.end()] = "{" + " " * (m.end() - m.start() - 1)
        for at, text in edits:
            chars[at : at + len(text)] = text
    return "".join(chars)


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
        elif c == "#" and (i == 0 or source[i - 1].isspace()):
            end = source.find("\n", i)
            end = len(source) if end < 0 else end
            out[i:end] = [True] * (end - i)
            i = end
            continue
        i += 1
    return out
