"""The code of a launch pasted from a Markdown page: SGLang's docs, model cards, issues and
READMEs write launches in fenced code blocks (```` ```bash ````), and people copy the fence,
or the whole section with its prose, along with the command.

Neither reads as shell: bash takes the backticks of a fence for a command substitution
around the launch (meshsat then saw "one quoted word"), and prose (`**Run 405B (fp16)
on two nodes**`) is a syntax error. So where the text has a fenced block, only what is
inside its blocks is read; a fence line without its pair (the top or bottom of a block,
copied alone) is not read; a fence glued to the command's first word (```` ```python3 -m
... ````) loses its backticks. Everything not read becomes blanks of the same width, so
positions in the code are positions in the user's text (`--rewrite` edits that text in
place, prose and fences included). A YAML manifest in a fenced block is read the same way.
"""

from __future__ import annotations

import re

#: A fence line: three or more backticks or tildes, an optional one-word info string
#: (`bash`, `shell`, `yaml`), nothing else.
_FENCE = re.compile(r"[ \t]*(`{3,}|~{3,})[ \t]*([\w+.\-]*)[ \t]*\r?\n?")
#: A fence glued to the code on its line: the code is read, the backticks are not.
_GLUED = re.compile(r"[ \t]*`{3,}(?=[^\s`])")


def _blank(text: str) -> str:
    return re.sub(r"[^\n]", " ", text)


def fenced_code(text: str) -> tuple[str, int]:
    """`text` as the shell (or the YAML reader) should see it, as wide, and how many fence
    lines were not read (module docstring); text without a fence comes back as it is."""
    if "```" not in text and "~~~" not in text:
        return text, 0
    lines = text.splitlines(keepends=True)
    fences: list[tuple[int, str]] = []  # (line index, fence characters)
    for i, line in enumerate(lines):
        m = _FENCE.fullmatch(line)
        if m is not None:
            fences.append((i, m.group(1)))
    # Pair them as Markdown does: an opener is closed by the next fence of its character
    # at least as long (a closer has no info string; a line with one opens a new block).
    inside: set[int] = set()
    blocks = 0
    opener: tuple[int, str] | None = None
    for i, fence in fences:
        if opener is None:
            opener = (i, fence)
        elif fence[0] == opener[1][0] and len(fence) >= len(opener[1]):
            inside.update(range(opener[0] + 1, i))
            blocks += 1
            opener = None
    fence_lines = {i for i, _ in fences}
    out: list[str] = []
    glued = 0
    for i, line in enumerate(lines):
        if i in fence_lines or (blocks and i not in inside):
            m = _GLUED.match(line) if i not in fence_lines else None
            if m is not None and not blocks:
                glued += 1
                out.append(_blank(m.group()) + line[m.end() :])
            else:
                out.append(_blank(line))
            continue
        m = _GLUED.match(line)
        if m is not None:
            glued += 1
            line = _blank(m.group()) + line[m.end() :]
        out.append(line)
    return "".join(out), len(fence_lines) + glued
