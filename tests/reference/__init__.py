"""Slow reference implementations the tests compare the product against (never imported by it)."""
