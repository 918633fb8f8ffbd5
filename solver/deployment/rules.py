"""The deployment rules evaluated on a `Deployment`: the pair rules of
`meshsat.solver.catalogue.pd_pairs` on every prefill × decode pair, and the deployment and
router rules declared beside them. One function per deployment rule id; `check` runs them
all and says which pair rules could not be decided (facts unknown here)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from meshsat.solver.catalogue.pd_pairs import (
    DEFAULT_BACKEND,
    DEFAULT_BOOTSTRAP_PORT,
    DEFAULT_KV_CACHE_DTYPE,
    PAIR_RULES,
    PairRule,
    Severity,
    Side,
    deployment_rule,
)
from meshsat.solver.deployment import hosts
from meshsat.solver.deployment.model import Deployment, Endpoint, Facts, Router, Server, Target
from meshsat.solver.deployment.reader import LOOPBACK, WILDCARD_HOSTS, reaches
from meshsat.solver.inputs.launch import Word
from meshsat.solver.lang.limits import listed
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.validation.report import Report

#: What `plan --disagg` writes for both roles beyond the layout: SGLang's defaults (its
#: commands hold no flag at the release default), one model.
PLANNED = Facts(None, DEFAULT_BACKEND, DEFAULT_BOOTSTRAP_PORT, "default", DEFAULT_KV_CACHE_DTYPE)


@dataclass(frozen=True)
class Finding:
    """A deployment rule broken: which, how badly in this release, between which servers
    (their names, `prefill@3`), in SGLang's wording where it has one."""

    rule: str
    severity: Severity
    message: str
    hint: str
    source: str
    servers: tuple[str, ...] = ()
    #: Not decided here (a warning whatever the release says): what it reads may be set
    #: in a launch's flags that are not read (`LayoutInput.opaque`).
    undecided: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "hint": self.hint,
            "source": self.source,
            "servers": list(self.servers),
        }


def side_of(server: Server, report: Report) -> Side:
    """What the pair rules read of a server: its facts, and its widths as SGLang resolves
    them (the report's resolved layout and derived widths)."""
    return layout_side(
        server.role, server.facts, report.resolved, report.derived, server.layout.model,
        line=server.line,
    )  # fmt: skip


def layout_side(
    role: str,
    facts: Facts,
    resolved: Mapping[str, Any],
    derived: Mapping[str, Any],
    model: ModelSpec | None,
    *,
    line: int = 0,
) -> Side:
    """A `Side` from a resolved layout: a server read from a script, or a layout a planner
    chose for a role (`pair_errors`)."""
    mla = None if model is None else model.mla_q_head_dim is not None
    attn_tp = derived.get("attn_tp")
    page = resolved.get("page_size")
    return Side(
        role=role,
        model=facts.model,
        backend=facts.backend,
        bootstrap_port=facts.bootstrap_port,
        # The page the server resolves (its back-end may force one); unknown where the
        # flag is a shell expansion.
        page_size=None if facts.page_size is None or page is None else int(page),
        kv_cache_dtype=facts.kv_cache_dtype,
        tp=int(resolved["tp_size"]),
        dp=int(resolved.get("dp_size") or 1),
        dp_attention=bool(resolved.get("enable_dp_attention")),
        attn_tp=max(1, int(attn_tp)) if isinstance(attn_tp, int) else int(resolved["tp_size"]),
        attn_cp=int(resolved.get("attn_cp_size") or 1),
        pp=int(resolved.get("pp_size") or 1),
        dcp=int(resolved.get("dcp_size") or 1),
        mla=mla,
        line=line,
        allocation_policy=str(resolved.get("disaggregation_decode_allocation_policy") or "early"),
    )


def pair_verdicts(
    p: Side, d: Side, release: str
) -> Iterator[tuple[PairRule, Severity, bool | None]]:
    """Each pair rule of `release` with its severity there and whether it holds between
    prefill `p` and decode `d` (None: not decidable from what is known)."""
    for rule in PAIR_RULES:
        severity = rule.severity(release)
        if severity is not None:
            yield rule, severity, rule.check(p, d)


