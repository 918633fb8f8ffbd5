"""One root for every error meshsat raises on purpose, so callers catch one type."""

from __future__ import annotations


class MeshsatError(Exception):
    """Root of meshsat's exceptions."""


class InputError(MeshsatError, ValueError):
    """Bad input: unknown field, wrong type, unreadable file. The CLI exits 2."""
