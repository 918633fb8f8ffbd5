"""Many servers in one script: the checks across servers are grouped, not pairwise.

Why: HOST-GPU-* and HOST-PORT-CLASH were one finding per pair of servers (31,125 for 250
copies of one launch on 250 ports; 29 s to print, 44 s and 2 GB for 1,000), and `fix`
compared every server with every earlier one. The oracle is the pairwise definition itself
(`hosts.one_machine`, GPUs read by `hosts.devices`), on small random scripts: the grouped
findings name exactly the servers of the clashing pairs, and every clashing pair together.
"""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.deployment import hosts
from meshsat.solver.deployment.validate import judge, load_server, read, server_report
from meshsat.solver.packs import get_pack

RELEASE = "0.5.23"
L = "python -m sglang.launch_server --model-path m"


def _script(lines: list[tuple[str | None, int, str | None, int]]) -> str:
    out = []
    for visible, port, host, tp in lines:
        env = "" if visible is None else f"CUDA_VISIBLE_DEVICES={visible} "
        where = "" if host is None else f" --host {host}"
        out.append(f"{env}{L} --tp {tp} --port {port}{where} &\n")
    return "".join(out)


LINE = st.tuples(
    st.sampled_from([None, "0,1", "2,3", "1,2"]),
    st.sampled_from([30000, 30001, 30002, 30003]),
    st.sampled_from([None, "10.0.0.1", "10.0.0.2"]),
    st.sampled_from([1, 2]),
)


@settings(max_examples=30, deadline=None)
@given(st.lists(LINE, min_size=2, max_size=7))
def test_grouped_gpu_findings_name_exactly_the_clashing_pairs(
    lines: list[tuple[str | None, int, str | None, int]],
) -> None:
    pack = get_pack(RELEASE)
    text = _script(lines)
    deployment = read(text, load_server(None, RELEASE))
    placed = [
        d
        for s in deployment.servers
        if hosts.may_share(s, text)
        and (d := hosts.devices(s, server_report(s, pack).resolved, RELEASE)) is not None
    ]
    pairs = {
        (a.server.name, b.server.name)
        for n, a in enumerate(placed)
        for b in placed[n + 1 :]
        if hosts.one_machine(a.server, b.server) and a.physical & b.physical
    }
    servers = deployment.servers
    bound = {
        (a.name, b.name)
        for n, a in enumerate(servers)
        for b in servers[n + 1 :]
        if a.endpoint.port == b.endpoint.port
        and hosts.same_address(a.endpoint.host, b.endpoint.host)
        and hosts.known_together(a, b, text, ())
    }
    findings = judge(deployment, pack).findings
    for rules, expected in (({"HOST-GPU-OVERLAP", "HOST-GPU-UNPLACED"}, pairs),
                            ({"HOST-PORT-CLASH"}, bound)):  # fmt: skip
        found = [f for f in findings if f.rule in rules]
        assert {n for f in found for n in f.servers} == {n for pair in expected for n in pair}
        for pair in expected:
            assert any(set(pair) <= set(f.servers) for f in found), pair
        for f in found:  # the two servers a finding's message names clash
            a, b = re.findall(r"server on line (\d+)", f.message)[:2]
            assert (f"aggregated@{a}", f"aggregated@{b}") in expected


def test_two_thousand_copies_are_one_finding_each_rule_in_seconds() -> None:
    text = "".join(f"{L} --tp 8 --port {30000 + i}\n" for i in range(2000))
    text += "".join(f"{L} --tp 1 --port 40000 --host 10.0.0.9\n" for _ in range(500))
    started = time.perf_counter()
    deployment = read(text, load_server(None, RELEASE))
    findings = judge(deployment, get_pack(RELEASE)).findings
    assert time.perf_counter() - started < 30  # about 3 s; 10^6 pairs were minutes
    # The 2,000 among themselves, with the 500 (one port: never among themselves), and the
    # 500's port: three findings, not 2.3 million.
    gpus, across = [f for f in findings if f.rule == "HOST-GPU-UNPLACED"]
    (ports,) = [f for f in findings if f.rule == "HOST-PORT-CLASH"]
    assert len(gpus.servers) == 2000 and "so do 1998 more server(s)" in gpus.message
    assert "and 1990 more" in gpus.message and len(across.servers) == 2500
    assert len(ports.servers) == 500 and "so do 498 more server(s)" in ports.message