def pair_errors(
    prefill: Mapping[str, Any],
    prefill_derived: Mapping[str, Any],
    decode: Mapping[str, Any],
    decode_derived: Mapping[str, Any],
    model: ModelSpec | None,
    release: str,
    facts: Facts = PLANNED,
) -> tuple[str, ...]:
    """The pair rules a planned prefill and decode layout break as errors in `release`
    (`plan --disagg` pairs only layouts with none), as `RULE: message` lines. Both servers
    are launched as meshsat writes them: the same model and `facts`."""
    p = layout_side("prefill", facts, prefill, prefill_derived, model)
    d = layout_side("decode", facts, decode, decode_derived, model)
    return side_errors(p, d, release)


def side_errors(p: Side, d: Side, release: str) -> tuple[str, ...]:
    """`pair_errors` of two sides already built (a planner that pairs each layout with
    many asks each side once)."""
    return tuple(
        f"{rule.id}: {rule.text(p, d)}"
        for rule in _error_rules(release)
        if rule.check(p, d) is False
    )


def side_refused(p: Side, d: Side, release: str) -> bool:
    """Whether `side_errors` has any: the first broken rule answers (no wording)."""
    return any(rule.check(p, d) is False for rule in _error_rules(release))


@lru_cache(maxsize=64)
def _error_rules(release: str) -> tuple[PairRule, ...]:
    """The pair rules that are errors in `release` (`pair_verdicts`' filter, once per
    release: a planner asks them of 10^5 pairs)."""
    return tuple(rule for rule in PAIR_RULES if rule.severity(release) == "error")


def check(
    deployment: Deployment, reports: dict[str, Report], release: str
) -> tuple[list[Finding], list[str]]:
    """Every deployment rule broken in `release`, and the pair rules left undecided (as
    `RULE prefill@L/decode@L` strings)."""
    sides = {s.name: side_of(s, reports[s.name]) for s in deployment.servers}
    findings: list[Finding] = []
    undecided: list[str] = []
    for p in deployment.of_role("prefill"):
        for d in deployment.of_role("decode"):
            ps, ds = sides[p.name], sides[d.name]
            for rule, severity, holds in pair_verdicts(ps, ds, release):
                if holds is None:
                    undecided.append(f"{rule.id} {p.name}/{d.name}")
                elif not holds:
                    findings.append(
                        Finding(
                            rule.id,
                            severity,
                            rule.text(ps, ds),
                            rule.hint,
                            rule.source,
                            (p.name, d.name),
                        )
                    )
    for function in dict.fromkeys(_DEPLOYMENT_CHECKS.values()):
        findings += [_in_release(f, release) for f in function(deployment) if _applies(f, release)]
    for resolved_check in dict.fromkeys(_RESOLVED_CHECKS.values()):
        found = resolved_check(deployment, reports, release)
        findings += [_in_release(f, release) for f in found if _applies(f, release)]
    return findings, undecided


def _applies(finding: Finding, release: str) -> bool:
    return deployment_rule(finding.rule).severity(release) is not None


def _in_release(finding: Finding, release: str) -> Finding:
    """The finding with its rule's severity in `release`."""
    severity = deployment_rule(finding.rule).severity(release)
    if severity is None or finding.undecided:
        return finding
    return replace(finding, severity=severity)


def _finding(rule_id: str, servers: tuple[str, ...] = (), **fields: Any) -> Finding:
    rule = deployment_rule(rule_id)
    return Finding(rule.id, "error", rule.message.format(**fields), rule.hint, rule.source, servers)


def _both_roles(deployment: Deployment) -> Iterator[Finding]:
    """A role without the other, unless a router names servers of the missing role that
    this script does not launch: they run elsewhere (a prefill script and its router, the
    decode nodes' script apart)."""
    prefill, decode = deployment.of_role("prefill"), deployment.of_role("decode")
    if bool(prefill) == bool(decode):
        return
    missing = "decode" if prefill else "prefill"
    for router in deployment.routers:
        for target in getattr(router, missing):
            if not any(reaches(target.endpoint, s.endpoint) for s in deployment.servers):
                return
    what = "prefill servers but no decode server" if prefill else "decode servers but no prefill"
    yield _finding("PD-BOTH-ROLES", tuple(s.name for s in (*prefill, *decode)), what=what)


