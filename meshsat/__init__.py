"""meshsat: which SGLang parallel layouts are legal, why one is rejected, and the nearest
one that works.

One import name of its own (`solver` and `cp` are taken on PyPI by unrelated packages): the
rule model lives in `meshsat.solver`, the torch context-parallel strategies in `meshsat.cp`.
Importing `meshsat` loads neither; `from meshsat import solver` is the validation API and
never imports torch or Z3 (docs/architecture.md).
"""

from __future__ import annotations

from meshsat import entry as _entry

__all__ = ["__version__"]

__version__ = "0.1.0"

# `python -m meshsat.solver.cli` loads pydantic, typer and rich (through meshsat.solver)
# before its `__main__` runs: settle Ctrl-C and closed streams first (meshsat.entry).
if _entry.run_as_module():
    _entry.settle()
