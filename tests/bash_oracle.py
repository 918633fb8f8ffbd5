"""Bash itself as the oracle of what a launch script passes its launcher: the script runs
with the launcher swapped for a function that prints each word it is given on a line."""

from __future__ import annotations

import shutil
import subprocess

import pytest

#: Skips a test where there is no bash to ask.
needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


#: The launcher's stand-in: a function that prints each word it is given on a line,
#: exported so that a `bash -c '...'` inside runs it too, and a name that needs no quotes
#: wherever the launcher stood (inside a string `eval` runs, or single quotes).
_PRELUDE = "__launch() { printf '%s\\n' \"$@\"; }\nexport -f __launch\n"


def words_bash_passes(script: str, launcher: str) -> list[str]:
    """The words each `launcher` in `script` is run with, in order, as bash runs it (a
    `bash -c '...'` or an `eval` inside prints its own)."""
    shown = _PRELUDE + script.replace(launcher, "__launch")
    ran = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", shown],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    return ran.stdout.split("\n")[:-1]
