"""Bash itself as the oracle of what a launch script passes its launcher: the script runs
with the launcher swapped for `printf`, which prints each word it is given on a line."""

from __future__ import annotations

import shutil
import subprocess

import pytest

#: Skips a test where there is no bash to ask.
needs_bash = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


def words_bash_passes(script: str, launcher: str) -> list[str]:
    """The words each `launcher` in `script` is run with, in order, as bash runs it (a
    `bash -c '...'` inside prints its own)."""
    shown = script.replace(f"bash -c '{launcher}", 'bash -c \'printf "%s\\n"')
    shown = shown.replace(launcher, "printf '%s\\n'")
    ran = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", shown],
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )
    return ran.stdout.split("\n")[:-1]