def _routed(router: Router, target: Target, deployment: Deployment) -> list[Server]:
    return [s for s in deployment.servers if reaches(target.endpoint, s.endpoint)]


def _router_roles(deployment: Deployment) -> Iterator[Finding]:
    for router in deployment.routers:
        sent = (("prefill", router.prefill), ("decode", router.decode))
        for kind, targets in (*sent, ("aggregated", router.workers)):
            for target in targets:
                found = _routed(router, target, deployment)
                if not found:
                    yield _finding("ROUTER-UNKNOWN-URL", (), line=router.line, url=target.url)
                elif all(s.role != kind for s in found):
                    server = found[0]
                    finding = _finding(
                        "ROUTER-ROLE",
                        (server.name,),
                        line=router.line,
                        kind=kind,
                        url=target.url,
                        role=server.role,
                        server=server.line,
                    )
                    hidden = [s for s in found if s.layout.opaque]
                    if hidden:  # `--disaggregation-mode` may be in flags not read
                        finding = _not_decided(finding, hidden[0])
                    yield finding


def _not_decided(finding: Finding, server: Server) -> Finding:
    """`finding` as a warning that it was not checked: `server`'s role may be set in its
    launch's expansion whose flags are not read."""
    message = (
        f"not checked: the server on line {server.line} passes "
        f"{', '.join(server.layout.opaque)}, whose flags are not read here and may set its "
        f"role; as read, {finding.message}"
    )
    return replace(finding, severity="warning", message=message, undecided=True)


def _router_replicas(deployment: Deployment) -> Iterator[Finding]:
    """Each LeaderWorkerSet server against each router that names any of its leaders by
    name (`<lws>-<g>.<lws>`, any namespace suffix): the groups named must be those its
    replicas run. Silent where no URL names a leader (a Service, an IP, another object's
    pods): what those reach is not known here."""
    for router in deployment.routers:
        targets = (*router.prefill, *router.decode, *router.workers)
        for server in deployment.servers:
            kind, _, name = server.commands[0].owner.partition("/")
            if kind != "LeaderWorkerSet":
                continue
            leader = re.compile(rf"{re.escape(name)}-(\d+)\.{re.escape(name)}(\..*)?")
            named = sorted(
                {
                    int(m.group(1))
                    for t in targets
                    if t.endpoint.host and (m := leader.fullmatch(t.endpoint.host))
                }
            )
            groups = set(range(server.replicas))
            if not named or set(named) == groups:
                continue
            missing = sorted(groups - set(named))
            extra = [g for g in named if g not in groups]
            why = "; ".join(
                part
                for part in (
                    missing and f"group(s) {_listed(missing)} get no work",
                    extra and f"group(s) {_listed(extra)} do not exist",
                )
                if part
            )
            yield _finding(
                "ROUTER-REPLICA-URLS",
                (server.name,),
                line=router.line,
                named=_listed(named),
                replicas=server.replicas,
                owner=server.commands[0].owner,
                why=why,
            )


def _listed(groups: list[int]) -> str:
    return ", ".join(map(str, groups))


def _router_mode(deployment: Deployment) -> Iterator[Finding]:
    for router in deployment.routers:
        if not router.pd and (router.prefill or router.decode):
            yield _finding("ROUTER-PD-MODE", (), line=router.line)


def _router_ports(deployment: Deployment) -> Iterator[Finding]:
    for router in deployment.routers:
        ports = router.bootstrap_ports
        if ports is not None and len(ports) not in (1, len(router.prefill)):
            yield _finding("ROUTER-BOOTSTRAP-PORTS", ())


