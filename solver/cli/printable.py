"""Echoed user input made safe for a terminal: the one helper every text output uses.

Why: a pasted launch command or a layout file can hold terminal escapes (a flag named
`--x\\x1b[2J` clears the screen when printed raw), bidirectional overrides (which reorder
what is shown) or bells. Text output (the consoles of `output.py`, table and CSV cells)
shows them as escapes; JSON escapes them itself.
"""

from __future__ import annotations

import re

#: C0 and C1 controls but newline and tab, DEL, and the bidirectional overrides and
#: isolates (which reorder what a terminal shows without being visible themselves).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with its control characters written as escapes (ESC as `\\x1b`), so that
    echoed input cannot clear the screen, move the cursor or retitle the terminal."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_escaped, text)
