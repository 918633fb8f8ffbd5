"""`fix_deployment`: each server's nearest valid layout (`fix`), then the pair rules
repaired on the decode side, which follows its prefill (in SGLang the decode reads the
prefill's parallel info at the bootstrap and adapts to it, so the prefill is the fixed point).

Two kinds of repair, both read from the pair rule table (`PairRule.follow`,
`PairRule.layout_fix`):
- facts beyond the layout (model, transfer backend, page size, KV dtype): the decode takes
  the prefill's value (a flag edit);
- the decode's layout: its attention TP becomes the prefill's (keeping its GPU count where
  the TP size allows, through DP attention), its PP the prefill's, its DCP 1; those values
  are pinned and `fix` finds the nearest valid layout that keeps them.

The bootstrap port (PD-BOOTSTRAP-PORT) is repaired where the rule says it is read: a port
the router writes after a prefill URL becomes the port that prefill listens on; without
one, each decode server takes the prefill's `--disaggregation-bootstrap-port` (SGLang's
scheduler fills the decode's own into a request that has none), or, where the prefill
servers listen on different ports so that no one port serves them all, the router gets
each prefill's port after its URL (`_bootstrap_repairs`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from meshsat.solver.catalogue.pd_pairs import PAIR_RULES, Side
from meshsat.solver.deployment import hosts
from meshsat.solver.deployment.apart import Relisted, moved_apart, with_list
from meshsat.solver.deployment.model import Deployment, Router, Server, Target
from meshsat.solver.deployment.pods import LaunchFit, fit_launch
from meshsat.solver.deployment.reader import FACT_FLAGS, reaches
from meshsat.solver.deployment.rules import side_of
from meshsat.solver.deployment.validate import (
    DeploymentReport,
    judge,
    load_server,
    read,
    server_report,
)
from meshsat.solver.inputs.sglang_cmdline import ONE_LAYOUT_RULE
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import Pack, get_pack
from meshsat.solver.repair.fix import fix
from meshsat.solver.repair.objective import TIERS, objective_of
from meshsat.solver.repair.results import Change, FixReport, FixResult
from meshsat.solver.validation.validate import validate


@dataclass(frozen=True)
class ServerFix:
    """One server's repair: its own `fix`, the layout values the pair rules forced first
    (pinned in that fix), and the flags it takes (its prefill's bootstrap port, or a free
    one where it shares its machine's)."""

    server: str
    report: FixReport
    forced: tuple[Change, ...] = ()
    flags: tuple[tuple[str, str], ...] = ()
    #: The visible-devices list it moves to (also among the best fix's changes, as
    #: `VARIABLE: old -> new`), which `--rewrite` edits where the value is written.
    relisted: Relisted | None = None
    #: What the fix could not repair, and why (a server no free GPUs of its machine hold).
    notes: tuple[str, ...] = ()
    #: The lines of its nodes that disagreed with its first node's layout (JOB-ONE-LAYOUT)
    #: and take the fixed layout: `--rewrite` writes it into every node.
    every_node: tuple[int, ...] = ()

    @property
    def ok(self) -> bool:
        return bool(self.report.fixes)

    def to_dict(self) -> dict[str, Any]:
        moved = self.relisted
        return {
            "server": self.server,
            "forced": [{"field": c.field, "old": c.old, "new": c.new} for c in self.forced],
            "flags": [{"flag": f, "value": v} for f, v in self.flags],
            "visible_devices": None
            if moved is None
            else {"variable": moved.variable, "old": list(moved.old), "new": list(moved.new)},
            "notes": list(self.notes),
            "every_node": list(self.every_node),
            **self.report.to_dict(),
        }


@dataclass(frozen=True)
class PortFix:
    """A prefill URL's bootstrap port written in the router (PD-BOOTSTRAP-PORT): the URL,
    the port it had after it (None: none) and the prefill's own."""

    url: str
    old: int | None
    new: int


@dataclass(frozen=True)
class RouterFix:
    """A router's repair: URLs moved to the list of the role their server plays
    (ROUTER-ROLE), `--pd-disaggregation` added (ROUTER-PD-MODE), and prefill URLs given
    the bootstrap port their server listens on (PD-BOOTSTRAP-PORT)."""

    line: int
    moves: tuple[tuple[str, str], ...] = ()
    add_pd: bool = False
    ports: tuple[PortFix, ...] = ()

    @property
    def changed(self) -> bool:
        return bool(self.moves or self.add_pd or self.ports)

    def said(self) -> list[str]:
        """Each repair as one line (`fix`'s output, `--rewrite`'s notes)."""
        head = f"router@{self.line}"
        lines = [f"{head}: {url} -> --{kind}" for url, kind in self.moves]
        lines += [f"{head}: --pd-disaggregation"] if self.add_pd else []
        lines += [
            f"{head}: {p.url} bootstrap port {'none' if p.old is None else p.old} -> {p.new}"
            for p in self.ports
        ]
        return lines

    def to_dict(self) -> dict[str, Any]:
        return {
            "line": self.line,
            "moves": [{"url": url, "to": kind} for url, kind in self.moves],
            "add_pd_disaggregation": self.add_pd,
            "bootstrap_ports": [{"url": p.url, "old": p.old, "new": p.new} for p in self.ports],
        }


@dataclass(frozen=True)
class DeploymentFix:
    """Every server's fix, the routers', and the verdict on the fixed deployment (`after`)."""

    servers: tuple[ServerFix, ...]
    after: DeploymentReport | None
    fixed: Deployment | None
    routers: tuple[RouterFix, ...] = ()

    @property
    def ok(self) -> bool:
        return self.after is not None and self.after.valid

    def to_dict(self) -> dict[str, Any]:
        return {
            "deployment": {
                "fixed": self.ok,
                "after": None if self.after is None else self.after.to_dict()["deployment"],
            },
            "roles": [s.to_dict() for s in self.servers],
            "routers": [r.to_dict() for r in self.routers],
        }


def fix_deployment(
    script: str | Deployment,
    *,
    sglang_version: str | Pack | None = None,
    model: ModelSpec | None = None,
    pins: tuple[str, ...] = (),
    objective: str = "changes",
    timeout_s: float = 10.0,
) -> DeploymentFix:
    """The nearest valid deployment: every server's own nearest valid layout (`fix`, with
    `pins`, `objective` and `timeout_s` for each), then the decode servers repaired under
    the pair rules of the release. `script`: a launch script or a `Deployment` read."""
    pack = get_pack(sglang_version)
    if isinstance(script, Deployment):
        deployment = script
    else:
        deployment = read(script, load_server(model, pack.version))
    fixes: dict[str, ServerFix] = {}
    fixed: dict[str, Server] = {}
    for server in deployment.servers:
        found, fit = _fix(server, pack, pins, objective, timeout_s)
        if not found.fixes and fit.pods is not None:
            # No layout on the object's pods: fixed on the launch's own nodes, whose
            # JOB-GROUP-SIZE then stays, its hint naming the object's field to change.
            found, _ = _fix(server, pack, pins, objective, timeout_s, on_pods=False)
        fixes[server.name] = ServerFix(server.name, found)
        if not found.fixes:
            return DeploymentFix(tuple(fixes.values()), None, None)
        fixed[server.name], fixes[server.name] = _one_layout(
            _with_config(server, found.best.config), fixes[server.name]
        )
    prefill = [fixed[s.name] for s in deployment.of_role("prefill")]
    if prefill:
        _prefill_takes_forced_page(deployment, fixed, fixes, pack, pins, objective, timeout_s)
        prefill = [fixed[s.name] for s in deployment.of_role("prefill")]
        reference = prefill[0]
        p_side = side_of(reference, server_report(reference, pack))
        for server in deployment.of_role("decode"):
            start = fixed[server.name]
            repaired, fix_of = _follow(start, p_side, pack, pins, objective, timeout_s)
            pods = server.commands[0].group_size
            if start.layout.config.nnodes == pods != repaired.layout.config.nnodes:
                # Following its prefill moved the decode off the pods it was fitted to: on
                # neither count its launch is no better, so it keeps its own nodes instead.
                own, _ = _fix(server, pack, pins, objective, timeout_s, on_pods=False)
                if own.fixes:
                    fixes[server.name] = ServerFix(server.name, own)
                    start = _with_config(server, own.best.config)
                    repaired, fix_of = _follow(start, p_side, pack, pins, objective, timeout_s)
            fixed[server.name] = repaired
            if fix_of is not None:
                fixes[server.name] = _after(fixes[server.name], fix_of)
    servers = tuple(fixed[s.name] for s in deployment.servers)
    was = {s.name: s.layout.config.base_gpu_id for s in deployment.servers}
    apart = moved_apart(servers, deployment.text, pack)
    for name, base in apart.bases.items():
        fixed[name], fixes[name] = _moved(fixed[name], fixes[name], base, was[name])
    for name, relisted in apart.lists.items():
        fixed[name], fixes[name] = _relisted(fixed[name], fixes[name], relisted)
    for name, why in apart.short.items():
        note = f"HOST-GPU-OVERLAP not repaired: {why}"
        fixes[name] = replace(fixes[name], notes=(*fixes[name].notes, note))
    routed = [_fix_router(r, deployment) for r in deployment.routers]
    after_deployment = replace(
        deployment,
        servers=tuple(fixed[s.name] for s in deployment.servers),
        routers=tuple(router for router, _ in routed),
    )
    _give_bootstrap_ports(_bootstrap_clash_repairs(after_deployment), fixed, fixes)
    after_deployment = replace(
        after_deployment, servers=tuple(fixed[s.name] for s in deployment.servers)
    )
    ports = _bootstrap_repairs(after_deployment)
    _give_bootstrap_ports(ports.decodes, fixed, fixes)
    routers = [_with_ports(r, f, ports.routers.get(r.line, {})) for r, f in routed]
    after_deployment = replace(
        after_deployment,
        servers=tuple(fixed[s.name] for s in deployment.servers),
        routers=tuple(router for router, _ in routers),
    )
    after = judge(after_deployment, pack)
    repairs = tuple(f for _, f in routers if f.changed)
    return DeploymentFix(tuple(fixes.values()), after, after_deployment, repairs)


@dataclass(frozen=True)
class BootstrapRepairs:
    """PD-BOOTSTRAP-PORT's repair: the port each decode server takes (by name), and each
    router's prefill URLs (by line, then index in its `--prefill` list) given a port."""

    decodes: dict[str, int]
    routers: dict[int, dict[int, int]]


def _bootstrap_clash_repairs(deployment: Deployment) -> dict[str, int]:
    """HOST-PORT-CLASH's repair where it is one edit: of two prefill servers that one
    machine runs on one bootstrap port (`hosts.known_together`), the later takes the next
    port no server of the script binds; PD-BOOTSTRAP-PORT's repair then points the
    router's URL for it there. Two servers on one HTTP `--port` are left to the hint: the
    router's URLs cannot say which of them each one meant."""
    taken = {
        port
        for s in deployment.servers
        for port in (s.endpoint.port, s.facts.bootstrap_port)
        if port is not None
    } | {r.listens.port for r in deployment.routers if r.listens and r.listens.port is not None}
    ports = {s.name: s.facts.bootstrap_port for s in deployment.servers}
    prefill = deployment.of_role("prefill")
    moved: dict[str, int] = {}
    for i, a in enumerate(prefill):
        for b in prefill[i + 1 :]:
            port = ports[b.name]
            if b.name in moved or port is None or ports[a.name] != port:
                continue
            if not hosts.same_address(a.endpoint.host, b.endpoint.host):
                continue
            if not hosts.known_together(a, b, deployment.text, deployment.routers):
                continue
            free = port + 1
            while free in taken:
                free += 1
            taken.add(free)
            moved[b.name] = ports[b.name] = free
    return moved


def _listening(router: Router, target: Target, deployment: Deployment) -> list[Server]:
    """The prefill servers a router's URL may name whose bootstrap port is known here."""
    return [
        s
        for s in deployment.of_role("prefill")
        if reaches(target.endpoint, s.endpoint) and s.facts.bootstrap_port is not None
    ]


def _bootstrap_repairs(deployment: Deployment) -> BootstrapRepairs:
    """What PD-BOOTSTRAP-PORT's check (`rules._bootstrap_ports`) finds, repaired where it
    reads the port: a port the router writes after a URL becomes the one that prefill
    listens on; a URL without one is reached at each decode's own port, so each decode
    that misses takes the port every such prefill listens on, and where they listen on
    different ports (no one port serves them all) the URL gets its prefill's port instead.
    mini_lb's `--prefill-bootstrap-ports` list is left to its hint."""
    routers: dict[int, dict[int, int]] = {}
    bare: list[tuple[Router, int, set[int], int]] = []
    for router in deployment.routers:
        for i, target in enumerate(router.prefill):
            named = _listening(router, target, deployment)
            if not named:
                continue
            listens = {int(s.facts.bootstrap_port or 0) for s in named}
            port = int(named[0].facts.bootstrap_port or 0)
            if target.bootstrap_port is not None:
                if target.bootstrap_port not in listens:
                    routers.setdefault(router.line, {})[i] = port
            elif not router.bootstrap_ports:
                bare.append((router, i, listens, port))
    decodes: dict[str, int] = {}
    ports = [d.facts.bootstrap_port for d in deployment.of_role("decode")]
    wrong = [
        (router, i, port)
        for router, i, listens, port in bare
        if any(p is not None and p not in listens for p in ports)
    ]
    common = set.intersection(*(listens for _, _, listens, _ in bare)) if bare else set()
    if wrong and common:
        first = bare[0][3]
        port = first if first in common else min(common)
        for decode in deployment.of_role("decode"):
            own = decode.facts.bootstrap_port
            if own is not None and own not in common:
                decodes[decode.name] = port
    else:
        for router, i, port in wrong:
            routers.setdefault(router.line, {})[i] = port
    return BootstrapRepairs(decodes, routers)


def _give_bootstrap_ports(
    ports: dict[str, int], fixed: dict[str, Server], fixes: dict[str, ServerFix]
) -> None:
    """Each named server (in `fixed`, its fix in `fixes`) with its new bootstrap port: the
    fact the rules read and the flag `--rewrite` writes."""
    for name, port in ports.items():
        server = fixed[name]
        fixed[name] = replace(server, facts=replace(server.facts, bootstrap_port=port))
        flag = (FACT_FLAGS["bootstrap_port"], str(port))
        fixes[name] = replace(fixes[name], flags=(*fixes[name].flags, flag))


def _with_ports(
    router: Router, repair: RouterFix, ports: dict[int, int]
) -> tuple[Router, RouterFix]:
    """The router with each prefill URL of `ports` (its index -> port) given that port."""
    if not ports:
        return router, repair
    targets = list(router.prefill)
    said: list[PortFix] = []
    for i, port in sorted(ports.items()):
        said.append(PortFix(targets[i].url, targets[i].bootstrap_port, port))
        targets[i] = replace(targets[i], bootstrap_port=port)
    return replace(router, prefill=tuple(targets)), replace(repair, ports=tuple(said))


def _fix_router(router: Router, deployment: Deployment) -> tuple[Router, RouterFix]:
    """The router with each URL under the role its server plays, in PD mode."""
    lists: dict[str, list[Target]] = {"prefill": [], "decode": []}
    moves: list[tuple[str, str]] = []
    for kind, targets in (("prefill", router.prefill), ("decode", router.decode)):
        other = "decode" if kind == "prefill" else "prefill"
        for target in targets:
            roles = {s.role for s in deployment.servers if reaches(target.endpoint, s.endpoint)}
            if kind not in roles and other in roles:
                moves.append((target.url, other))
                lists[other].append(replace(target, bootstrap_port=None))
            else:
                lists[kind].append(target)
    add_pd = not router.pd and bool(router.prefill or router.decode)
    fixed = replace(
        router,
        pd=router.pd or add_pd,
        prefill=tuple(lists["prefill"]),
        decode=tuple(lists["decode"]),
    )
    return fixed, RouterFix(router.line, tuple(moves), add_pd)


def _fix(
    server: Server,
    pack: Pack,
    pins: tuple[str, ...],
    objective: str,
    timeout_s: float,
    *,
    on_pods: bool = True,
) -> tuple[FixReport, LaunchFit]:
    """The server's own fix, from its launch fitted as `meshsat fix` fits one server's
    (`pods.fit_launch`: the pods its manifest object starts unless `on_pods` is off, then
    its visible-devices list), and that fitting."""
    layout = server.layout
    pods = server.commands[0].group_size if on_pods else None
    fit = fit_launch(layout.config, layout.job, pods, server.commands, layout.model, pack)
    report = fix(
        fit.config,
        layout.model,
        pins=(*pins, *fit.pins),
        gpus=fit.gpus,
        objective=objective,
        timeout_s=timeout_s,
        sglang_version=pack,
        unknown=layout.unknown,
    ).also_repairing(fit.rules)
    if fit.pods is None:
        return report, fit
    nodes = Change("nnodes", layout.config.nnodes, fit.pods)
    return _with_change(report, nodes, valid_input=False), fit


def _one_layout(server: Server, found: ServerFix) -> tuple[Server, ServerFix]:
    """The server with every node on its fixed layout: nodes that disagreed with the first
    (JOB-ONE-LAYOUT) take it, as `--rewrite` writes it into each node's launch; the fix
    names the lines and the rule among what it repairs. Other JOB-* issues (node ranks,
    rendezvous addresses) are no layout's and stay."""
    lines = tuple(i.line for i in server.layout.job if i.rule == ONE_LAYOUT_RULE)
    if not lines:
        return server, found
    job = tuple(i for i in server.layout.job if i.rule != ONE_LAYOUT_RULE)
    report = replace(found.report.also_repairing((ONE_LAYOUT_RULE,)), valid_input=False)
    return (
        replace(server, layout=replace(server.layout, job=job)),
        replace(found, report=report, every_node=lines),
    )


def _with_change(report: FixReport, change: Change, **update: Any) -> FixReport:
    """The report with each fix also making `change` (one the search did not see: made to
    its input, or after it); `update`: other fields of the report."""
    fixes = tuple(
        replace(f, changes=(*(c for c in f.changes if c.field != change.field), change))
        for f in report.fixes
    )
    return replace(report, fixes=fixes, **update)


def _with_config(server: Server, config: Any) -> Server:
    return replace(server, layout=replace(server.layout, config=config))


def _moved(server: Server, found: ServerFix, base: int, was: int) -> tuple[Server, ServerFix]:
    """The server at `--base-gpu-id base` (`apart.moved_apart`), its fix saying so: one
    change from the input's base id `was`, and HOST-GPU-OVERLAP among what it repairs."""
    config = server.layout.config.model_copy(update={"base_gpu_id": base})
    best = found.report.best
    changes = (
        *(c for c in best.changes if c.field != "base_gpu_id"),
        Change("base_gpu_id", was, base),
    )
    best = replace(
        best, config=config, changes=changes, repairs=(*best.repairs, "HOST-GPU-OVERLAP")
    )
    report = replace(found.report, fixes=(best, *found.report.fixes[1:]), valid_input=False)
    return _with_config(server, config), replace(found, report=report)


def _relisted(server: Server, found: ServerFix, relisted: Relisted) -> tuple[Server, ServerFix]:
    """The server on its new visible-devices list (`apart.moved_apart`), its fix saying
    so: the list's change among its changes, and HOST-GPU-OVERLAP among what it repairs."""
    change = Change(
        relisted.variable, ",".join(map(str, relisted.old)), ",".join(map(str, relisted.new))
    )
    report = _with_change(
        found.report.also_repairing(("HOST-GPU-OVERLAP",)), change, valid_input=False
    )
    moved = with_list(server, relisted.variable, relisted.new)
    return moved, replace(found, report=report, relisted=relisted)


def _resolved_page(server: Server, page: int, pack: Pack) -> int | None:
    """The page `server` runs given `--page-size page` (R-PAGE-SIZE: its attention back-end
    or model may force its own)."""
    config = server.layout.config.model_copy(update={"page_size": page})
    report = validate(config, server.layout.model, explain=False, sglang_version=pack)
    value = report.resolved.get("page_size")
    return None if value is None else int(value)


def _forced_page(decode: Server, p: Side, pack: Pack) -> int | None:
    """The page a decode runs whatever it is told, where that is not the prefill's page: its
    back-end forces it (flashmla 64), so following the prefill's `--page-size` would leave
    PD-PAGE-SIZE broken (the decode still runs its own). None: the decode can follow."""
    if p.page_size is None or decode.facts.page_size is None:
        return None
    page = _resolved_page(decode, p.page_size, pack)
    return None if page is None or page == p.page_size else page


def _prefill_takes_forced_page(
    deployment: Deployment,
    fixed: dict[str, Server],
    fixes: dict[str, ServerFix],
    pack: Pack,
    pins: tuple[str, ...],
    objective: str,
    timeout_s: float,
) -> None:
    """PD-PAGE-SIZE repaired on the prefill side where the decode cannot move: when a decode
    server's attention back-end forces a page (`_forced_page`, the first such decode's), and
    every prefill server runs that page when told it (its own back-end leaves it free), each
    prefill takes `--page-size` of it, found again by its own `fix` with the page pinned (a
    chunk that no longer divides is repaired there). The decodes then follow as usual, and
    already run the page. Otherwise (no prefill can run it, or two decodes force different
    pages) nothing changes here and the pair rule stays, its hint saying why."""
    prefills = [fixed[s.name] for s in deployment.of_role("prefill")]
    p_side = side_of(prefills[0], server_report(prefills[0], pack))
    forced = {
        page
        for s in deployment.of_role("decode")
        if (page := _forced_page(fixed[s.name], p_side, pack)) is not None
    }
    if len(forced) != 1:
        return
    (page,) = forced
    if "page_size" in pins or any(
        s.facts.page_size is None or _resolved_page(s, page, pack) != page for s in prefills
    ):
        return
    moved: dict[str, tuple[Server, ServerFix]] = {}
    for server in prefills:
        taken = _take_page(server, page, pack, pins, objective, timeout_s)
        if taken is None:
            return
        moved[server.name] = taken
    for name, (server, then) in moved.items():
        fixed[name] = server
        fixes[name] = _after(fixes[name], then)


def _take_page(
    server: Server,
    page: int,
    pack: Pack,
    pins: tuple[str, ...],
    objective: str,
    timeout_s: float,
) -> tuple[Server, ServerFix] | None:
    """`server` told `--page-size page` (a flag edit, as a decode follows its prefill) and
    fixed again with the page pinned; None where no layout keeps that page."""
    server = replace(server, facts=replace(server.facts, page_size=str(page)))
    config = server.layout.config
    values = {k: getattr(config, k) for k in config.user_set()} | {"page_size": page}
    found = fix(
        values,
        server.layout.model,
        pins=(*pins, "page_size"),
        objective=objective,
        timeout_s=timeout_s,
        sglang_version=pack,
    )
    if not found.fixes:
        return None
    server = _with_config(server, found.best.config)
    return server, ServerFix(server.name, found, (), ((FACT_FLAGS["page_size"], str(page)),))


def _follow(
    decode: Server,
    p: Side,
    pack: Pack,
    pins: tuple[str, ...],
    objective: str,
    timeout_s: float,
) -> tuple[Server, ServerFix | None]:
    """The decode server repaired under the pair rules against prefill `p`."""
    d = side_of(decode, server_report(decode, pack))
    broken = [
        r for r in PAIR_RULES if r.severity(pack.version) == "error" and r.check(p, d) is False
    ]
    follow = {name for r in broken for name in r.follow}
    if "page_size" in follow and _forced_page(decode, p, pack) is not None:
        # Its back-end runs its own page whatever it is told: writing the prefill's would
        # change nothing (`_prefill_takes_forced_page` moves the prefill where it can).
        follow.discard("page_size")
    facts = decode.facts
    flags: list[tuple[str, str]] = []
    for name in sorted(follow):
        value = getattr(p, name)
        if value is None or value == "default":
            continue
        # Facts hold flags as written (a page size too: `Side` holds it resolved).
        written: Any = str(value) if name == "page_size" else value
        facts = replace(facts, **{name: written})
        flags.append((FACT_FLAGS[name], str(value)))
    decode = replace(decode, facts=facts)
    # A followed fact that is a layout field too (--kv-cache-dtype, --page-size) follows in
    # the layout, or the layout's own fix would write the decode's old value back; the
    # layout takes the prefill's resolved value (a page size is a number there).
    fields = type(decode.layout.config).model_fields
    same = {k: getattr(p, k) for k in follow if k in fields and getattr(p, k) is not None}
    if same:
        decode = _with_config(decode, decode.layout.config.model_copy(update=same))
    if not any(r.layout_fix for r in broken):
        if not flags:
            return decode, None
        empty = fix(decode.layout.config, decode.layout.model, sglang_version=pack)
        return decode, ServerFix(decode.name, empty, (), tuple(flags))
    config = decode.layout.config
    options = _forced_options(decode, d, p, pack.version) or [()]
    # Options that move a field the user pinned come last (stable: best first otherwise).
    options.sort(key=lambda forced: any(c.field in pins for c in forced))
    for forced in options:
        values = {k: getattr(config, k) for k in config.user_set()}
        values.update({c.field: c.new for c in forced})
        found = fix(
            values,
            decode.layout.model,
            pins=(*pins, *(c.field for c in forced)),
            objective=objective,
            timeout_s=timeout_s,
            sglang_version=pack,
        )
        if found.fixes:
            break  # else the next option (--tp 16 may split no model's heads)
    result = ServerFix(decode.name, found, forced, tuple(flags))
    if found.fixes:
        decode = _with_config(decode, found.best.config)
    return decode, result


def _after(first: ServerFix, then: ServerFix) -> ServerFix:
    """A decode's repair under the pair rules (`then`, found on the layout its own fix
    made) told against the user's layout: its changes composed with those of the server's
    own fix (`first`), and the input's verdict `first`'s. Replaced, the server's own fix
    (`--tp 3` -> plain DP 3 for a model of 32 heads) was printed as "no layout change"."""
    if not first.report.fixes or not then.report.fixes:
        return then
    composed = {c.field: c for c in first.report.best.changes}
    for c in (*then.forced, *then.report.best.changes):
        before = composed.get(c.field)
        composed[c.field] = Change(c.field, c.old if before is None else before.old, c.new)
    kept = [c for c in composed.values() if c.old != c.new]
    pinned = {c.field for c in then.forced}
    best = replace(then.report.best, changes=tuple(c for c in kept if c.field not in pinned))
    best = _told_from(first.report, best)
    report = replace(
        then.report,
        fixes=(best, *then.report.fixes[1:]),
        valid_input=first.report.valid_input and then.report.valid_input,
        violations=first.report.violations or then.report.violations,
        gpus_before=first.report.gpus_before,
    )
    forced = tuple(c for c in kept if c.field in pinned)
    return replace(then, report=report, forced=forced, every_node=first.every_node)


def _told_from(user: FixReport, best: FixResult) -> FixResult:
    """`best`'s objective and tiers from the user's layout (`user.config`, on
    `user.gpus_before` GPUs), not from the layout the pair rules pinned it to: the search
    saw the forced values as its input, so `--pp-size 2 -> 1` halving the GPUs read as
    "GPU count kept". A tier that costs more than the search's is not proven minimal (the
    pair rules chose its values, not the search)."""
    gpus = user.gpus if user.gpus is not None else user.gpus_before
    ran = best.resolved or None  # empty where the fix was not the search's
    told = objective_of(user.config, best.config, gpus, best.gpus_used, resolved=ran)
    proven = {
        t: getattr(told, t) == 0
        or (best.proven.get(t, True) and getattr(told, t) == getattr(best.objective, t))
        for t in (best.proven or TIERS)
    }
    return replace(best, objective=told, proven=proven)


def _forced(decode: Server, d: Side, p: Side, release: str) -> tuple[Change, ...]:
    """The first of `_forced_options`: the values a decode takes under the pair rules."""
    options = _forced_options(decode, d, p, release)
    return options[0] if options else ()


def _forced_options(decode: Server, d: Side, p: Side, release: str) -> list[tuple[Change, ...]]:
    """The layout values a decode may take so that the pair rules of `release` hold against
    prefill `p`, best first: an attention TP (the prefill's first, then 1) reached through
    DP attention when the decode's TP size is a multiple of it (its GPU count stays), else
    as its TP size; when its PP is neither the prefill's nor 1, the prefill's PP or 1 with
    its TP size grown by the stages it drops (`--tp 8 --pp-size 2` -> `--tp 16`: its GPU
    count stays), then the prefill's PP alone; DCP 1 when the prefill has attention CP or
    the pool is not MLA; the prefill's decode allocation policy. The options under which
    every layout rule holds come first (the declared checks decide, on the decode as it
    would become); `_follow` takes the first the decode's own rules then accept."""
    config = decode.layout.config
    rules = [r for r in PAIR_RULES if r.layout_fix and r.severity(release) == "error"]
    held: list[tuple[Change, ...]] = []
    broken: list[tuple[Change, ...]] = []
    for attn_tp in dict.fromkeys((p.attn_tp, 1)):
        out: list[Change] = []
        side = d
        if d.attn_tp != attn_tp:
            if d.tp % attn_tp == 0:
                dp = d.tp // attn_tp
                side = replace(d, attn_tp=attn_tp, dp=dp, dp_attention=dp > 1)
                out += [
                    Change("dp_size", config.dp_size, dp),
                    Change("enable_dp_attention", config.enable_dp_attention, dp > 1),
                ]
            else:
                side = replace(d, tp=attn_tp, attn_tp=attn_tp, dp=1, dp_attention=False)
                out += [
                    Change("tp_size", config.tp_size, attn_tp),
                    Change("dp_size", config.dp_size, 1),
                    Change("enable_dp_attention", config.enable_dp_attention, False),
                ]
        if d.dcp > 1 and (p.attn_cp > 1 or d.mla is False):
            side = replace(side, dcp=1)
            out.append(Change("dcp_size", config.dcp_size, 1))
        if d.allocation_policy != p.allocation_policy:
            side = replace(side, allocation_policy=p.allocation_policy)
            out.append(
                Change(
                    "disaggregation_decode_allocation_policy",
                    config.disaggregation_decode_allocation_policy,
                    p.allocation_policy,
                )
            )
        for pp_side, pp_changes in _pp_options(config, side, d, p):
            changes = _merged((*out, *pp_changes))
            ok = all(r.check(p, pp_side) is not False for r in rules)
            (held if ok else broken).append(changes)
    return list(dict.fromkeys((*held, *broken)))


def _pp_options(config: Any, side: Side, d: Side, p: Side) -> list[tuple[Side, list[Change]]]:
    """PD-PP's repairs of a decode whose PP is neither the prefill's nor 1, best first: a
    PP the rule accepts with the TP size grown by the stages dropped (the GPU count kept;
    attention TP grows alike), then the prefill's PP alone. Nothing to do: the side as is."""
    if d.pp in (p.pp, 1):
        return [(side, [])]
    out: list[tuple[Side, list[Change]]] = []
    for pp in dict.fromkeys((p.pp, 1)):
        if d.pp % pp == 0:
            grow = d.pp // pp
            tp = side.tp * grow
            grown = replace(side, pp=pp, tp=tp, attn_tp=side.attn_tp * grow)
            out.append(
                (
                    grown,
                    [Change("tp_size", config.tp_size, tp), Change("pp_size", config.pp_size, pp)],
                )
            )
    out.append((replace(side, pp=p.pp), [Change("pp_size", config.pp_size, p.pp)]))
    return out


def _merged(changes: tuple[Change, ...]) -> tuple[Change, ...]:
    """Changes by field, the last value of a field winning, none that keeps its value."""
    by_field: dict[str, Change] = {}
    for c in changes:
        before = by_field.get(c.field)
        by_field[c.field] = Change(c.field, c.old if before is None else before.old, c.new)
    return tuple(c for c in by_field.values() if c.old != c.new)