def _bootstrap_ports(deployment: Deployment) -> Iterator[Finding]:
    """The port each prefill is reached at: the router's (after the URL, or mini_lb's
    list), else each decode server's own --disaggregation-bootstrap-port. A URL whose host
    is unknown here may name several prefill servers (one port on hosts not written): it
    is wrong only when none of them listens on the port it is reached at, as ROUTER-ROLE
    is wrong only when none of them plays the role."""
    for router in deployment.routers:
        ports = router.bootstrap_ports or ()
        for i, target in enumerate(router.prefill):
            given = target.bootstrap_port
            if given is None and ports:
                given = ports[0] if len(ports) == 1 else ports[i] if i < len(ports) else None
            named = [
                s
                for s in _routed(router, target, deployment)
                if s.role == "prefill" and s.facts.bootstrap_port is not None
            ]
            if given is not None:
                if all(s.facts.bootstrap_port != given for s in named):
                    for server in named:
                        yield _finding(
                            "PD-BOOTSTRAP-PORT",
                            (server.name,),
                            who=f"the router on line {router.line}",
                            line=server.line,
                            port=given,
                            listens=server.facts.bootstrap_port,
                        )
                continue
            for decode in deployment.of_role("decode"):
                port = decode.facts.bootstrap_port
                if port is None or any(s.facts.bootstrap_port == port for s in named):
                    continue
                who = (
                    f"the decode server on line {decode.line} (the router on line "
                    f"{router.line} gives no bootstrap port)"
                )
                for server in named:
                    yield _finding(
                        "PD-BOOTSTRAP-PORT",
                        (server.name, decode.name),
                        who=who,
                        line=server.line,
                        port=port,
                        listens=server.facts.bootstrap_port,
                    )


def _ports(server: Server) -> list[tuple[str, int]]:
    """The ports a server binds on its machine, each with the flag that gives it: its HTTP
    `--port`, and a prefill's bootstrap server's (`start_disagg_service`)."""
    bound = [] if server.endpoint.port is None else [("--port", server.endpoint.port)]
    port = server.facts.bootstrap_port
    if server.role == "prefill" and port is not None:
        bound.append(("--disaggregation-bootstrap-port", port))
    return bound


def _host_ports(deployment: Deployment) -> Iterator[Finding]:
    """HOST-PORT-CLASH: two servers meshsat knows run on one machine
    (`hosts.known_together`) that listen on overlapping addresses and bind one port.

    Grouped as HOST-GPU-OVERLAP is (`hosts.overlaps`): the servers that bind a port are
    indexed by it, and those alike in everything the two tests read (`_port_kind`) are
    one kind, judged once against each other kind on the port by their first servers; a
    finding names the first two and counts the rest (N servers on one port and host were
    N²/2 findings, and every pair of a script's servers was compared)."""
    text, routers = deployment.text, deployment.routers
    by_port: dict[int, dict[tuple[object, ...], list[int]]] = {}
    servers = deployment.servers
    for i, server in enumerate(servers):
        kind = _port_kind(server, text, routers)
        for what, port in _ports(server):
            by_port.setdefault(port, {}).setdefault((*kind, what), []).append(i)
    found: list[tuple[int, int, Finding]] = []
    for port, kinds in by_port.items():
        entries = list(kinds.items())
        for x, y in _same_address(entries):
            (kind_x, one), (kind_y, two) = entries[x], entries[y]
            pair = _port_pair(one, two)
            if pair is None:
                continue
            i, j = pair
            a, b = servers[i], servers[j]
            if not hosts.same_address(a.endpoint.host, b.endpoint.host):
                continue
            if not hosts.known_together(a, b, text, routers):
                continue
            what_a, what_b = kind_x[-1], kind_y[-1]
            if i > j:
                i, j, a, b, what_a, what_b = j, i, b, a, what_b, what_a
            involved = _paired(one, two)
            finding = _finding(
                "HOST-PORT-CLASH",
                tuple(servers[k].name for k in involved),
                a=a.role,
                line_a=a.line,
                what_a=what_a,
                b=b.role,
                line_b=b.line,
                what_b=what_b,
                port=port,
            )
            others = [servers[k] for k in involved if k not in (i, j)]
            found.append((i, j, _also(finding, others)))
    yield from (f for _, _, f in sorted(found, key=lambda f: f[:2]))


def _port_clashes(deployment: Deployment) -> Iterator[Finding]:
    """HOST-PORT-CLASH between servers (`_host_ports`), then between a router and a
    server of its machine (`_router_ports_taken`)."""
    yield from _host_ports(deployment)
    yield from _router_ports_taken(deployment)


