"""`meshsat serve`: the local web app (meshsat.solver.web), started on demand."""

from __future__ import annotations

from typing import Annotated

import typer

from meshsat.solver.errors import InputError

HostOpt = Annotated[
    str,
    typer.Option(
        "--host",
        help="Address to listen on. The default answers this machine only; another address "
        "(0.0.0.0) lets anyone who can reach it use the page and the API.",
    ),
]
PortOpt = Annotated[
    int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0: any free one).")
]


def serve_cmd(host: HostOpt = "127.0.0.1", port: PortOpt = 8000) -> None:
    """Serve the planner's web page and its JSON API until Ctrl-C.

    Plan (ranked legal layouts and a chart), Check a command (violations, nearest fix,
    the command rewritten), Groups (the rank grid by group, across nodes) and Compare
    releases; /api/plan, /api/validate, /api/fix, /api/rewrite, /api/groups and /api/diff
    answer with the CLI's --format json documents (docs/web.md).

    Example: meshsat serve --port 8000, then open http://127.0.0.1:8000/
    """
    from meshsat.solver.web import serve

    try:
        serve(host, port)
    except OSError as exc:
        raise InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
