"""One root for every error meshsat raises on purpose, so callers catch one type."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from solver.report import Report


class MeshsatError(Exception):
    """Root of meshsat's exceptions."""


class InputError(MeshsatError, ValueError):
    """Bad input: unknown field, wrong type, unreadable file. The CLI exits 2."""


class InvalidLayoutError(MeshsatError, ValueError):
    """A layout breaks one or more rules. Carries every violation, not just the first."""

    def __init__(self, report: Report) -> None:
        self.report = report
        lines = [
            f"[{v.rule}] {v.message}" + (f" ({v.detail})" if v.detail else "")
            for v in report.violations
        ]
        super().__init__(
            f"invalid parallel layout ({len(lines)} rule(s) violated):\n  " + "\n  ".join(lines)
        )