def _router_ports_taken(deployment: Deployment) -> Iterator[Finding]:
    """A router that listens (its `--port`, or its program's default: sglang_router's
    30000, SGLang's default `--port` too) on a port a server of its machine binds
    (`hosts.router_together`), on overlapping addresses: whichever starts second fails
    with [Errno 98], and a URL to that port may reach the router, not the server."""
    for router in deployment.routers:
        listens = router.listens
        command = router.command
        if listens is None or listens.port is None or command is None:
            continue
        written = _flag_given(command.words, "--port")
        for server in deployment.servers:
            for what, port in _ports(server):
                if port != listens.port:
                    continue
                if not hosts.same_address(listens.host, server.endpoint.host):
                    continue
                if not hosts.router_together(router, server, deployment.text):
                    continue
                finding = _finding(
                    "HOST-PORT-CLASH",
                    (server.name,),
                    a=server.role,
                    line_a=server.line,
                    what_a=what,
                    b="router",
                    line_b=router.line,
                    what_b="--port",
                    port=port,
                )
                how = "--port" if written else "no --port: its default"
                message = (
                    f"the {server.role} server on line {server.line} ({what} {port}) and the "
                    f"router on line {router.line} ({how} {port}) run on one machine and "
                    f"both bind port {port}: the second to start fails with [Errno 98] "
                    "Address already in use"
                )
                hint = (
                    "give the router a --port no server of its machine binds (or start it "
                    "on another machine: ssh/srun, or its own --host)"
                )
                yield replace(finding, message=message, hint=hint)


def _flag_given(words: tuple[Word, ...], name: str) -> bool:
    return any(w.text == name or w.text.startswith(name + "=") for w in words)


def _same_address(entries: list[tuple[tuple[object, ...], list[int]]]) -> list[tuple[int, int]]:
    """The kinds bound to one port (by index, each with itself too) whose addresses may
    take it together, for `hosts.same_address` to settle, found through an index by
    address: a wildcard meets every address, a loopback address every loopback one, any
    other the ones written alike (case-blind)."""
    by_address: dict[str, list[int]] = {}
    loopback: list[int] = []
    wildcards: list[int] = []
    for x, (kind, _) in enumerate(entries):
        endpoint = kind[1]
        assert isinstance(endpoint, Endpoint)
        host = endpoint.host
        if host is None:
            continue
        if host in WILDCARD_HOSTS:
            wildcards.append(x)
            continue
        by_address.setdefault(host.lower(), []).append(x)
        if host in LOOPBACK:
            loopback.append(x)
    named = [x for xs in by_address.values() for x in xs]
    pairs = {(x, y) for xs in (*by_address.values(), loopback) for x in xs for y in xs if x <= y}
    pairs |= {(min(w, x), max(w, x)) for w in wildcards for x in (*named, *wildcards)}
    return sorted(pairs)


def _paired(one: list[int], two: list[int]) -> list[int]:
    """The servers of two kinds (or of one, twice) that have a partner in the other: any
    server but itself."""
    return sorted(
        {i for i in one if any(j != i for j in two[:2])}
        | {j for j in two if any(i != j for i in one[:2])}
    )


def _port_kind(server: Server, text: str, routers: tuple[Router, ...]) -> tuple[object, ...]:
    """All that `hosts.same_address` and `hosts.known_together` read of one server, and
    its role (the message's): two servers alike in it are judged alike against a third."""
    return (
        server.role,
        server.endpoint,
        hosts.signature(server),
        hosts.may_share(server, text),
        hosts.by_hand(server),
        hosts.loopback_routed(server, routers),
    )


def _port_pair(one: list[int], two: list[int]) -> tuple[int, int] | None:
    """The first two servers, one of each kind (indices into the deployment's servers), that
    are not the same server; None when there are none (a kind of one, with itself)."""
    first = one[0]
    second = next((j for j in two if j != first), None)
    if second is None and one is not two:
        first = next((i for i in one if i != two[0]), -1)
        second = two[0] if first >= 0 else None
    return None if second is None else (first, second)


def _also(finding: Finding, others: list[Server]) -> Finding:
    """A grouped finding: its message (of its first two servers) says how many more servers
    of the same two kinds clash so, and their lines, the first few of them."""
    if not others:
        return finding
    lines = listed([str(s.line) for s in others], ", ")
    return replace(
        finding,
        message=f"{finding.message}; so do {len(others)} more server(s) launched alike "
        f"(line(s) {lines})",
    )


