"""`meshsat serve`'s JSON API, over HTTP on 127.0.0.1, against the CLI as the oracle.

Each endpoint must answer with exactly the document `meshsat <command> --format json` prints
for the same input, and a bad input with exactly the CLI's one error line. Also: safe by
default (no file read from a request, bounded bodies, the Host check), cancellation and the
deadline, the worker bound, concurrent requests, and `validate` never importing the web app.
"""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from meshsat.solver.cli.deadline import TimedOut
from meshsat.solver.lang.limits import MAX_FILE_BYTES
from meshsat.solver.web import make_server
from meshsat.solver.web.server import MeshsatServer
from meshsat.solver.web.work import Answer, Busy, Cancelled, Jobs, Work
from tests.cli_helpers import run_cli

REJECTED = "python -m sglang.launch_server --tp 8 --dp 3 --enable-dp-attention"
TWO_NODES = "python -m sglang.launch_server --tp 16 --dp 4 --enable-dp-attention --ep 16 --nnodes 2"
#: A visible-devices list shorter than the ranks' GPU ids (JOB-VISIBLE-DEVICES), which fix fits.
SHORT_LIST = "CUDA_VISIBLE_DEVICES=0,1 python -m sglang.launch_server --tp 4"
#: A PD deployment (docs/disaggregation.md): one JSON entry per server, the pair rules.
PD = (
    "python -m sglang.launch_server --disaggregation-mode prefill --tp 2 --port 30000\n"
    "python -m sglang.launch_server --disaggregation-mode decode --tp 4 --page-size 64 "
    "--port 30001\n"
    "python -m sglang_router.launch_router --pd-disaggregation --prefill http://127.0.0.1:30000 "
    "--decode http://127.0.0.1:30001\n"
)


@pytest.fixture(scope="module")
def server() -> Iterator[MeshsatServer]:
    srv = make_server("127.0.0.1", 0, workers=16)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def call(
    srv: MeshsatServer,
    method: str,
    path: str,
    body: Any = None,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
) -> tuple[int, dict[str, str], Any]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=60)
    data = raw if raw is not None else None if body is None else json.dumps(body).encode()
    sent = {"Content-Type": "application/json"} if data is not None else {}
    conn.request(method, path, data, {**sent, **(headers or {})})
    r = conn.getresponse()
    payload = r.read()
    conn.close()
    return r.status, dict(r.getheaders()), json.loads(payload) if payload else None


def cli_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, Any]:
    run = run_cli(capsys, *args, "--format", "json")
    return run.code, json.loads(run.out)


