"""Hypothesis profiles: CI replays the same examples on every run (a red build always
means a changed behaviour); `pytest --hypothesis-profile explore` draws new ones.

The compiled-catalogue cache (solver/backends/pycompile.py) goes to a folder of this test
run, never the user's ~/.cache.

The output width is that of a pipe whoever runs the tests: pytest-xdist's workers (`make
test` runs two) export COLUMNS=80 and LINES=24, which the CLI's tables honour and a plain
`pytest` run does not have, so the assertions on wrapped text would depend on the runner."""

import atexit
import os
import shutil
import tempfile

from hypothesis import settings

if "MESHSAT_CACHE_DIR" not in os.environ:
    _CACHE = tempfile.mkdtemp(prefix="meshsat-test-cache-")
    os.environ["MESHSAT_CACHE_DIR"] = _CACHE
    atexit.register(shutil.rmtree, _CACHE, ignore_errors=True)

for _var in ("COLUMNS", "LINES"):
    os.environ.pop(_var, None)

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=500, print_blob=True)
settings.load_profile("ci")