def _router_two_roles(deployment: Deployment) -> Iterator[Finding]:
    """A URL a router lists after both --prefill and --decode (by where it points, where
    that is known; else as written)."""
    for router in deployment.routers:
        decode = {_where(t) for t in router.decode}
        for target in router.prefill:
            if _where(target) in decode:
                named = tuple(s.name for s in _routed(router, target, deployment))
                yield _finding("ROUTER-TWO-ROLES", named, line=router.line, url=target.url)


def _where(target: Target) -> tuple[str, int | None]:
    host, port = target.endpoint.host, target.endpoint.port
    if host is None or port is None:
        return target.url, None
    return ("127.0.0.1" if host in LOOPBACK else host.lower()), port


#: Each deployment rule's check (one function may find two rules: ROUTER-ROLE's also finds
#: ROUTER-UNKNOWN-URL, from the same matching of URLs to servers).
_DEPLOYMENT_CHECKS: dict[str, Callable[[Deployment], Iterator[Finding]]] = {
    "PD-BOTH-ROLES": _both_roles,
    "PD-BOOTSTRAP-PORT": _bootstrap_ports,
    "ROUTER-PD-MODE": _router_mode,
    "ROUTER-ROLE": _router_roles,
    "ROUTER-BOOTSTRAP-PORTS": _router_ports,
    "ROUTER-UNKNOWN-URL": _router_roles,
    "ROUTER-REPLICA-URLS": _router_replicas,
    "ROUTER-TWO-ROLES": _router_two_roles,
    "HOST-PORT-CLASH": _port_clashes,
}


def _host_gpus(
    deployment: Deployment, reports: Mapping[str, Report], release: str
) -> Iterator[Finding]:
    """HOST-GPU-OVERLAP (HOST-GPU-UNPLACED when neither chose its GPUs) for servers on
    one machine that share a GPU, once for each two kinds of launch (`hosts.overlaps`),
    and
    HOST-GPU-COUNT when the script is one machine's and its servers need more GPUs than
    a node size the sources give (`meshsat.solver.deployment.hosts`)."""
    placed = [
        found
        for s in deployment.servers
        if hosts.may_share(s, deployment.text)
        and (found := hosts.devices(s, reports[s.name].resolved, release)) is not None
    ]
    for clash in hosts.overlaps(placed):
        a, b = clash.a, clash.b
        # Neither server chose its GPUs: they may well be on two machines the script does
        # not tell apart, so a warning; one that did places servers on one machine.
        rule = "HOST-GPU-OVERLAP" if a.chosen or b.chosen else "HOST-GPU-UNPLACED"
        finding = _finding(
            rule,
            tuple(d.server.name for d in clash.servers),
            a=a.server.role,
            line_a=a.server.line,
            how_a=a.text(),
            b=b.server.role,
            line_b=b.server.line,
            how_b=b.text(),
            shared=hosts.ranges(clash.shared),
        )
        yield _also(finding, [d.server for d in clash.servers if d is not a and d is not b])
    together = hosts.machine(placed)
    sizes = [
        d.server.layout.config.gpus_per_node
        for d in together or ()
        if "gpus_per_node" in d.server.layout.config.user_set() and d.visible is None
    ]
    if together is None or not sizes:
        return
    need = sum(len(set(d.local)) for d in together)
    if need > max(sizes):
        yield _finding(
            "HOST-GPU-COUNT",
            tuple(d.server.name for d in together),
            count=len(together),
            names=", ".join(d.server.name for d in together),
            need=need,
            gpus_per_node=max(sizes),
        )


#: The deployment rules that read the servers' resolved layouts (their reports) and the
#: release (whose launcher places ranks).
_RESOLVED_CHECKS: dict[
    str, Callable[[Deployment, Mapping[str, Report], str], Iterator[Finding]]
] = {
    "HOST-GPU-OVERLAP": _host_gpus,
    "HOST-GPU-UNPLACED": _host_gpus,
    "HOST-GPU-COUNT": _host_gpus,
}


def checked_ids() -> frozenset[str]:
    """The deployment rules that have a check (a test holds it to `DEPLOYMENT_RULES`)."""
    return frozenset((*_DEPLOYMENT_CHECKS, *_RESOLVED_CHECKS))
