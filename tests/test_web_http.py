"""`meshsat serve` at the HTTP level, with raw sockets where a client library would hide
what is on the wire: a refused request closes its connection (its unread body is never
read as a second request), every error is one JSON line, the DNS-rebinding check covers
all of loopback, and the API's defaults, notes, fields and timings are the CLI's.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from typing import Any

import pytest

from meshsat.solver.web import make_server
from meshsat.solver.web.server import Handler, MeshsatServer
from meshsat.solver.web.work import Answer, Cancelled, Jobs, Work
from tests.cli_helpers import run_cli
from tests.test_web_api import call

HOST = b"Host: 127.0.0.1\r\n"
INNER = b'{"sglang": "python -m sglang.launch_server --tp 8"}'
#: A request hidden in another's body: if it is answered, the body was run as a request.
SMUGGLED = (
    b"POST /api/validate HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
    b"Content-Length: %d\r\n\r\n" % len(INNER) + INNER
)


@contextmanager
def serving(host: str = "127.0.0.1") -> Iterator[MeshsatServer]:
    srv = make_server(host, 0, workers=4)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture(scope="module")
def server() -> Iterator[MeshsatServer]:
    with serving() as srv:
        yield srv


def exchange(srv: MeshsatServer, data: bytes, wait: float = 10.0) -> tuple[bytes, bool]:
    """Everything the server sends back for `data`, and whether it closed the connection
    (False: still open after `wait` s without a byte)."""
    host, port = srv.server_address[:2]
    with socket.create_connection((str(host), port), timeout=wait) as s:
        s.sendall(data)
        out = b""
        try:
            while chunk := s.recv(65536):
                out += chunk
        except TimeoutError:
            return out, False
    return out, True


def responses(out: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """The responses in `out`, each (status, headers, body), read by Content-Length."""
    found = []
    while out:
        head, _, rest = out.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        n = int(headers.get("Content-Length", 0))
        found.append((int(lines[0].split()[1]), headers, rest[:n]))
        out = rest[n:]
    return found


@pytest.mark.parametrize(
    "outer",
    [
        # A cross-site form can send text/plain; its body is the smuggled request.
        b"POST /api/validate HTTP/1.1\r\n" + HOST + b"Content-Type: text/plain\r\n",
        # DNS rebinding: the foreign Host is refused, its body carries a loopback one.
        b"POST /api/validate HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\n",
        b"POST / HTTP/1.1\r\n" + HOST + b"Content-Type: text/plain\r\n",
        b"GET / HTTP/1.1\r\nHost: evil.example\r\n",
        b"GET /favicon.ico HTTP/1.1\r\n" + HOST,  # answered, but its body is not read
        b"PUT /api/validate HTTP/1.1\r\n" + HOST,
    ],
)
def test_a_request_whose_body_is_not_read_closes_its_connection(
    server: MeshsatServer, outer: bytes
) -> None:
    """Request smuggling: a refused request's body was left on the kept-alive connection
    and answered as a second request, past the Content-Type and Host checks."""
    out, closed = exchange(server, outer + b"Content-Length: %d\r\n\r\n" % len(SMUGGLED) + SMUGGLED)
    (answer,) = responses(out)
    assert closed and answer[1]["Connection"] == "close"
    assert answer[0] == 204 or json.loads(answer[2])["error"].startswith("meshsat: error: ")


def test_a_kept_alive_connection_still_answers_each_request(server: MeshsatServer) -> None:
    post = b"POST /api/validate HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
    post += b"Content-Length: %d\r\n\r\n" % len(INNER) + INNER
    out, closed = exchange(server, post + b"GET /favicon.ico HTTP/1.1\r\n" + HOST + b"\r\n", 1.0)
    assert [r[0] for r in responses(out)] == [200, 204] and not closed


@pytest.mark.parametrize(
    ("request_line", "status", "allow"),
    [
        (b"PUT /api/validate HTTP/1.1", 405, "POST"),
        (b"PATCH /api/jobs/1 HTTP/1.1", 405, "GET, HEAD, DELETE"),
        (b"OPTIONS /api/plan HTTP/1.1", 405, "POST"),
        (b"GET /api/validate HTTP/1.1", 405, "POST"),
        (b"DELETE /api/validate HTTP/1.1", 405, "POST"),
        (b"POST /api/meta HTTP/1.1", 405, "GET, HEAD"),
        (b"GET /api/jobs/1234567890123 HTTP/1.1", 404, None),
        (b"OPTIONS /nowhere HTTP/1.1", 501, None),
        (b"HELLO", 400, None),
        (b"GET /" + b"a" * 70_000 + b" HTTP/1.1", 414, None),
    ],
)
def test_every_refusal_is_one_json_line(
    server: MeshsatServer, request_line: bytes, status: int, allow: str | None
) -> None:
    """The standard library answered these with its HTML page (and 501 for PUT)."""
    out, closed = exchange(server, request_line + b"\r\n" + HOST + b"Content-Length: 0\r\n\r\n")
    (answer,) = responses(out)
    assert closed and answer[0] == status and answer[1]["Content-Type"] == "application/json"
    doc = json.loads(answer[2])
    assert doc["error"].startswith("meshsat: error: ") and "\n" not in doc["error"]
    assert answer[1].get("Allow") == allow
    if allow is not None:
        assert allow in doc["error"]


@pytest.mark.parametrize(
    "length",
    [b"\xb2", "\u0663".encode(), b"-1", b"99999999999999999999", b"5\r\nContent-Length: 5"],
)
def test_a_bad_content_length_is_refused(server: MeshsatServer, length: bytes) -> None:
    """`"²".isdigit()` is true and `int("²")` fails: that was a 500."""
    head = b"POST /api/validate HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
    out, closed = exchange(server, head + b"Content-Length: " + length + b"\r\n\r\n" + INNER)
    (answer,) = responses(out)
    assert closed and answer[0] == 400
    assert "Content-Length" in json.loads(answer[2])["error"]


def test_a_slow_body_is_a_408_not_a_traceback(
    server: MeshsatServer, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(Handler, "timeout", 0.3)
    head = b"POST /api/validate HTTP/1.1\r\n" + HOST + b"Content-Type: application/json\r\n"
    out, closed = exchange(server, head + b"Content-Length: 50\r\n\r\n{")
    (answer,) = responses(out)
    assert closed and answer[0] == 408 and "did not arrive" in json.loads(answer[2])["error"]
    time.sleep(0.2)  # the handler thread's last words, if any
    assert "Traceback" not in capsys.readouterr().err


def test_every_loopback_address_is_guarded_against_rebinding() -> None:
    """`serve --host 127.0.0.2` answered `Host: evil.example`: only 127.0.0.1 and ::1
    counted as loopback."""
    from meshsat.solver.web.server import is_loopback

    assert all(map(is_loopback, ["127.0.0.1", "127.0.0.2", "127.255.0.9", "::1", "[::1]"]))
    assert is_loopback("LOCALHOST") and not is_loopback("0.0.0.0")
    assert not any(map(is_loopback, ["evil.example", "127.1", "10.0.0.1", "localhost.evil"]))
    with serving("127.0.0.2") as srv:
        assert srv.loopback
        port = srv.server_address[1]
        out, _ = exchange(srv, b"GET /api/meta HTTP/1.1\r\nHost: evil.example\r\n\r\n")
        assert responses(out)[0][0] == 403
        host = b"Host: 127.0.0.2:%d\r\n" % port
        out, _ = exchange(srv, b"GET /favicon.ico HTTP/1.1\r\n" + host + b"\r\n", 1.0)
        assert responses(out)[0][0] == 204


# ---- the API: releases, defaults and notes as the CLI's ---------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"old": "0.5.18", "new": "--help"}, "new"),
        ({"old": "--help", "new": "0.5.23"}, "old"),
        ({"old": "0.4", "new": "0.5.23"}, "old"),
    ],
)
def test_diff_releases_are_values_not_options(
    server: MeshsatServer, capsys: pytest.CaptureFixture[str], body: dict[str, str], field: str
) -> None:
    """`"new": "--help"` was read as click's --help: the help in the log, a 500."""
    status, _, doc = call(server, "POST", "/api/diff", body)
    assert (status, doc["field"]) == (400, field)
    assert "unknown SGLang version" in doc["error"] and "\n" not in doc["error"]
    assert "Usage" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("endpoint", "version"),
    [("validate", "0.1"), ("validate", "--help"), ("groups", "0.1"), ("plan", "x")],
)
def test_an_unknown_release_names_its_field(
    server: MeshsatServer, capsys: pytest.CaptureFixture[str], endpoint: str, version: str
) -> None:
    """The CLI's line names no flag, so the field was null (or `help`, from `--help`)."""
    body: dict[str, Any] = {"sglang": "python -m sglang.launch_server --tp 8"}
    if endpoint == "plan":
        body = {"model": "Qwen/Qwen3-8B", "gpu": "H100", "gpus": 4}
    status, _, doc = call(server, "POST", f"/api/{endpoint}", {**body, "sglang_version": version})
    run = run_cli(capsys, "validate", "--set", "tp_size=8", f"--sglang-version={version}")
    assert (status, doc["field"], run.code) == (400, "sglang_version", 2)
    assert doc["error"] == run.err.strip()