@pytest.mark.parametrize(
    ("endpoint", "body", "argv"),
    [
        ("validate", {"sglang": REJECTED}, ["validate", "--sglang", REJECTED]),
        ("validate", {"sglang": PD}, ["validate", "--sglang", PD]),
        ("fix", {"sglang": REJECTED, "gpus": 8}, ["fix", "--sglang", REJECTED, "--gpus", "8"]),
        ("groups", {"sglang": TWO_NODES}, ["groups", "--sglang", TWO_NODES]),
        ("groups", {"sglang": REJECTED}, ["groups", "--sglang", REJECTED]),
        ("groups", {"sglang": PD}, ["groups", "--sglang", PD]),
        ("fix", {"sglang": PD}, ["fix", "--sglang", PD]),
        ("validate", {"sglang": SHORT_LIST}, ["validate", "--sglang", SHORT_LIST]),
        ("fix", {"sglang": SHORT_LIST}, ["fix", "--sglang", SHORT_LIST]),
        (
            "diff",
            {"old": "0.5.19", "new": "0.5.23", "set": ["tp_size=8", "dp_size=2"]},
            ["diff", "0.5.19", "0.5.23", "--set", "tp_size=8", "--set", "dp_size=2"],
        ),
        (
            "plan",
            {"model": "deepseek-ai/DeepSeek-V3", "gpu": "H200", "gpus": 16, "top": 5,
             "rank": "kv", "where": ["ep >= 8"]},
            ["plan", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--gpus", "16",
             "--top", "5", "--rank", "kv", "--where", "ep >= 8"],
        ),
        (
            "plan",
            {"model": "deepseek-ai/DeepSeek-V3", "gpu": "H200", "gpus": 8, "top": 3,
             "tpot": 50},
            ["plan", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--gpus", "8",
             "--top", "3", "--tpot", "50"],
        ),
        (  # the estimator menu: each row names the source the CLI names
            "plan",
            {"model": "Qwen/Qwen3-8B", "gpu": "H100", "gpus": 4, "top": 3,
             "engine": "roofline"},
            ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "4", "--top", "3",
             "--engine", "roofline"],
        ),
        (
            "plan",
            {"model": "Qwen/Qwen3-8B", "gpu": "H100", "gpus": 4, "top": 3, "disagg": True,
             "engine": "roofline", "isl": 4096},
            ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "4", "--top", "3",
             "--disagg", "--engine", "roofline", "--isl", "4096"],
        ),
        (  # SGLang's --quantization: every command carries it, the estimate's kernels are FP8
            "plan",
            {"model": "Qwen/Qwen3-8B", "gpu": "H100", "gpus": 4, "top": 3,
             "quantization": "fp8"},
            ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "4", "--top", "3",
             "--quantization", "fp8"],
        ),
        (
            "plan",
            {"model": "Qwen/Qwen3-8B", "gpu": "H100", "gpus": 4, "top": 2, "disagg": True,
             "engine": "roofline", "quantization": "fp8"},
            ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "4", "--top", "2",
             "--disagg", "--engine", "roofline", "--quantization", "fp8"],
        ),
    ],
)  # fmt: skip
def test_each_endpoint_answers_with_the_cli_document(
    server: MeshsatServer,
    capsys: pytest.CaptureFixture[str],
    endpoint: str,
    body: dict[str, Any],
    argv: list[str],
) -> None:
    status, headers, doc = call(server, "POST", f"/api/{endpoint}", body)
    code, expected = cli_json(capsys, *argv)
    assert status == 200
    assert doc == expected
    assert int(headers["X-Meshsat-Exit"]) == code


def test_a_pasted_config_plans_like_the_catalogue_entry(server: MeshsatServer) -> None:
    from meshsat.solver.memory.models import catalogue_config

    config = dict(catalogue_config("Qwen/Qwen3-32B"))
    base = {"gpu": "H100", "gpus": 8, "top": 4, "rank": "kv"}
    _, _, by_id = call(server, "POST", "/api/plan", {**base, "model": "Qwen/Qwen3-32B"})
    _, _, pasted = call(server, "POST", "/api/plan", {**base, "model_config": config})
    assert len(pasted["layouts"]) == 4
    # The same rows; only the commands differ: a pasted config has no --model-path to name.
    for a, b in zip(by_id["layouts"], pasted["layouts"], strict=True):
        assert a["command"].replace(" --model-path Qwen/Qwen3-32B", "") == b["command"]
        assert {**a, "command": "", "node_command": ""} == {**b, "command": "", "node_command": ""}


def test_a_perf_plan_says_its_accuracy_and_a_kv_plan_does_not(server: MeshsatServer) -> None:
    """The note and the JSON field the CLI's `plan` prints (solver/perf/accuracy.py)."""
    from dataclasses import asdict

    from meshsat.solver.perf.accuracy import AGGREGATED

    base = {"model": "Qwen/Qwen3-32B", "gpu": "H100", "gpus": 2, "top": 1}
    _, headers, doc = call(server, "POST", "/api/plan", {**base, "engine": "roofline"})
    assert AGGREGATED.text() in json.loads(headers["X-Meshsat-Notes"])
    assert doc["accuracy"] == asdict(AGGREGATED)
    _, headers, doc = call(server, "POST", "/api/plan", {**base, "rank": "kv"})
    assert AGGREGATED.text() not in json.loads(headers["X-Meshsat-Notes"])
    assert "accuracy" not in doc


