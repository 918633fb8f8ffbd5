"""One output path: data on stdout (text or JSON), diagnostics on stderr."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

out = Console(highlight=False, soft_wrap=False)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


def note(text: str) -> None:
    err.print(f"[dim]note:[/dim] {text}", markup=True)
