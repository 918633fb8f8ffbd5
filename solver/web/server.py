"""The HTTP server of `meshsat serve`: the standard library's threading server, one page,
its two static files and the JSON API (`meshsat.solver.web.api`).

Why the standard library: the page needs a dozen routes and no templating, so a framework
would add a dependency (and its import time) for nothing; `ThreadingHTTPServer` answers each
connection in its own thread, and the answers share nothing mutable but the job table.

Safe by default: it binds to 127.0.0.1; on a loopback address it answers only requests whose
`Host` is that address or `localhost` (a web page elsewhere cannot reach it through DNS
rebinding); POSTs must be JSON (a cross-site form cannot send that without the browser
asking first, and nothing here answers that question); bodies are at most the CLI's file
limit; at most `workers` answers run at once and a request past that is refused at once.
"""

from __future__ import annotations

import json
import re
import sys
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from typing import Any

from meshsat.solver.errors import MeshsatError
from meshsat.solver.lang.limits import MAX_FILE_BYTES
from meshsat.solver.web.api import ENDPOINTS, field_of, option_hint, options_of, prepare
from meshsat.solver.web.work import Answer, Busy, Jobs, Work

#: The page's files, by URL path (nothing else on disk is ever served).
STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
}
_JOB = re.compile(r"^/api/jobs/([0-9]{1,12})$")
_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def _static(name: str) -> bytes:
    return resources.files("meshsat.solver.web").joinpath("static", name).read_bytes()


def meta() -> dict[str, Any]:
    """What the page's menus offer: models, GPUs, releases, examples, group kinds."""
    from meshsat.solver.cli.perf_options import EngineChoice
    from meshsat.solver.examples import names
    from meshsat.solver.groups import GROUP_KINDS
    from meshsat.solver.lang.fields import SPECS
    from meshsat.solver.memory.gpus import GPUS
    from meshsat.solver.memory.models import CATALOGUE
    from meshsat.solver.packs import NEWEST, known_versions

    return {
        "models": list(CATALOGUE),
        "gpus": {
            n: {"memory_gib": round(g.memory_gib, 1), "fabric": g.fabric} for n, g in GPUS.items()
        },
        "versions": list(known_versions()),
        "newest": NEWEST.version,
        "examples": names(),
        "group_kinds": list(GROUP_KINDS),
        "endpoints": list(ENDPOINTS),
        # The page shows the ISL/OSL/TTFT/TPOT inputs only when `plan` has those options.
        "plan_options": options_of("plan"),
        # The estimator menu (`plan --engine`): its choices, the CLI's default and help.
        "plan_engine": {
            "choices": [e.value for e in EngineChoice],
            **option_hint("plan", "engine"),
        },
        # `plan --quantization`: the values the `quantization` field takes (as `--set` and
        # the CLI check them), the CLI's default (none: the checkpoint's own) and help.
        "plan_quantization": {
            "choices": [c for c in SPECS["quantization"].choices or () if c is not None],
            **option_hint("plan", "quantization"),
        },
        "limits": {"request_bytes": MAX_FILE_BYTES},
    }


class MeshsatServer(ThreadingHTTPServer):
    daemon_threads = True
    # Many page loads open several connections at once; the default backlog of 5 refuses some.
    request_queue_size = 64

    def __init__(self, host: str, port: int, workers: int = 4) -> None:
        super().__init__((host, port), Handler)
        self.jobs = Jobs(workers=workers)
        self.loopback = host in _LOOPBACK

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        name = host.decode() if isinstance(host, bytes) else str(host)
        shown = f"[{name}]" if ":" in name else name
        return f"http://{shown}:{port}/"


