"""Embedded example layouts, for `meshsat ... --example NAME` and `make demo`."""

from __future__ import annotations

from importlib import resources

from meshsat.solver.errors import InputError


def names() -> list[str]:
    root = resources.files(__name__)
    return sorted(p.name.removesuffix(".yaml") for p in root.iterdir() if p.name.endswith(".yaml"))


def path_of(name: str) -> str:
    if name not in names():
        raise InputError(f"unknown example {name!r}; examples: {', '.join(names())}")
    return str(resources.files(__name__) / f"{name}.yaml")