@pytest.mark.parametrize(
    ("body", "argv", "field"),
    [
        ({"gpus": 0}, ["--gpus", "0"], "gpus"),
        ({"gpus": "abc"}, ["--gpus", "abc"], "gpus"),
        ({"gpus": 8, "gpu": "H999"}, ["--gpus", "8", "--gpu", "H999"], "gpu"),
        ({"gpus": 8, "where": ["tp <"]}, ["--gpus", "8", "--where", "tp <"], "where"),
        (
            {"gpus": 8, "disagg": True, "rank": "kv"},
            ["--gpus", "8", "--disagg", "--rank", "kv"],
            "rank",
        ),
        ({"gpus": 8, "engine": "aiconfigurator"}, ["--gpus", "8", "--engine", "aiconfigurator"],
         "engine"),
        ({"gpus": 8, "engine": "AUTO"}, ["--gpus", "8", "--engine", "AUTO"], "engine"),
        ({"gpus": 8, "quantization": "fp9"}, ["--gpus", "8", "--quantization", "fp9"],
         "quantization"),
        ({"gpus": 8, "quantization": "fp9", "disagg": True},
         ["--gpus", "8", "--quantization", "fp9", "--disagg"], "quantization"),
        ({"gpus": 8, "quantization": "FP8", "rank": "kv"},
         ["--gpus", "8", "--quantization", "FP8", "--rank", "kv"], "quantization"),
        # a valid value the checkpoint refuses: found in the search, the line names the flag
        ({"gpus": 8, "quantization": "awq"}, ["--gpus", "8", "--quantization", "awq"],
         "quantization"),
    ],
)  # fmt: skip
def test_bad_input_is_the_cli_error_line(
    server: MeshsatServer,
    capsys: pytest.CaptureFixture[str],
    body: dict[str, Any],
    argv: list[str],
    field: str,
) -> None:
    model = {"model": "deepseek-ai/DeepSeek-V3"}
    if "gpu" not in body:
        body, argv = {**body, "gpu": "H200"}, [*argv, "--gpu", "H200"]
    status, headers, doc = call(server, "POST", "/api/plan", {**model, **body})
    run = run_cli(capsys, "plan", "--model", "deepseek-ai/DeepSeek-V3", *argv)
    assert run.code == 2 and status == 400 and headers["X-Meshsat-Exit"] == "2"
    assert doc["error"] == run.err.strip() and "\n" not in doc["error"]
    assert doc["field"] == field


