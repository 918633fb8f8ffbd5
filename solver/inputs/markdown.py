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

from meshsat.solver.inputs.shell_masks import blanked

#: A fence line: Markdown quote markers (`> `), three or more backticks or tildes, an
#: optional label (`bash`, `shell`, `yaml`) and what follows it: after a language's
#: name anything (MDX titles: ```` ```bash Prefill node ````), after any other word only
#: attributes (`_ATTRIBUTES`), so that a fence glued to a command is no fence line.
_FENCE = re.compile(
    r"[ \t]*((?:>[ \t]?)*)[ \t]*(`{3,}|~{3,})[ \t]*([\w+.\-]*)([^`\n]*?)[ \t]*\r?\n?"
)
#: What may follow an unknown label on a fence line: attributes (`title="x"`, `{.bash}`).
_ATTRIBUTES = re.compile(r"(?:[ \t]+(?:\{[^}\n]*\}|\w+=(?:\"[^\"\n]*\"|'[^'\n]*'|\S+)))*")
#: A fence glued to the code on its line: the code is read, the backticks are not.
_GLUED = re.compile(r"[ \t]*`{3,}(?=[^\s`])")
#: What launches a server or router (a block without it holds no launch).
_LAUNCH = re.compile(r"sglang\S*\.launch_(?:server|router)|sglang\s+serve|mini_lb|launch_lb")
#: A quoted reply's markers at the start of a line.
_QUOTE = re.compile(r"[ \t]*(?:>[ \t]?)+")
#: Labels of blocks always read: shells and the manifests' YAML.
SHELL_LABELS = frozenset(
    {"bash", "sh", "shell", "zsh", "console", "terminal", "shell-session", "sh-session"}
    | {"shellsession", "yaml", "yml"}
)
#: Labels of blocks never read: code that is not shell.
OTHER_LANGUAGES = frozenset(
    {"python", "py", "python3", "pycon", "json", "jsonc", "javascript", "js", "typescript"}
    | {"ts", "go", "golang", "rust", "c", "cpp", "c++", "java", "toml", "diff", "html"}
    | {"xml", "sql", "makefile", "make"}
)


def _read(label: str, code: str) -> bool:
    """Whether a fenced block is launch text (module docstring)."""
    label = label.lower()
    if label in SHELL_LABELS:
        return True
    return label not in OTHER_LANGUAGES and "sglang" in code.lower()


#: A fence line's place and what it says: (line, fence characters, label, in a quote).
Fence = tuple[int, str, str, bool]


def _blocks(fences: list[Fence]) -> list[tuple[Fence, range]]:
    """The fenced blocks, each its opener and its lines, paired as Markdown pairs them: an
    opener is closed by the next fence of its character at least as long (a closer has no
    info string; a line with one opens a new block)."""
    found: list[tuple[Fence, range]] = []
    opener: Fence | None = None
    for fence in fences:
        if opener is None:
            opener = fence
        elif fence[1][0] == opener[1][0] and len(fence[1]) >= len(opener[1]):
            found.append((opener, range(opener[0] + 1, fence[0])))
            opener = None
    return found


def fenced_code(text: str) -> tuple[str, str | None]:
    """`text` as the shell (or the YAML reader) should see it, as wide, and a note on what
    was not read (module docstring); text without a fence comes back as it is, no note."""
    if "```" not in text and "~~~" not in text:
        return text, None
    lines = text.splitlines(keepends=True)
    fences: list[Fence] = []
    for i, line in enumerate(lines):
        m = _FENCE.fullmatch(line)
        if m is None:
            continue
        label, rest = m.group(3), m.group(4)
        if label.lower() in SHELL_LABELS | OTHER_LANGUAGES or _ATTRIBUTES.fullmatch(rest):
            fences.append((i, m.group(2), label, bool(m.group(1))))
    blocks = _blocks(fences)
    inside: set[int] = set()
    quoted: set[int] = set()
    read = 0
    for opener, block in blocks:
        if _read(opener[2], "".join(lines[k] for k in block)):
            read += 1
            inside.update(block)
            if opener[3]:
                quoted.update(block)
    fence_lines = {fence[0] for fence in fences}
    prose = not blocks
    if blocks and not _LAUNCH.search("".join(lines[k] for k in sorted(inside))):
        # No block read launches anything, and the launch is in the prose (an issue's
        # command pasted bare above its traceback's block): the text outside is read.
        blocked = {k for _, block in blocks for k in block} | fence_lines
        outside = [k for k in range(len(lines)) if k not in blocked]
        if _LAUNCH.search("".join(lines[k] for k in outside)):
            inside, quoted = set(outside), set()
            prose = True
    out: list[str] = []
    glued = 0
    for i, line in enumerate(lines):
        if i in fence_lines or (blocks and i not in inside):
            m = _GLUED.match(line) if i not in fence_lines else None
            if m is not None and not blocks:
                glued += 1
                out.append(blanked(m.group()) + line[m.end() :])
            else:
                out.append(blanked(line))
            continue
        if i in quoted and (q := _QUOTE.match(line)) is not None:
            line = blanked(q.group()) + line[q.end() :]
        m = _GLUED.match(line)
        if m is not None:
            glued += 1
            line = blanked(m.group()) + line[m.end() :]
        out.append(line)
    n = len(fence_lines) + glued
    if not n:
        return text, None
    if prose:
        return "".join(out), f"Markdown code fences are not read ({n} fence line(s))"
    return "".join(out), (
        f"only the Markdown page's shell code is read ({read} of its {len(blocks)} code blocks)"
    )
