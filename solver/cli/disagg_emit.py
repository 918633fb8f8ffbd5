"""`meshsat plan --disagg --emit lws`: one disaggregated deployment as Kubernetes objects.

Why its own module: the aggregated `--emit lws` writes one server (emit_options.py); a PD
deployment is two roles and a router, and the router must name every server of each role
by an address known before anything runs. A LeaderWorkerSet gives that: its leader pods
are `<lws>-<group>` and it creates a headless Service `<lws>` (the default
`subdomainPolicy: Shared`), so group g's leader is `<lws>-<g>.<lws>` in the namespace
(docs/k8s.md). So the router gets static URLs and needs no service discovery, and
`meshsat validate` can check them like a script's (tests/test_disagg_emit.py).
"""

from __future__ import annotations

from meshsat.solver.cli.emit_options import router_for, server_launch
from meshsat.solver.cli.plan_disagg import DisaggRow
from meshsat.solver.inputs.command import pd_router_command
from meshsat.solver.inputs.k8s import leader_urls


def disagg_manifest(
    row: DisaggRow,
    gpus_per_node: int,
    *,
    model_path: str | None,
    name: str,
    image: str,
) -> str:
    """One multi-document YAML: a LeaderWorkerSet per role (`<name>-prefill`,
    `<name>-decode`; `replicas` = the row's workers, times the split replicas when a
    role's plain DP spans nodes, as `node_launch` decides), and a Deployment + Service
    `<name>-router` running the row's router with one URL per leader pod."""
    docs: list[str] = []
    urls: dict[str, list[str]] = {}
    roles = (
        ("prefill", row.prefill_command, row.prefill_gpus_per_worker, row.prefill_workers),
        ("decode", row.decode_command, row.decode_gpus_per_worker, row.decode_workers),
    )
    for role, command, gpus, workers in roles:
        launch = server_launch(command, gpus, gpus_per_node, model_path=model_path)
        lws = f"{name}-{role}"
        groups = workers * launch.form.replicas
        docs.append(launch.manifest(groups=groups, name=lws, image=image))
        urls[role] = leader_urls(lws, groups, launch.port)
    router = pd_router_command(urls["prefill"], urls["decode"])
    docs.append(router_for(router, name=name, image=image))
    return "---\n".join(docs)