def plan_controls() -> list[tuple[str, dict[str, str | None]]]:
    """The static page's controls inside the plan form (a select, a `data-option` label, an
    error slot), as (tag, attributes): the form's [name] fields are the request's keys."""
    from html.parser import HTMLParser
    from importlib import resources

    page = resources.files("meshsat.solver.web").joinpath("static", "index.html").read_text()

    class Controls(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.form: str | None = None
            self.found: list[tuple[str | None, str, dict[str, str | None]]] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            a = dict(attrs)
            if tag == "form":
                self.form = a.get("id")
            if tag == "select" or "data-option" in a or "data-for" in a:
                self.found.append((self.form, tag, a))

    parser = Controls()
    parser.feed(page)
    return [(tag, a) for form, tag, a in parser.found if form == "plan-form"]


def test_the_page_offers_the_clis_engine_choices(
    server: MeshsatServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Plan view's estimator menu: `/api/meta` gives `plan --engine`'s choices, default
    and help; the static page has the control inside the plan form, under the request key
    the API reads; a bad value sent as a job is refused before it starts, as the CLI does."""
    import typing

    from meshsat.solver.cli.perf_options import EngineOpt
    from meshsat.solver.web.api import options_of, prepare

    _, _, meta = call(server, "GET", "/api/meta")
    engine = meta["plan_engine"]
    assert engine["choices"] == ["auto", "aic", "roofline"]
    assert engine["help"] == typing.get_args(EngineOpt)[1].help  # the declaration's words
    base = {"model": "Qwen/Qwen3-8B", "gpu": "H100", "gpus": 4}
    # The default is what the CLI uses when --engine is not given; every choice parses.
    assert prepare("plan", base)[1]["engine"].value == engine["default"] == "auto"
    for choice in engine["choices"]:
        assert prepare("plan", {**base, "engine": choice})[1]["engine"].value == choice
    # The page: a select named `engine` inside the plan form (its [name] fields are the
    # request), shown when `plan` has the option, with a slot for its error line.
    in_plan = plan_controls()
    assert ("select", {"name": "engine"}) in in_plan and "engine" in options_of("plan")
    assert ("label", {"data-option": "engine", "id": "plan-engine", "hidden": None}) in in_plan
    assert ("div", {"class": "err", "data-for": "engine", "hidden": None}) in in_plan
    status, headers, doc = call(server, "POST", "/api/jobs/plan", {**base, "engine": "fast"})
    run = run_cli(capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "4",
                  "--engine", "fast")  # fmt: skip
    assert (status, run.code, headers["X-Meshsat-Exit"]) == (400, 2, "2")
    assert doc == {"error": run.err.strip(), "field": "engine", "exit": 2}


def test_the_page_offers_the_quantization_field(
    server: MeshsatServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The Plan view's quantization menu: `/api/meta` gives the values the `quantization`
    field takes (the `--set` field's declaration), `plan --quantization`'s default (none:
    the checkpoint's own) and help; the page has the select under the request key; every
    offered value parses and is what the plan's commands then carry."""
    import typing

    from meshsat.solver.cli.memory_options import QuantizationOpt, checked_quantization
    from meshsat.solver.lang.fields import SPECS
    from meshsat.solver.web.api import options_of, prepare

    _, _, meta = call(server, "GET", "/api/meta")
    quant = meta["plan_quantization"]
    assert set(quant["choices"]) == set(SPECS["quantization"].choices or ()) - {None}
    assert "fp8" in quant["choices"] and quant["default"] is None
    assert quant["help"] == typing.get_args(QuantizationOpt)[1].help
    base = {"model": "Qwen/Qwen3-8B", "gpu": "H100", "gpus": 4}
    assert prepare("plan", base)[1]["quantization"] is None
    for choice in quant["choices"]:
        given = prepare("plan", {**base, "quantization": choice})[1]["quantization"]
        assert checked_quantization(given) == choice
    in_plan = plan_controls()
    assert ("select", {"name": "quantization"}) in in_plan and "quantization" in options_of("plan")
    label = {"data-option": "quantization", "id": "plan-quantization", "hidden": None}
    assert ("label", label) in in_plan
    assert ("div", {"class": "err", "data-for": "quantization", "hidden": None}) in in_plan
    # A job with a bad value is refused before it starts, with the CLI's line and the field.
    status, headers, doc = call(server, "POST", "/api/jobs/plan", {**base, "quantization": "int3"})
    run = run_cli(capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "4",
                  "--quantization", "int3")  # fmt: skip
    assert (status, run.code, headers["X-Meshsat-Exit"]) == (400, 2, "2")
    assert doc == {"error": run.err.strip(), "field": "quantization", "exit": 2}


def test_a_deployment_is_refused_where_one_server_is_read(server: MeshsatServer) -> None:
    body = {"sglang": PD, "old": "0.5.19", "new": "0.5.23"}
    status, headers, doc = call(server, "POST", "/api/diff", body)
    assert status == 400 and headers["X-Meshsat-Exit"] == "2" and doc["field"] == "sglang"
    assert doc["error"] == (
        "meshsat: error: the pasted command holds a PD deployment (2 servers, 1 router): diff "
        "takes one server; check the deployment with validate or fix, or give one server's "
        "command"
    )


def test_a_deployment_is_rewritten_as_the_cli_rewrites_it(
    server: MeshsatServer, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = PD.replace("--tp 4", "--tp 4 --dp 3 --enable-dp-attention")
    status, headers, doc = call(server, "POST", "/api/rewrite", {"sglang": broken})
    run = run_cli(capsys, "validate", "--sglang", broken, "--rewrite")
    assert status == 200 and int(headers["X-Meshsat-Exit"]) == run.code
    assert doc["script"] is not None and doc["script"] != broken
    assert doc["script"] == run.out


def test_plan_emits_the_clis_leaderworkerset(
    server: MeshsatServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page's download: `emit: "lws"` answers with exactly what `plan --emit lws`
    prints for that pick, and a pick past the ranking is the CLI's error line."""
    plan = ["plan", "--model", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--gpus", "16"]
    base = {"model": "deepseek-ai/DeepSeek-V3", "gpu": "H200", "gpus": 16}
    _, _, ranked = call(server, "POST", "/api/plan", base)
    body = {**base, "emit": "lws", "pick": 3, "name": "ds", "image": "sglang:test"}
    status, headers, doc = call(server, "POST", "/api/plan", body)
    run = run_cli(capsys, *plan, "--emit", "lws", "--pick", "3", "--name", "ds", "--image",
                  "sglang:test")  # fmt: skip
    assert status == 200 and run.code == 0 and headers["X-Meshsat-Exit"] == "0"
    assert doc["manifest"] == run.out and "kind: LeaderWorkerSet" in run.out
    assert doc["rank"] == 3 and doc["command"] == ranked["layouts"][2]["command"]
    status, _, doc = call(server, "POST", "/api/plan", {**body, "top": 2})
    run = run_cli(capsys, *plan, "--top", "2", "--emit", "lws", "--pick", "3")
    assert run.code == 2 and status == 400
    assert doc["error"] == run.err.strip() and doc["field"] == "pick"


def test_a_disagg_plan_emits_the_clis_manifest(
    server: MeshsatServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The page's download of a deployment: `disagg` with `emit: "lws"` answers with the
    very text `plan --disagg --emit lws` prints (a LeaderWorkerSet per role, the router's
    Deployment + Service), and a pick past the ranking is the CLI's error line."""
    plan = ["plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "4", "--top", "2",
            "--disagg", "--engine", "roofline"]  # fmt: skip
    base = {"model": "Qwen/Qwen3-8B", "gpu": "H100", "gpus": 4, "top": 2, "disagg": True,
            "engine": "roofline"}  # fmt: skip
    body = {**base, "emit": "lws", "pick": 2, "name": "pd", "image": "sglang:test"}
    status, headers, doc = call(server, "POST", "/api/plan", body)
    run = run_cli(capsys, *plan, "--emit", "lws", "--pick", "2", "--name", "pd", "--image",
                  "sglang:test")  # fmt: skip
    assert status == 200 and run.code == 0 and headers["X-Meshsat-Exit"] == "0"
    assert doc == {"rank": 2, "manifest": run.out}
    assert run.out.count("kind: LeaderWorkerSet") == 2 and "name: pd-router" in run.out
    status, _, doc = call(server, "POST", "/api/plan", {**body, "pick": 3})
    run = run_cli(capsys, *plan, "--emit", "lws", "--pick", "3")
    assert run.code == 2 and status == 400
    assert doc["error"] == run.err.strip() and doc["field"] == "pick"


def test_a_warning_while_answering_is_a_note_of_that_answer(
    server: MeshsatServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """`sglang_version: installed` without SGLang warns which pack stands in: the warning
    comes back in that request's notes, worded as the CLI's note on stderr."""
    from importlib import metadata

    from meshsat.solver.packs.registry import installed_pack

    body = {"sglang": TWO_NODES, "sglang_version": "installed"}
    argv = ["groups", "--sglang", TWO_NODES, "--sglang-version", "installed"]
    installed_pack.cache_clear()  # the warning is said once per process
    _, headers, _ = call(server, "POST", "/api/groups", body)
    installed_pack.cache_clear()
    run = run_cli(capsys, *argv)
    notes = json.loads(headers["X-Meshsat-Notes"])
    cli_notes = [line.removeprefix("note: ") for line in run.err.splitlines()]
    assert notes == cli_notes
    try:
        metadata.version("sglang")
    except metadata.PackageNotFoundError:
        assert any(n.startswith("SGLang is not installed here") for n in notes)


def test_requests_read_no_file(
    server: MeshsatServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A local config whose 3 heads make tp 8 invalid: the CLI reads it, the server must not.
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"architectures": ["LlamaForCausalLM"], "num_attention_heads": 3,
                                  "num_key_value_heads": 3, "num_hidden_layers": 2}))  # fmt: skip
    command = f"python -m sglang.launch_server --model-path {tmp_path} --tp 8"
    _, local = cli_json(capsys, "validate", "--sglang", command)
    assert "MODEL-HEADS" in {v["rule"] for v in local["violations"]}
    status, headers, doc = call(server, "POST", "/api/validate", {"sglang": command})
    assert status == 200 and doc["valid"] is True
    assert any("model facts unknown" in n for n in json.loads(headers["X-Meshsat-Notes"]))
    for body in (
        {"config": str(config)},
        {"sglang_file": str(config)},
        {"model": str(config), "sglang": REJECTED},
        {"sglang": "-"},
    ):
        status, _, doc = call(server, "POST", "/api/validate", body)
        assert status == 400 and doc["error"].startswith("meshsat: error: ")
    status, _, doc = call(server, "POST", "/api/plan", {"model": str(config), "gpu": "H100",
                                                         "gpus": 8})  # fmt: skip
    assert status == 400 and doc["field"] == "model"


def test_bounded_and_guarded_requests(server: MeshsatServer) -> None:
    # A body over the limit is refused from its Content-Length, before it is read.
    conn = http.client.HTTPConnection("127.0.0.1", server.server_address[1], timeout=60)
    conn.putrequest("POST", "/api/validate")
    conn.putheader("Content-Type", "application/json")
    conn.putheader("Content-Length", str(MAX_FILE_BYTES + 1))
    conn.endheaders()
    r = conn.getresponse()
    doc = json.loads(r.read())
    conn.close()
    assert r.status == 400 and f"limit is {MAX_FILE_BYTES} bytes" in doc["error"]
    status, _, doc = call(
        server, "POST", "/api/validate", raw=b"sglang=x", headers={"Content-Type": "text/plain"}
    )
    assert status == 400 and "must be JSON" in doc["error"]
    status, _, doc = call(server, "POST", "/api/validate", raw=b"[" * 5000 + b"]" * 5000)
    assert status == 400 and doc["error"].startswith("meshsat: error: ")
    status, _, doc = call(server, "GET", "/", headers={"Host": "attacker.example:8000"})
    assert status == 403
    status, _, doc = call(server, "POST", "/api/nothing", {})
    assert status == 400 and "no endpoint" in doc["error"]
    status, _, _ = call(server, "GET", "/../../etc/passwd")
    assert status == 404


def test_concurrent_requests_get_their_own_answers(server: MeshsatServer) -> None:
    command = "python -m sglang.launch_server --tp 8 --enable-dp-attention --dp "
    bodies = [("validate", {"sglang": command + str(dp)}) for dp in range(1, 9)]
    bodies += [("groups", {"set": [f"tp_size={tp}"]}) for tp in (1, 2, 4, 8, 16)]
    alone = [call(server, "POST", f"/api/{e}", b)[2] for e, b in bodies]
    with ThreadPoolExecutor(len(bodies)) as pool:
        together = list(
            pool.map(lambda eb: call(server, "POST", f"/api/{eb[0]}", eb[1])[2], bodies)
        )
    assert together == alone
    assert [d["valid"] for d in alone[:8]] == [8 % dp == 0 for dp in range(1, 9)]


def test_a_job_reports_progress_and_is_cancelled_over_http(server: MeshsatServer) -> None:
    def answer(work: Work) -> Answer:
        work.step(examined=1, fit=0)
        work.cancel.wait(30)  # until DELETE
        work.step(examined=2, fit=0)
        return Answer({}, 0)

    job = server.jobs.start(Work("test", 60.0), answer, lambda e: (str(e), None))
    while job.work.progress != {"examined": 1, "fit": 0}:
        time.sleep(0.01)
    status, _, view = call(server, "GET", f"/api/jobs/{job.id}")
    assert status == 200 and view["state"] == "running" and view["progress"]["examined"] == 1
    status, _, _ = call(server, "DELETE", f"/api/jobs/{job.id}")
    assert status == 200
    while job.state == "running":
        time.sleep(0.01)
    _, _, view = call(server, "GET", f"/api/jobs/{job.id}")
    assert view["state"] == "failed" and view["error"] == "test was cancelled" and view["exit"] == 2


def finished_plan_job(server: MeshsatServer, body: dict[str, Any]) -> Any:
    """A plan job's last view, polled to its end; it must end with /api/plan's document."""
    status, _, view = call(server, "POST", "/api/jobs/plan", body)
    assert status == 202
    while view["state"] == "running":
        time.sleep(0.05)
        _, _, view = call(server, "GET", f"/api/jobs/{view['id']}")
    assert view["state"] == "done" and view["exit"] == 0
    assert view["document"] == call(server, "POST", "/api/plan", body)[2]
    return view


def test_a_plan_job_runs_to_its_document(server: MeshsatServer) -> None:
    body = {"model": "deepseek-ai/DeepSeek-V3", "gpu": "H200", "gpus": 16, "top": 3, "rank": "kv"}
    view = finished_plan_job(server, body)
    assert view["progress"]["examined"] >= view["progress"]["fit"] >= 3


def test_plan_stops_between_layouts_when_cancelled_or_late() -> None:
    from meshsat.solver.cli.plan_cmd import plan_layouts
    from meshsat.solver.memory.gpus import gpu

    work = Work("plan", 60.0)

    def cancel_at_five(examined: int, fit: int) -> None:
        if examined == 5:
            work.cancel.set()
        work.step(examined=examined, fit=fit)

    with pytest.raises(Cancelled):
        plan_layouts("deepseek-ai/DeepSeek-V3", gpu("H200"), 64, progress=cancel_at_five)
    assert work.progress["examined"] == 5
    late = Work("plan", 0.0)
    with pytest.raises(TimedOut, match="did not finish within 0 s"):
        plan_layouts(
            "deepseek-ai/DeepSeek-V3",
            gpu("H200"),
            64,
            progress=lambda seen, fit: late.step(examined=seen, fit=fit),
        )
    assert late.progress["examined"] == 1


def test_a_disagg_plan_job_reports_progress_and_stops_when_cancelled(
    server: MeshsatServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """`plan --disagg` as the page runs it: a job whose progress counts estimated layouts,
    ending in the document /api/plan answers; and cancelled, it stops at the next layout."""
    from meshsat.solver.cli.plan_disagg import disagg_rows
    from meshsat.solver.memory.gpus import gpu
    from meshsat.solver.perf.workload import cli_workload

    body = {"model": "Qwen/Qwen3-8B", "gpu": "H100", "gpus": 4, "top": 2, "disagg": True,
            "engine": "roofline"}  # fmt: skip
    view = finished_plan_job(server, body)
    assert view["progress"]["estimated"] == view["progress"]["of"] > 0
    # The notes of the CLI's table, word for word.
    run = run_cli(capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "4",
                  "--top", "2", "--disagg", "--engine", "roofline")  # fmt: skip
    assert view["notes"] == [line.removeprefix("note: ") for line in run.err.splitlines()]
    assert view["notes"][-1] == view["document"]["verdict_note"]
    work = Work("plan", 60.0)

    def cancel_at_three(done: int, total: int) -> None:
        if done == 3:
            work.cancel.set()
        work.step(estimated=done, of=total)

    with pytest.raises(Cancelled):
        disagg_rows("Qwen/Qwen3-8B", gpu("H100"), 4, cli_workload(1024, 1024, None, None),
                    engine="roofline", gpus_per_node=None, top=2,
                    progress=cancel_at_three)  # fmt: skip
    assert work.progress["estimated"] == 3


def test_past_the_worker_bound_a_request_is_refused_at_once() -> None:
    jobs = Jobs(workers=1)
    release = threading.Event()
    jobs.start(
        Work("a", 60.0), lambda w: (release.wait(30), Answer({}, 0))[1], lambda e: ("", None)
    )
    with pytest.raises(Busy):
        jobs.run_now(Work("b", 60.0), lambda w: Answer({}, 0))
    release.set()
    for _ in range(3000):
        try:
            assert jobs.run_now(Work("c", 60.0), lambda w: Answer({"ok": 1}, 0)).document == {
                "ok": 1
            }
            break
        except Busy:
            time.sleep(0.01)
    else:
        pytest.fail("the slot was never given back")


def test_validate_and_check_never_import_the_web_app() -> None:
    code = (
        "import sys\n"
        "from meshsat import solver\n"
        "solver.check({'tp_size': 8})\n"
        "from meshsat.solver.cli import main\n"
        "try:\n"
        "    main(['validate', '--set', 'tp_size=8'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('meshsat.solver.web') "
        "or m in ('http.server', 'selenium')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_an_unknown_value_is_said_not_defaulted(server: MeshsatServer) -> None:
    """The page said "valid ... 1 GPU(s)" for `--tp $TP --dp 3 --enable-dp-attention`:
    tp's default, not the launch's. The document names the rules not checked and the
    widths that read the unknown value (the page shows them as '?'); the fix keeps the
    command as it is."""
    command = "python -m sglang.launch_server --model-path x --tp $TP --dp 3 --enable-dp-attention"
    status, _, doc = call(server, "POST", "/api/validate", {"sglang": command})
    assert status == 200 and doc["valid"] and doc["unknown"] == {"tp_size": "$TP"}
    assert doc["undecided"] == ["DPATTN-TP-DIV", "TOPO-ATTN-TP"]
    assert {"gpus_used", "attn_tp", "engine_world"} <= set(doc["derived_unknown"])
    assert "attn_dp" not in doc["derived_unknown"]
    status, _, fixed = call(server, "POST", "/api/fix", {"sglang": command})
    assert status == 200 and fixed["valid_input"] and fixed["undecided"] == doc["undecided"]


@pytest.mark.parametrize(
    "sglang",
    [
        "python -m sglang.launch_server --tp $TP --ep 4",
        "python -m sglang.launch_server --tp $TP",
    ],
)
def test_groups_of_an_unknown_width_are_asked_for_as_the_cli_asks(
    server: MeshsatServer, capsys: pytest.CaptureFixture[str], sglang: str
) -> None:
    """`--tp $TP` is not known here; groups at SGLang's default would be another launch's
    (the API answered a 1-rank grid, exit 0, or TOPO-MOE-TP at tp 1, exit 1)."""
    status, headers, doc = call(server, "POST", "/api/groups", {"sglang": sglang})
    cli = run_cli(capsys, "groups", "--sglang", sglang)
    assert (status, headers["X-Meshsat-Exit"], cli.code) == (400, "2", 2)
    assert "tp_size = $TP is unknown" in doc["error"] and "tp_size = $TP is unknown" in cli.err
