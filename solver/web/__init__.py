"""`meshsat serve`: a local web page over the CLI's answers (plan, check a command, groups,
compare releases) and the JSON API under it. See docs/web.md.

Nothing here is imported by `validate`, `check` or any other command but `serve`
(`tests/test_web_api.py` checks it in a subprocess).
"""

from __future__ import annotations

from meshsat.solver.web.server import make_server, serve

__all__ = ["make_server", "serve"]
