"""One import name (issue 28, item 11): the folders `solver/` and `cp/` install as
`meshsat.solver` and `meshsat.cp`; `solver` and `cp` are other projects' names on PyPI, so the
installed distribution must not claim them.

Run from a folder outside the checkout, so that only what is installed can be imported (the
checkout's own folders would otherwise be on the path as the working directory).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _run(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, check=False
    )


def test_meshsat_is_the_only_top_level_name_installed(tmp_path: Path) -> None:
    code = (
        "import importlib.util as u, sys\n"
        "import meshsat\n"
        "from meshsat import solver\n"
        "from meshsat.solver.cli import main\n"
        "print(meshsat.__version__, u.find_spec('solver') is None, u.find_spec('cp') is None,\n"
        "      'torch' in sys.modules, 'z3' in sys.modules)\n"
    )
    done = _run(code, tmp_path)
    assert done.returncode == 0, done.stderr
    version, no_solver, no_cp, torch, z3 = done.stdout.split()
    assert version == "0.1.0"
    assert (no_solver, no_cp) == ("True", "True"), "solver/cp must not be top-level names"
    assert (torch, z3) == ("False", "False")


def test_cp_is_reached_under_meshsat(tmp_path: Path) -> None:
    done = _run("from meshsat.cp import instantiate; print(instantiate.__module__)", tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "meshsat.cp.instantiate"


def test_python_dash_m_meshsat_is_the_command(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "meshsat", "validate", "--set", "tp_size=8", "--set", "dp_size=3"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    # A plain DP of 3 engines of TP 8 is legal: exit 0, and the report names the 24 GPUs.
    assert done.returncode == 0, done.stderr
    assert "24 GPU(s)" in done.stdout


def test_the_package_folders_are_links_to_the_top_level_folders() -> None:
    for name in ("solver", "cp"):
        link = ROOT / "meshsat" / name
        assert link.is_symlink() and link.resolve() == (ROOT / name).resolve()
