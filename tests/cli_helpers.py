"""Run the `meshsat` CLI in-process and capture what a user would see."""

from __future__ import annotations

from dataclasses import dataclass

import pytest


@dataclass
class Run:
    code: int
    out: str
    err: str


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> Run:
    from meshsat.solver.cli import main

    capsys.readouterr()
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    captured = capsys.readouterr()
    return Run(code, captured.out, captured.err)
