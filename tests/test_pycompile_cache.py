"""The on-disk cache of compiled catalogue code (solver/backends/pycompile.py).

Oracle: the same source compiled without the cache. Cached functions must behave exactly
like freshly compiled ones on every pack, and a damaged, foreign or disabled cache must
only cost the compilation.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from meshsat.solver.backends import pycompile
from meshsat.solver.backends.pycompile import compile_function, source_of
from meshsat.solver.backends.pyeval import compile_checks, compile_resolution
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.packs import PACKS, get_pack
from tests.strategies import raw_envs


@pytest.fixture(name="cache")
def cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MESHSAT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("MESHSAT_NO_CACHE", raising=False)
    return tmp_path


def _entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.bin"))


def test_second_compilation_reads_the_first_ones_code(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = "def f(x):\n    return x * 3 + 1"
    first = compile_function(source, "f", cache=True)
    assert len(_entries(cache)) == 1
    calls: list[str] = []
    real = compile

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr("builtins.compile", counting)
    second = compile_function(source, "f", cache=True)
    assert calls == []  # read back from disk, not compiled
    assert [second(x) for x in range(-3, 4)] == [first(x) for x in range(-3, 4)]
    assert source_of(second) == source


def test_a_different_source_or_label_is_a_different_entry(cache: Path) -> None:
    compile_function("def f():\n    return 1", "f", cache=True)
    compile_function("def f():\n    return 2", "f", cache=True)
    compile_function("def f():\n    return 2", "f", "other", cache=True)
    assert len(_entries(cache)) == 3
    assert compile_function("def f():\n    return 2", "f", cache=True)() == 2


@pytest.mark.parametrize("damage", [b"", b"not marshal data", b"\xe3" + b"\x00" * 40])
def test_damaged_entries_are_recompiled_and_replaced(cache: Path, damage: bytes) -> None:
    source = "def g(x):\n    return x - 7"
    compile_function(source, "g", cache=True)
    (entry,) = _entries(cache)
    entry.write_bytes(damage)
    assert compile_function(source, "g", cache=True)(10) == 3
    assert entry.read_bytes() != damage


def test_disabled_or_unwritable_cache_only_compiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MESHSAT_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("MESHSAT_NO_CACHE", "1")
    assert compile_function("def h():\n    return 5", "h", cache=True)() == 5
    assert not (tmp_path / "c").exists()
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would go")
    monkeypatch.delenv("MESHSAT_NO_CACHE")
    monkeypatch.setenv("MESHSAT_CACHE_DIR", str(blocker / "sub"))
    assert compile_function("def h():\n    return 6", "h", cache=True)() == 6
    assert pycompile.cache_dir() == blocker / "sub"


def test_uncached_functions_never_touch_the_cache(cache: Path) -> None:
    compile_function("def k():\n    return 0", "k")
    assert _entries(cache) == []


@cache
def _three_ways(version: str) -> tuple[list[Callable[..., Any]], list[Callable[..., Any]]]:
    """(violations, resolve) of one pack: compiled through the cache twice (the second
    read back from what the first wrote), then from the same source bypassing the cache."""
    pack = get_pack(version)
    checks = [compile_checks(pack.rules) for _ in range(2)]
    resolve = [compile_resolution(pack.resolutions, tuple(SPECS)) for _ in range(2)]
    checks.append(compile_function(source_of(checks[0]), "violations"))
    resolve.append(compile_function(source_of(resolve[0]), "resolve"))
    return checks, resolve


@settings(max_examples=60, deadline=None)
@given(env=raw_envs())
def test_cached_catalogue_code_equals_fresh_code_on_every_pack(env: dict[str, Any]) -> None:
    for pack in PACKS:
        checks, resolve = _three_ways(pack.version)
        *cached, fresh = resolve
        resolved, changes = fresh(env)
        assert all(r(env) == (resolved, changes) for r in cached)
        *cached, fresh = checks
        assert all(c(resolved, env) == fresh(resolved, env) for c in cached)
