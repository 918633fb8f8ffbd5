"""PD deployments: public recipes accepted, seeded defects rejected by rule id, the fix and
`--rewrite` round trip, and the measured disaggregated runs of AIConfigurator's sample.

Oracles: the public recipes (SGLang's docs and issue 6017, tests/fixtures/pd/) are launch
scripts people ran, so each must be accepted; a seeded defect names the rule it breaks
(the mutation is the specification); a rewritten script is read back and validated again.
"""

from __future__ import annotations

import csv
import json
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.catalogue.pd_pairs import DEPLOYMENT_RULES, PAIR_RULES, rule_ids
from meshsat.solver.cli.deployment_cmd import rewritten_deployment
from meshsat.solver.cli.launch_checks import unstartable
from meshsat.solver.deployment.fix import fix_deployment
from meshsat.solver.deployment.model import Deployment
from meshsat.solver.deployment.reader import read_deployment
from meshsat.solver.deployment.rules import checked_ids
from meshsat.solver.deployment.validate import (
    DeploymentReport,
    judge,
    load_server,
    read,
    validate_deployment,
)
from meshsat.solver.inputs.launch import read_launch_commands
from meshsat.solver.inputs.layout_input import LayoutSources
from meshsat.solver.inputs.rewrite import set_flags
from meshsat.solver.packs import get_pack, known_versions
from tests.cli_helpers import run_cli

FIXTURES = Path(__file__).parent / "fixtures" / "pd"

#: Each public recipe: the release it is judged by, its servers by role, its GPUs.
RECIPES: dict[str, tuple[str, dict[str, int], int]] = {
    "sglang-docs-llama-mooncake.sh": ("0.5.23", {"prefill": 1, "decode": 1}, 2),
    "sglang-docs-llama-nixl.sh": ("0.5.23", {"prefill": 1, "decode": 1}, 2),
    "sglang-docs-deepseek-mooncake.sh": ("0.5.23", {"prefill": 1, "decode": 1}, 32),
    "sglang-docs-deepseek-nixl.sh": ("0.5.23", {"prefill": 1, "decode": 1}, 32),
    "sglang-docs-ascend-deepseek.sh": ("0.5.23", {"prefill": 1, "decode": 1}, 32),
    "sglang-docs-0.4.6-mini-lb.sh": ("0.4.6.post5", {"prefill": 1, "decode": 1}, 2),
    "sglang-issue-6017-96xh100.sh": ("0.5.23", {"prefill": 1, "decode": 1}, 96),
    "sglang-pr-4880-qwen2.5-mini-lb.sh": ("0.4.6.post5", {"prefill": 1, "decode": 1}, 4),
    "ome-kimi-k2-128xh200.sh": ("0.5.18", {"prefill": 1, "decode": 1}, 128),
    "sglang-docs-ascend-qwen3-235b.sh": ("0.5.18", {"prefill": 1, "decode": 1}, 48),
    "sglang-docs-ascend-qwen3-coder-480b.sh": ("0.5.18", {"prefill": 1, "decode": 1}, 48),
    "ome-deepseek-rdma-pd.sh": ("0.5.18", {"prefill": 1, "decode": 1}, 32),
    "srt-slurm-qwen3-32b-6p2d.sh": ("0.5.18", {"prefill": 6, "decode": 2}, 16),
    "sglang-docs-ascend-deepseek-r1-2xa3.sh": ("0.5.18", {"prefill": 1, "decode": 1}, 32),
}
#: Public recipes that no pack accepts, each with the release it is judged by and the only
#: rules that refuse it (docs/disaggregation.md says why): a flag spelled for a release no
#: pack holds.
REFUSED: dict[str, tuple[str, tuple[str, ...]]] = {
    "sglang-docs-ascend-deepseek-r1-4xa3.sh": ("0.5.18", ("FLAG-CHOICE-LOAD-BALANCE-METHOD",)),
}
#: Recipes whose decode server is TP 32 on 2 Atlas 800I A3 nodes of 16 NPUs each: judged
#: from `--device npu` alone (an Ascend node of 16 assumed), as written; they needed
#: `--set gpus_per_node=16` when meshsat took every node for 8 GPUs.
A3_TWO_NODE_DECODE = (
    "sglang-docs-ascend-qwen3-235b.sh",
    "sglang-docs-ascend-qwen3-coder-480b.sh",
    "sglang-docs-ascend-deepseek-r1-4xa3.sh",
)


