"""Rule packs: one SGLang release's rules each (see `pack.py` for why and `releases.py`
for what each release changed)."""

from __future__ import annotations

from meshsat.solver.packs.pack import Pack, PackDiff
from meshsat.solver.packs.registry import NEWEST, get_pack, installed_pack, known_versions
from meshsat.solver.packs.releases import PACKS, SEED

__all__ = [
    "NEWEST",
    "PACKS",
    "SEED",
    "Pack",
    "PackDiff",
    "get_pack",
    "installed_pack",
    "known_versions",
]
