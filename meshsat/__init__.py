"""meshsat: which SGLang parallel layouts are legal, why one is rejected, and the nearest
one that works.

One import name of its own (`solver` and `cp` are taken on PyPI by unrelated packages): the
rule model lives in `meshsat.solver`, the torch context-parallel strategies in `meshsat.cp`.
Importing `meshsat` loads neither; `from meshsat import solver` is the validation API and
never imports torch or Z3 (docs/architecture.md).
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