@cache
def recipe(name: str) -> str:
    return (FIXTURES / name).read_text()


def verdict(text: str, release: str) -> DeploymentReport:
    return validate_deployment(text, sglang_version=release)


def judged(
    name: str, release: str, sets: tuple[str, ...] = ()
) -> tuple[Deployment, DeploymentReport]:
    """A fixture read (with `--set` items, if any) and judged by `release`."""
    deployment = read(recipe(name), load_server(None, release), LayoutSources(sets=sets))
    return deployment, judge(deployment, get_pack(release))


def test_every_fixture_is_listed() -> None:
    assert sorted(p.name for p in FIXTURES.glob("*.sh")) == sorted([*RECIPES, *REFUSED])


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_public_recipe_refused_only_by_its_reason(name: str) -> None:
    release, rules = REFUSED[name]
    assert judged(name, release)[1].broken == rules


@pytest.mark.parametrize("name", sorted(RECIPES))
def test_public_recipe_is_accepted(name: str) -> None:
    release, roles, gpus = RECIPES[name]
    text = recipe(name)
    deployment, report = judged(name, release)
    assert report.valid, (report.broken, [f.message for f in report.findings])
    assert report.to_dict()["deployment"]["servers"] == {"aggregated": 0, **roles}
    assert sum(r.gpus for r in report.roles) == gpus
    # --rewrite keeps an accepted script byte for byte; one written for an older release
    # (`--enable-deepep-moe`) is not rewritten: the release's parser exits on that flag,
    # and the note names the release that takes it
    back, notes = rewritten_deployment(deployment, get_pack(release))
    refused = any(unstartable(s.layout) is not None for s in deployment.servers)
    assert back == (None if refused else text)
    assert all("pass -V" in n for n in notes) if refused else True


@pytest.mark.parametrize("name", A3_TWO_NODE_DECODE)
def test_an_a3_recipe_is_judged_on_16_npus_a_node_unless_told_otherwise(name: str) -> None:
    """`--set gpus_per_node=8` (an Atlas A2 node) still wins over the assumed A3 node, and
    then the 32 decode ranks on 2 nodes of 8 are TOPO-NODE-GPUS, the one rule added."""
    release = (RECIPES.get(name) or REFUSED[name])[0]
    deployment, report = judged(name, release)
    assert {s.layout.config.gpus_per_node for s in deployment.servers} == {16}
    assert any(
        "gpus_per_node = 16 assumed" in n for s in deployment.servers for n in s.layout.notes
    )
    on_a2 = judged(name, release, ("gpus_per_node=8",))[1]
    assert set(on_a2.broken) - set(report.broken) == {"TOPO-NODE-GPUS"}


