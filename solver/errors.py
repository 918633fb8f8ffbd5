"""One root for every error meshsat raises on purpose, so callers catch one type."""

from __future__ import annotations


class MeshsatError(Exception):
    """Root of meshsat's exceptions."""


class InputError(MeshsatError, ValueError):
    """Bad input: unknown field, wrong type, unreadable file. The CLI exits 2."""


class MeshsatWarning(UserWarning):
    """Something meshsat chose for the caller that they should know about (which rule pack
    stands in for the SGLang installed here). The CLI prints it as a note."""
