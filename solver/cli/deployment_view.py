"""The text headings of a deployment's servers and of the deployment, shared by `validate`,
`fix` and `groups` on a PD deployment: one wording for a server's replicas (`prefill ×3`)
and for what the deployment counts (every replica), wherever it is printed."""

from __future__ import annotations

from collections.abc import Iterable

from rich.markup import escape

from meshsat.solver.deployment.model import Role


def server_heading(
    name: str, kind: str, lines: Iterable[int], gpus: int | None, replicas: int
) -> str:
    """`prefill@19 (prefill ×3, line(s) 19, 4 GPU(s) each, 12 in all)`: a server's entry,
    with the copies its manifest object runs (`×N`, said only when more than one); `gpus`
    None: the count reads a value the launch leaves unknown (`? GPU(s)`)."""
    where = ", ".join(str(n) for n in lines)
    count = "?" if gpus is None else str(gpus)
    if replicas == 1:
        return f"[bold]{escape(name)}[/bold] ({kind}, line(s) {where}, {count} GPU(s))"
    total = "?" if gpus is None else str(gpus * replicas)
    return (
        f"[bold]{escape(name)}[/bold] ({kind} ×{replicas}, line(s) {where}, {count} GPU(s) "
        f"each, {total} in all)"
    )


def deployment_head(servers: dict[Role, int], routers: int, gpus: int | None) -> str:
    """`deployment: 5 server(s), 1 router(s), 16 GPU(s)`: every replica counted (which
    role runs how many copies its servers' headings say); `gpus` None: not known here."""
    count = "?" if gpus is None else str(gpus)
    return f"deployment: {sum(servers.values())} server(s), {routers} router(s), {count} GPU(s)"