def test_pd_script_is_a_deployment_not_one_job(capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's report: SGLang's multi-node PD script read as four nodes of one job
    (JOB-ONE-LAYOUT). Now: two servers of two nodes each, one JSON entry per server."""
    path = FIXTURES / "sglang-docs-deepseek-mooncake.sh"
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--json")
    assert run.code == 0, run.out + run.err
    doc = json.loads(run.out)
    assert doc["deployment"]["valid"] is True
    assert [(r["role"], r["nodes"], r["gpus"]) for r in doc["roles"]] == [
        ("prefill", 2, 16),
        ("decode", 2, 16),
    ]
    assert "JOB-ONE-LAYOUT" not in run.out


def test_flags_the_deployment_rules_read_are_not_listed_as_unchecked(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A server of a deployment lists only the flags nothing checks: the transfer backend,
    page size and port are read by the pair and router rules, --base-gpu-id by
    TOPO-GPU-ID-RANGE."""
    script = tmp_path / "pd.sh"
    model = "meta-llama/Llama-3.1-8B-Instruct"
    shared = "--page-size 16 --disaggregation-transfer-backend nixl"
    script.write_text(
        f"python -m sglang.launch_server --model-path {model} --disaggregation-mode prefill "
        f"--port 30000 {shared}\n"
        f"python -m sglang.launch_server --model-path {model} --disaggregation-mode decode "
        f"--port 30001 --base-gpu-id 1 --random-seed 7 {shared}\n"
        "python -m sglang_router.launch_router --port 8000 --pd-disaggregation "
        "--prefill http://127.0.0.1:30000 --decode http://127.0.0.1:30001\n"
    )
    run = run_cli(capsys, "validate", "--sglang-file", str(script))
    assert run.code == 0, run.out + run.err
    unchecked = [line for line in run.err.splitlines() if "not checked by meshsat" in line]
    assert unchecked == [
        "note: decode@2: 1 flag(s) not checked by meshsat (not layout flags; SGLang still "
        "reads them): --random-seed"
    ]


def test_one_job_is_read_as_before() -> None:
    """Scripts without a router and with one role are one job: the deployment reader
    hands them back, and a disagreeing node is still JOB-ONE-LAYOUT."""
    text = (
        "python -m sglang.launch_server --tp 8 --nnodes 2 --node-rank 0 --dist-init-addr a:1\n"
        "python -m sglang.launch_server --tp 4 --nnodes 2 --node-rank 1 --dist-init-addr a:1\n"
    )
    assert read_deployment(text, load_server(None, "0.5.23")) is None
    report = verdict(text, "0.5.23")
    assert [r.role for r in report.roles] == ["aggregated"]
    assert "JOB-ONE-LAYOUT" in report.broken


def test_nodes_of_one_role_group_by_rendezvous() -> None:
    """Two prefill servers of two nodes each (one template, ranks repeating) and a decode."""
    node = (
        "python -m sglang.launch_server --disaggregation-mode prefill --tp 16 --nnodes 2 "
        "--node-rank {r} --dist-init-addr $MASTER:5000 --host h{h} --port 30000\n"
    )
    text = "".join(node.format(r=r, h=h) for h, r in ((0, 0), (0, 1), (1, 0), (1, 1)))
    text += "python -m sglang.launch_server --disaggregation-mode decode --tp 8 --port 30001\n"
    report = verdict(text, "0.5.23")
    assert [(r.role, len(r.lines)) for r in report.roles] == [
        ("prefill", 2),
        ("prefill", 2),
        ("decode", 1),
    ]
    assert report.valid, report.broken


def test_nodes_of_a_server_are_still_one_job() -> None:
    """A prefill node that disagrees with its other node is JOB-ONE-LAYOUT on the prefill
    server alone; the decode server is untouched."""
    text = recipe("sglang-docs-deepseek-mooncake.sh")
    first, rest = text.split("# prefill 1", 1)
    text = first + "# prefill 1" + rest.replace("--dp-size 8", "--dp-size 4", 1)
    report = verdict(text, "0.5.23")
    by_role = {r.role: {v.rule for v in r.report.violations} for r in report.roles}
    assert "JOB-ONE-LAYOUT" in by_role["prefill"]
    assert by_role["decode"] == set()


# --- seeded defects -------------------------------------------------------------------

#: A defect: the rule it must break (`A|B`: the one its transfer backend checks), the
#: releases that have that rule as an error, and the flags it sets on the prefill's and the
#: decode's launches.
DEFECTS: dict[str, tuple[str, tuple[str, ...], list[tuple[str, str]], list[tuple[str, str]]]] = {
    "model": ("PD-SAME-MODEL", (), [], [("--model-path", "other/Model-7B")]),
    "backend": (
        "PD-TRANSFER-BACKEND",
        (),
        [("--disaggregation-transfer-backend", "mooncake")],
        [("--disaggregation-transfer-backend", "nixl")],
    ),
    "page": ("PD-PAGE-SIZE", (), [("--page-size", "16")], [("--page-size", "64")]),
    "kv": ("PD-KV-DTYPE", (), [("--kv-cache-dtype", "auto")], [("--kv-cache-dtype", "fp8_e4m3")]),
    "pp": ("PD-PP", ("0.5.18", "0.5.19", "0.5.23"), [("--pp-size", "1")], [("--pp-size", "2")]),
    "tp": (
        "PD-TP-NON-MLA|PD-NIXL-PREFILL-TP",
        ("0.4.6.post5",),
        [("--tp-size", "1")],
        [("--tp-size", "2")],
    ),
    "bootstrap": ("PD-BOOTSTRAP-PORT", (), [("--disaggregation-bootstrap-port", "9000")], []),
}
#: Recipes a defect is seeded into: single-node servers with a router (the Llama ones).
SEEDED = ("sglang-docs-llama-mooncake.sh", "sglang-docs-llama-nixl.sh")


def seeded(text: str, defects: list[str]) -> str:
    commands = [c for c in read_launch_commands(text)]
    flags: dict[int, list[tuple[str, str]]] = {}
    for i, command in enumerate(commands):
        mode = next(
            (command.words[j + 1].text for j, w in enumerate(command.words[:-1])
             if w.text == "--disaggregation-mode"),
            "null",
        )  # fmt: skip
        side = 2 if mode == "prefill" else 3
        for name in defects:
            flags.setdefault(i, []).extend(DEFECTS[name][side])
    return set_flags(text, flags)


@settings(max_examples=25, deadline=None)
@given(
    name=st.sampled_from(SEEDED),
    defects=st.lists(st.sampled_from(sorted(DEFECTS)), min_size=1, max_size=3, unique=True),
    release=st.sampled_from(known_versions()),
)
def test_seeded_defects_are_rejected_by_rule_id(
    name: str, defects: list[str], release: str
) -> None:
    report = verdict(seeded(recipe(name), defects), release)
    errors = {f.rule for f in report.errors}
    for defect in defects:
        rule, releases, _, _ = DEFECTS[defect]
        if releases and release not in releases:
            continue
        assert set(rule.split("|")) & errors, (
            defect,
            release,
            [f.message for f in report.findings],
        )
    if any(not DEFECTS[d][1] or release in DEFECTS[d][1] for d in defects):
        assert not report.valid


@pytest.mark.parametrize(
    ("decode_model", "same"),
    [
        ("/data/models/Llama-3.1-8B-Instruct", True),  # the checkpoint copied to the host
        ("meta-llama/Llama-3.1-8B-Instruct/", True),
        ("meta-llama/Llama-3.1-70B-Instruct", False),
        ("$DECODE_MODEL", None),  # not known here: listed as undecided, never passed
    ],
)
def test_same_model_by_checkpoint_name(decode_model: str, same: bool | None) -> None:
    text = set_flags(recipe("sglang-docs-llama-mooncake.sh"), {1: [("--model-path", decode_model)]})
    report = verdict(text, "0.5.23")
    errors = {f.rule for f in report.errors}
    assert ("PD-SAME-MODEL" in errors) is (same is False)
    assert any(u.startswith("PD-SAME-MODEL") for u in report.undecided) is (same is None)


def test_router_that_swaps_the_roles_is_rejected() -> None:
    text = recipe("sglang-docs-llama-mooncake.sh").replace(
        "--prefill http://127.0.0.1:30000 --decode http://127.0.0.1:30001",
        "--prefill http://127.0.0.1:30001 --decode http://127.0.0.1:30000",
    )
    report = verdict(text, "0.5.23")
    assert [f.rule for f in report.errors] == ["ROUTER-ROLE", "ROUTER-ROLE"]
    text = text.replace("--pd-disaggregation ", "")
    assert {f.rule for f in verdict(text, "0.5.23").errors} == {"ROUTER-ROLE", "ROUTER-PD-MODE"}
    fixed = fix_deployment(text, sglang_version="0.5.23")
    assert fixed.ok
    assert [(r.moves, r.add_pd) for r in fixed.routers] == [
        ((("http://127.0.0.1:30001", "decode"), ("http://127.0.0.1:30000", "prefill")), True)
    ]


def test_a_placeholder_host_in_a_router_url_is_one_word() -> None:
    """SGLang's Ascend docs write `--prefill http://<P_IP>:8000 8995`: the placeholder is an
    unknown host of that URL, not a shell redirection that cut the URL to `http://` (which
    made the router name a server no script holds: ROUTER-UNKNOWN-URL)."""
    text = (
        "python -m sglang.launch_server --model-path m --disaggregation-mode prefill "
        "--dist-init-addr <MASTER_IP>:5000 --nnodes 2 --node-rank 0\n"
        "python -m sglang_router.launch_router --port 8000 --pd-disaggregation "
        "--prefill http://<P_IP>:8000 8995 --decode http://<D_IP>:8001\n"
    )
    server, router = read_launch_commands(text, routers=True)
    words = [(w.text, w.expansion) for w in router.words]
    assert ("http://$P_IP_:8000", "<P_IP>") in words and ("8995", None) in words
    assert ("$MASTER_IP_:5000", "<MASTER_IP>") in [(w.text, w.expansion) for w in server.words]
    report = verdict(recipe("sglang-docs-ascend-qwen3-235b.sh"), "0.5.18")
    assert "ROUTER-UNKNOWN-URL" not in {f.rule for f in report.findings}


def test_a_router_url_names_its_host_in_any_case() -> None:
    """`urlsplit` lowers a URL's host: `http://PIP:8000` names the server `--host PIP`.
    The page's decode URL `http://DIP:8001` names no host of its script (DIP1, DIP2)."""
    report = verdict(recipe("sglang-docs-ascend-qwen3-coder-480b.sh"), "0.5.18")
    unknown = [f.message for f in report.findings if f.rule == "ROUTER-UNKNOWN-URL"]
    assert len(unknown) == 1 and "http://DIP:8001" in unknown[0]


def test_a_regular_routers_worker_urls_are_checked() -> None:
    """`launch_router --worker-urls URL...` (no --pd-disaggregation) sends whole requests:
    to aggregated servers it is clean, to a prefill server it is ROUTER-ROLE, to a port no
    server listens on ROUTER-UNKNOWN-URL."""
    text = (
        "python -m sglang.launch_server --model-path m --tp 2 --port 30000\n"
        "python -m sglang.launch_server --model-path m --tp 2 --port 30001 --base-gpu-id 2\n"
        "python -m sglang_router.launch_router --port 8000 --worker-urls http://127.0.0.1:30000 "
        "http://127.0.0.1:30001\n"
    )
    report = verdict(text, "0.5.23")
    assert report.valid and report.findings == () and report.routers == 1
    wrong = text.replace("--tp 2 --port 30001", "--tp 2 --port 30001 --disaggregation-mode prefill")
    assert "ROUTER-ROLE" in {f.rule for f in verdict(wrong, "0.5.23").errors}
    elsewhere = verdict(text.replace("0.1:30001\n", "0.1:30002\n"), "0.5.23")
    assert [f.rule for f in elsewhere.findings] == ["ROUTER-UNKNOWN-URL"]


def test_prefill_alone_is_not_a_deployment() -> None:
    text = recipe("sglang-docs-llama-mooncake.sh").replace("--disaggregation-mode decode", "")
    report = verdict(text, "0.5.23")
    assert "PD-BOTH-ROLES" in {f.rule for f in report.errors}
    assert "ROUTER-ROLE" in {f.rule for f in report.errors}  # the router's decode is aggregated


# --- fix and --rewrite ----------------------------------------------------------------


@pytest.mark.parametrize("release", ["0.4.6.post5", "0.5.23"])
def test_fix_repairs_every_pair_rule(release: str) -> None:
    text = seeded(recipe("sglang-docs-llama-mooncake.sh"), ["backend", "page", "kv", "tp"])
    before = verdict(text, release)
    assert not before.valid
    result = fix_deployment(text, sglang_version=release)
    assert result.ok and result.after is not None
    assert result.after.errors == ()  # 0.5.x only warns on a TP mismatch (kept)


def test_fix_finds_an_attention_tp_the_rules_accept() -> None:
    """0.4.6.post5's NIXL with DP attention on the decode: the prefill's attention TP is no
    repair (PD-NIXL-RANK-GROUPS still breaks), attention TP 1 is; the GPU count stays."""
    text = (
        "python -m sglang.launch_server --disaggregation-mode prefill --tp 2 "
        "--disaggregation-transfer-backend nixl --port 30000\n"
        "python -m sglang.launch_server --disaggregation-mode decode --tp 4 --dp 2 "
        "--enable-dp-attention --disaggregation-transfer-backend nixl --port 30001 "
        "--base-gpu-id 2\n"
    )
    assert "PD-NIXL-RANK-GROUPS" in {f.rule for f in verdict(text, "0.4.6.post5").errors}
    result = fix_deployment(text, sglang_version="0.4.6.post5")
    assert result.ok
    decode = result.servers[1]
    assert [(c.field, c.new) for c in decode.forced] == [("dp_size", 4)]
    assert decode.report.best.gpus_used == 4


def test_rewrite_round_trip(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """--rewrite's script, read back, is a valid deployment; only the decode and the
    router change."""
    text = seeded(recipe("sglang-docs-llama-nixl.sh"), ["page", "kv", "tp"]).replace(
        "--prefill http://127.0.0.1:30000 --decode http://127.0.0.1:30001",
        "--prefill http://127.0.0.1:30001 --decode http://127.0.0.1:30000",
    )
    path = tmp_path / "pd.sh"
    path.write_text(text)
    args = ("--sglang-file", str(path), "--sglang-version", "0.4.6.post5")
    assert run_cli(capsys, "validate", *args).code == 1
    run = run_cli(capsys, "validate", *args, "--rewrite")
    assert run.code == 0, run.err
    assert verdict(run.out, "0.4.6.post5").valid
    before, after = text.splitlines(), run.out.splitlines()
    changed = {i + 1 for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b}
    commands = read_launch_commands(text, routers=True)
    allowed = {
        line
        for c in commands
        if c.router or "decode" in {w.text for w in c.words}
        for line in range(c.line, text.count("\n", 0, c.words[-1].end) + 2)
    }
    assert changed and changed <= allowed, (changed, allowed)


def test_fix_json_has_one_entry_per_server(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "pd.sh"
    path.write_text(seeded(recipe("sglang-docs-llama-mooncake.sh"), ["kv"]))
    run = run_cli(capsys, "fix", "--sglang-file", str(path), "--json")
    assert run.code == 0, run.err
    doc = json.loads(run.out)
    assert doc["deployment"]["fixed"] is True
    roles = {r["server"]: r for r in doc["roles"]}
    assert set(roles) == {"prefill@3", "decode@8"}
    assert roles["decode@8"]["flags"] == [{"flag": "--kv-cache-dtype", "value": "auto"}]


def test_fix_refuses_single_server_options(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "sglang-docs-llama-mooncake.sh"
    run = run_cli(capsys, "fix", "--sglang-file", str(path), "--gpus", "8")
    assert run.code == 2
    assert run.err.startswith("meshsat: error: a PD deployment is fixed server by server")


def test_refusals_name_a_deployment_of_aggregated_servers_as_such(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Split replicas behind a regular router (what `plan --emit lws` launches) are no PD
    deployment: `fix` with one server's options and `diff` say what the script holds."""
    script = (
        "python -m sglang.launch_server --model-path m --tp 2 --port 30000 &\n"
        "python -m sglang.launch_server --model-path m --tp 2 --port 30001 &\n"
        "python -m sglang_router.launch_router --port 8000 --worker-urls http://127.0.0.1:30000 "
        "http://127.0.0.1:30001\n"
    )
    kind = "a deployment of aggregated servers behind a router"
    fixed = run_cli(capsys, "fix", "--sglang", script, "--gpus", "8")
    assert fixed.code == 2
    assert fixed.err.startswith(f"meshsat: error: {kind} is fixed server by server"), fixed.err
    diff = run_cli(capsys, "diff", "0.5.19", "0.5.23", "--sglang", script)
    assert diff.code == 2
    assert diff.err.startswith(f"meshsat: error: the --sglang command holds {kind} (2 servers")


# --- the rule table -------------------------------------------------------------------


def test_every_deployment_rule_has_a_check_and_known_releases() -> None:
    assert checked_ids() == {r.id for r in DEPLOYMENT_RULES}
    assert len(set(rule_ids())) == len(rule_ids())
    for rule in (*PAIR_RULES, *DEPLOYMENT_RULES):
        assert any(rule.severity(v) for v in known_versions()), rule.id
        assert rule.hint and rule.source
    # The ranges: 0.4.6.post5's receivers, the 0.5 CommonKVManager, and a later release.
    by_id = {r.id: r for r in PAIR_RULES}
    assert by_id["PD-TP-NON-MLA"].severity("0.4.6.post5") == "error"
    assert by_id["PD-TP-NON-MLA"].severity("0.5.18") is None
    assert by_id["PD-TP-NON-MLA-PERF"].severity("0.5.24") == "warning"
    assert by_id["PD-PP"].severity("0.4.6.post5") is None


# --- AIConfigurator's measured disaggregated runs ---------------------------------------

SAMPLE = Path(
    "/work/main/.venv/lib/python3.11/site-packages/aiconfigurator_core/systems/silicon_sample.csv"
)

#: Single-server rules that read the checkpoint's shapes: what may refuse a measured
#: layout read with the embedded model facts (the runs' own checkpoints may differ).
MODEL_FACT_RULES = ("MODEL-", "WEIGHT-", "QUANT-")


def _sample_path() -> Path | None:
    try:
        from meshsat.solver.perf.measured import sample_path

        return sample_path()
    except ImportError:
        return SAMPLE if SAMPLE.exists() else None


def _flags(row: dict[str, str], side: str) -> str:
    """A row's layout for one role in SGLang's flags: AIConfigurator's tp is the attention
    TP per DP rank, so SGLang's --tp-size is tp x attention_dp_size."""

    def g(key: str) -> int:
        return int(row[f"{side}_{key}"] or 1)

    adp = g("attention_dp_size")
    out = f"--tp-size {g('tp_size') * adp} --pp-size {g('pp_size')}"
    if adp > 1:
        out += f" --dp-size {adp} --enable-dp-attention"
    if g("moe_ep_size") > 1:
        out += f" --ep-size {g('moe_ep_size')}"
    return out


def measured_script(row: dict[str, str]) -> str:
    """A measured run as the script of its deployment: its prefill and decode workers (one
    host each) and a router naming them all."""
    model = row["model_path"]
    workers = {role: int(row[f"{role}_num_workers"] or 1) for role in ("prefill", "decode")}
    lines = []
    urls: dict[str, list[str]] = {"prefill": [], "decode": []}
    for n, role in enumerate(("prefill", "decode")):
        for i in range(workers[role]):
            host = f"10.0.{n}.{i + 1}"
            urls[role].append(f"--{role} http://{host}:{30000 + n}")
            lines.append(
                f"python -m sglang.launch_server --model-path {model} --disaggregation-mode "
                f"{role} --host {host} --port {30000 + n} {_flags(row, role)}"
            )
    router = " ".join([*urls["prefill"], *urls["decode"]])
    lines.append(f"python -m sglang_router.launch_router --port 8000 --pd-disaggregation {router}")
    return "\n".join(lines) + "\n"


def measured_rows() -> list[dict[str, str]]:
    path = _sample_path()
    if path is None:
        pytest.skip("aiconfigurator-core's silicon_sample.csv is not installed")
    with path.open() as f:
        rows = [r for r in csv.DictReader(f) if r["backend"] == "sglang" and r["mode"] == "disagg"]
    return rows


def test_measured_disaggregated_runs() -> None:
    """Every measured SGLang PD run is a deployment no deployment rule refuses (0.5.18's
    pack: the runs are 0.5.x releases older than the first 0.5 pack); a server refused on
    its own is refused only by the rules that read the checkpoint's shapes."""
    rows = measured_rows()
    assert len(rows) == 534
    seen: dict[str, DeploymentReport] = {}
    accepted = 0
    for row in rows:
        text = measured_script(row)
        if text not in seen:
            seen[text] = verdict(text, "0.5.18")
        report = seen[text]
        assert not report.errors, [f.message for f in report.errors]
        own = {v.rule for r in report.roles for v in r.report.violations}
        assert all(rule.startswith(MODEL_FACT_RULES) for rule in own), own
        accepted += report.valid
    assert accepted >= 400  # 403 on Dec 4; docs/disaggregation.md says which and why