@contextmanager
def installed_sglang(monkeypatch: pytest.MonkeyPatch, version: str) -> Iterator[None]:
    """SGLang `version` "installed" (metadata only; the pack is looked up afresh)."""
    from meshsat.solver.packs.registry import installed_pack

    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda n: version if n == "sglang" else real(n))
    installed_pack.cache_clear()
    try:
        yield
    finally:
        installed_pack.cache_clear()


def test_each_installed_request_carries_its_stand_in_note(
    server: MeshsatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """0.9.0 has no pack of its own: 0.5.23's stands in, which the warning says once per
    process and each request's notes must say again (only the first one's did)."""
    body = {"set": ["tp_size=8"], "sglang_version": "installed"}
    with installed_sglang(monkeypatch, "0.9.0"):
        for _ in range(2):
            _, headers, _ = call(server, "POST", "/api/validate", body)
            assert json.loads(headers["X-Meshsat-Notes"]) == [
                "meshsat has no rule pack for the installed SGLang 0.9.0; using the 0.5.23 pack"
            ]


def test_groups_default_to_the_newest_pack_as_the_cli(
    server: MeshsatServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`plan_layout`'s own default is the installed SGLang's; the command's is the newest."""
    command = "python -m sglang.launch_server --tp 8 --dwdp-size 2"
    with installed_sglang(monkeypatch, "0.4.6.post5"):
        status, headers, doc = call(server, "POST", "/api/groups", {"sglang": command})
        run = run_cli(capsys, "groups", "--sglang", command, "--format", "json")
    assert status == 200 and doc == json.loads(run.out) and doc["sglang_version"] == "0.5.23"
    assert int(headers["X-Meshsat-Exit"]) == run.code


# ---- jobs: the CLI's timeout line, checks inside the disagg search, final times ----


def test_the_request_timeout_is_the_clis_error(
    server: MeshsatServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """The docs promise the CLI's error for `timeout`; it was the server's own line with
    the field null."""
    body = {"model": "Qwen/Qwen3-8B", "gpu": "H100", "gpus": 4, "timeout": 0.001}
    status, _, doc = call(server, "POST", "/api/plan", body)
    run = run_cli(capsys, "plan", "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--gpus", "4",
                  "--timeout", "0.001")  # fmt: skip
    assert (status, run.code) == (400, 2)
    assert doc == {"error": run.err.strip(), "field": "timeout", "exit": 2}


def test_a_disagg_plan_stops_while_its_layouts_are_read() -> None:
    """The role layouts are read for seconds before the first estimate (6 s for
    DeepSeek-V3 on 512 H200) and the pairs searched for seconds after the last: a Cancel
    is heard there too, not only between estimates."""
    from meshsat.solver.cli.plan_disagg import disagg_rows
    from meshsat.solver.memory.gpus import gpu
    from meshsat.solver.perf.workload import cli_workload

    calls: list[tuple[int, int]] = []

    def record(done: int, total: int) -> None:
        calls.append((done, total))

    disagg_rows("Qwen/Qwen3-8B", gpu("H100"), 8, cli_workload(1024, 1024, None, None),
                engine="roofline", gpus_per_node=None, top=2, progress=record)  # fmt: skip
    total = max(t for _, t in calls)
    estimated = calls.index((total, total))
    assert calls[0] == (0, 0)  # before any estimate
    assert calls[estimated + 1] == (total, total)  # the pair search beats with the same counts
    work = Work("plan", 60.0)
    work.cancel.set()
    with pytest.raises(Cancelled):
        disagg_rows("Qwen/Qwen3-8B", gpu("H100"), 8, cli_workload(1024, 1024, None, None),
                    engine="roofline", gpus_per_node=None, top=2,
                    progress=lambda d, t: work.step(estimated=d, of=t))  # fmt: skip
    assert work.progress == {"estimated": 0, "of": 0}


def test_a_finished_jobs_time_stops() -> None:
    """`elapsed_s` kept growing while a finished job was polled."""
    jobs = Jobs(workers=1)
    job = jobs.start(Work("a", 60.0), lambda w: Answer({}, 0), lambda e: ("", None))
    while job.state == "running":
        time.sleep(0.01)
    first = job.view()["elapsed_s"]
    time.sleep(0.05)
    assert job.view()["elapsed_s"] == first
