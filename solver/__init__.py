"""meshsat solver: the SGLang parallel-layout rules, declared once, and what they answer.

Entry points:
- `validate(config, model=None) -> Report`: every violated rule, the conflicting fields,
  SGLang's silent changes and the derived widths.
- `check(config, model=None)`: the same, raising `InvalidLayoutError` for a server.
- `fix(config, model=None, pins=(), gpus=None, objective="changes", top=1) -> FixReport`:
  the nearest valid layouts, or the pins and rules that conflict.
- `Config`, `ModelSpec`: the typed inputs; `RULES`, `RESOLUTIONS`: the catalogue.
- `enumerate(gpus, ...) -> Iterator[Layout]`, `count(gpus, ...)`: every legal layout.

Importing this package loads neither torch nor Z3; Z3 is imported on first need.
"""

from __future__ import annotations

from meshsat.solver.catalogue import RESOLUTIONS, RULES
from meshsat.solver.enumeration.layouts import Layout, count
from meshsat.solver.enumeration.layouts import enumerate_layouts as enumerate
from meshsat.solver.errors import InputError, MeshsatError, MeshsatWarning
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.repair.fix import fix
from meshsat.solver.repair.results import Conflict, FixReport, FixResult
from meshsat.solver.validation.report import InvalidLayoutError, Note, Report, Violation
from meshsat.solver.validation.validate import check, validate

__all__ = [
    "RESOLUTIONS",
    "RULES",
    "Config",
    "Conflict",
    "FixReport",
    "FixResult",
    "InputError",
    "InvalidLayoutError",
    "Layout",
    "MeshsatError",
    "MeshsatWarning",
    "ModelSpec",
    "Note",
    "Report",
    "Violation",
    "check",
    "count",
    "enumerate",
    "fix",
    "validate",
]
