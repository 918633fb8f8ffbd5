"""meshsat solver: the SGLang parallel-layout rules, declared once, and what they answer.

Entry points:
- `validate(config, model=None) -> Report`: every violated rule, the conflicting fields,
  SGLang's silent changes and the derived widths.
- `check(config, model=None)`: the same, raising `InvalidLayoutError` for a server.
- `fix(config, model=None, pins=(), gpus=None, objective="changes", top=1) -> FixReport`:
  the nearest valid layouts, or the pins and rules that conflict.
- `Config`, `ModelSpec`: the typed inputs; `RULES`, `RESOLUTIONS`: the catalogue.
- `enumerate(gpus, ...) -> Iterator[Layout]`, `count(gpus, ...)`: every legal layout.
- `validate_deployment(script, sglang_version=None) -> DeploymentReport`: a PD launch
  script (prefill, decode and aggregated servers, routers) checked server by server and
  with the rules between them; `fix_deployment` repairs one (docs/disaggregation.md).

Importing this package loads neither torch nor Z3; Z3 is imported on first need.

Why the names are loaded on first use (PEP 562 `__getattr__`) rather than here: every
module under `meshsat.solver` imports this package first, so an eager list made the SGLang
plugin's check (which needs the reader and `validate`) load enumeration, repair and the
rest of the subsystems in every launching process (issue 22: ~138 ms of a first launch).
`from meshsat.solver import X`, `dir()` and `__all__` work as before; the `TYPE_CHECKING`
imports give type checkers the same names.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from meshsat.solver.catalogue import RESOLUTIONS, RULES
    from meshsat.solver.deployment.fix import DeploymentFix, fix_deployment
    from meshsat.solver.deployment.validate import DeploymentReport, validate_deployment
    from meshsat.solver.enumeration.layouts import Layout, count
    from meshsat.solver.enumeration.layouts import enumerate_layouts as enumerate
    from meshsat.solver.errors import InputError, MeshsatError, MeshsatWarning
    from meshsat.solver.lang.config import Config
    from meshsat.solver.lang.model_spec import ModelSpec
    from meshsat.solver.repair.fix import fix
    from meshsat.solver.repair.results import Conflict, FixReport, FixResult
    from meshsat.solver.validation.report import InvalidLayoutError, Note, Report, Violation
    from meshsat.solver.validation.validate import check, validate

#: Each public name: (module, attribute there).
_WHERE: dict[str, tuple[str, str]] = {
    "RESOLUTIONS": ("meshsat.solver.catalogue", "RESOLUTIONS"),
    "RULES": ("meshsat.solver.catalogue", "RULES"),
    "DeploymentFix": ("meshsat.solver.deployment.fix", "DeploymentFix"),
    "DeploymentReport": ("meshsat.solver.deployment.validate", "DeploymentReport"),
    "fix_deployment": ("meshsat.solver.deployment.fix", "fix_deployment"),
    "validate_deployment": ("meshsat.solver.deployment.validate", "validate_deployment"),
    "Layout": ("meshsat.solver.enumeration.layouts", "Layout"),
    "count": ("meshsat.solver.enumeration.layouts", "count"),
    "enumerate": ("meshsat.solver.enumeration.layouts", "enumerate_layouts"),
    "InputError": ("meshsat.solver.errors", "InputError"),
    "MeshsatError": ("meshsat.solver.errors", "MeshsatError"),
    "MeshsatWarning": ("meshsat.solver.errors", "MeshsatWarning"),
    "Config": ("meshsat.solver.lang.config", "Config"),
    "ModelSpec": ("meshsat.solver.lang.model_spec", "ModelSpec"),
    "fix": ("meshsat.solver.repair.fix", "fix"),
    "Conflict": ("meshsat.solver.repair.results", "Conflict"),
    "FixReport": ("meshsat.solver.repair.results", "FixReport"),
    "FixResult": ("meshsat.solver.repair.results", "FixResult"),
    "InvalidLayoutError": ("meshsat.solver.validation.report", "InvalidLayoutError"),
    "Note": ("meshsat.solver.validation.report", "Note"),
    "Report": ("meshsat.solver.validation.report", "Report"),
    "Violation": ("meshsat.solver.validation.report", "Violation"),
    "check": ("meshsat.solver.validation.validate", "check"),
    "validate": ("meshsat.solver.validation.validate", "validate"),
}

__all__ = [
    "RESOLUTIONS",
    "RULES",
    "Config",
    "Conflict",
    "DeploymentFix",
    "DeploymentReport",
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
    "fix_deployment",
    "validate",
    "validate_deployment",
]


def __getattr__(name: str) -> Any:
    """A public name, imported on first use and kept (later lookups skip this)."""
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(where[0]), where[1])
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
