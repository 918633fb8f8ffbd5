"""One output path: data on stdout (text or JSON), diagnostics on stderr."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console

# Rich assumes 80 columns when stdout is not a terminal, which truncates the 8-GPU group grid
# and wraps violation tables in logs; 120 fits both. COLUMNS still wins when set.
_PIPE_WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 120
out = Console(highlight=False, soft_wrap=False, width=_PIPE_WIDTH)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def note(text: str) -> None:
    err.print(f"[dim]note:[/dim] {text}", markup=True)
