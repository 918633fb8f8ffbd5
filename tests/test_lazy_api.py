"""`meshsat.solver` loads its public names on first use (PEP 562): the names, `dir()` and
`from meshsat.solver import X` are as an eager package's, and importing one submodule (what
the SGLang plugin's check does) no longer loads every subsystem (issue 22)."""

from __future__ import annotations

import importlib
import subprocess
import sys

import meshsat.solver as solver


def test_every_public_name_is_the_defining_modules_object() -> None:
    assert sorted(solver.__all__) == sorted(solver._WHERE)
    assert set(solver.__all__) <= set(dir(solver))
    for name, (module, attr) in solver._WHERE.items():
        assert getattr(solver, name) is getattr(importlib.import_module(module), attr)
    from meshsat.solver import RULES, Config, enumerate, fix

    assert enumerate.__name__ == "enumerate_layouts" and callable(fix)
    assert RULES and Config.__name__ == "Config"


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        solver.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")


def test_the_plugins_check_loads_no_enumeration_or_repair() -> None:
    """A fresh process: the launch guard's import loads the reader and `validate`, and
    neither the enumeration nor the repair subsystem (which the eager package loaded)."""
    code = (
        "import sys\n"
        "import meshsat.solver.integrations.launch_guard\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "meshsat.solver.validation.validate" in out
    skipped = ("meshsat.solver.enumeration", "meshsat.solver.repair", "z3", "torch")
    assert not [m for m in out if m.startswith(skipped)]