def _error_line(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "meshsat: error: the input is nested too deeply"
    return "meshsat: error: " + " ".join(str(exc).split())


class Handler(BaseHTTPRequestHandler):
    server: MeshsatServer
    server_version = "meshsat"
    #: Seconds a client may take to send its request (a stalled client frees its thread).
    timeout = 30
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the terminal shows the URL and errors, not every request."""

    # ---- replies ------------------------------------------------------------------------
    def _send(
        self, status: int, body: bytes, kind: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.send_header(
            "Content-Security-Policy",
            "default-src 'self'; style-src 'self'; script-src 'self'; img-src 'self' data:",
        )
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
        body = json.dumps(data, allow_nan=False, default=str).encode()
        self._send(status, body, "application/json", headers)

    def _answer(self, answer: Answer) -> None:
        headers = {
            "X-Meshsat-Exit": str(answer.exit),
            "X-Meshsat-Notes": json.dumps(list(answer.notes), ensure_ascii=True),
        }
        self._json(HTTPStatus.OK, answer.document, headers)

    def _fail(self, exc: BaseException, field: str | None = None) -> None:
        status = HTTPStatus.SERVICE_UNAVAILABLE if isinstance(exc, Busy) else HTTPStatus.BAD_REQUEST
        line = _error_line(exc)
        self._json(
            status,
            {"error": line, "field": field_of(exc, field), "exit": 2},
            {"X-Meshsat-Exit": "2"},
        )

    def _bug(self, exc: BaseException) -> None:
        traceback.print_exception(exc, file=sys.stderr)
        line = (
            f"meshsat: error: internal error ({type(exc).__name__}); the server log has the details"
        )
        self._json(HTTPStatus.INTERNAL_SERVER_ERROR, {"error": line, "field": None, "exit": 2})

    # ---- checks -------------------------------------------------------------------------
    def _host_ok(self) -> bool:
        if not self.server.loopback:
            return True
        host = self.headers.get("Host") or ""
        name = host[: host.find("]") + 1] if host.startswith("[") else host.split(":")[0]
        if name in _LOOPBACK:
            return True
        self._json(
            HTTPStatus.FORBIDDEN, {"error": "meshsat: error: unexpected Host header", "exit": 2}
        )
        return False

    def _body(self) -> Any:
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise MeshsatError("a request body must be JSON (Content-Type: application/json)")
        length_text = self.headers.get("Content-Length")
        if length_text is None or not length_text.isdigit():
            raise MeshsatError("a request needs a Content-Length")
        length = int(length_text)
        if length > MAX_FILE_BYTES:
            self.close_connection = True
            raise MeshsatError(
                f"the request is {length} bytes; the limit is {MAX_FILE_BYTES} bytes"
            )
        raw = self.rfile.read(length)
        try:
            return json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
            raise MeshsatError(f"the request is not JSON: {exc}") from None

    # ---- routes -------------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        if not self._host_ok():
            return
        path = self.path.split("?", 1)[0]
        try:
            if path in STATIC:
                name, kind = STATIC[path]
                self._send(HTTPStatus.OK, _static(name), kind)
            elif path == "/favicon.ico":
                self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
            elif path == "/api/meta":
                self._json(HTTPStatus.OK, meta())
            elif (m := _JOB.match(path)) is not None:
                self._json(HTTPStatus.OK, self.server.jobs.get(m.group(1)).view())
            else:
                self._json(
                    HTTPStatus.NOT_FOUND,
                    {"error": f"meshsat: error: no page {path[:60]}", "exit": 2},
                )
        except MeshsatError as exc:
            self._fail(exc)
        except Exception as exc:
            self._bug(exc)

    def do_DELETE(self) -> None:
        if not self._host_ok():
            return
        m = _JOB.match(self.path.split("?", 1)[0])
        try:
            if m is None:
                raise MeshsatError("only jobs can be cancelled: DELETE /api/jobs/ID")
            self._json(HTTPStatus.OK, self.server.jobs.cancel(m.group(1)).view())
        except MeshsatError as exc:
            self._fail(exc)

    def do_POST(self) -> None:
        if not self._host_ok():
            return
        path = self.path.split("?", 1)[0]
        background = path.startswith("/api/jobs/")
        name = path.removeprefix("/api/jobs/" if background else "/api/")
        if not path.startswith("/api/"):
            self._json(
                HTTPStatus.NOT_FOUND, {"error": f"meshsat: error: no page {path[:60]}", "exit": 2}
            )
            return
        try:
            body = self._body()
            endpoint, params = prepare(name, body)
            work = Work(f"/api/{name}", endpoint.deadline_s)

            def answer(w: Work) -> Answer:
                return endpoint.answer(body, params, w)

            if background:
                job = self.server.jobs.start(work, answer, _job_error)
                self._json(HTTPStatus.ACCEPTED, job.view())
            else:
                self._answer(self.server.jobs.run_now(work, answer))
        except (MeshsatError, RecursionError) as exc:
            self._fail(exc)
        except Exception as exc:
            self._bug(exc)


def _job_error(exc: BaseException) -> tuple[str, str | None]:
    """A background job's error as (line, field); a bug is logged, not shown."""
    if isinstance(exc, MeshsatError | RecursionError):
        return _error_line(exc), field_of(exc, None)
    traceback.print_exception(exc, file=sys.stderr)
    return f"meshsat: error: internal error ({type(exc).__name__})", None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def make_server(host: str = "127.0.0.1", port: int = 8000, workers: int = 4) -> MeshsatServer:
    """A server bound to (host, port) (port 0: any free port), not yet serving."""
    return MeshsatServer(host, port, workers)


def serve(host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve until Ctrl-C."""
    server = make_server(host, port)
    print(f"meshsat serve: {server.url} (Ctrl-C stops)", file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
