"""The HTTP server of `meshsat serve`: the standard library's threading server, one page,
its two static files and the JSON API (`meshsat.solver.web.api`).

Why the standard library: the page needs a dozen routes and no templating, so a framework
would add a dependency (and its import time) for nothing; `ThreadingHTTPServer` answers each
connection in its own thread, and the answers share nothing mutable but the job table.

Safe by default: it binds to 127.0.0.1; on a loopback address (any of 127.0.0.0/8, ::1,
`localhost`) it answers only requests whose `Host` is a loopback address or `localhost` (a
web page elsewhere cannot reach it through DNS rebinding); POSTs must be JSON (a cross-site
form cannot send that without the browser asking first, and nothing here answers that
question); bodies are at most the CLI's file limit; at most `workers` answers run at once
and a request past that is refused at once.

Every refusal and error closes the connection (`Connection: close`): a refused request's
body is never read, and on a kept-alive connection it would be read as the next request
(a cross-site `text/plain` form whose body is a JSON request would get past the checks).
"""

from __future__ import annotations

import ipaddress
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
from meshsat.solver.web.api import (
    ENDPOINTS,
    field_of,
    option_hint,
    options_of,
    prepare,
    stand_in_notes,
)
from meshsat.solver.web.work import Answer, Busy, Jobs, Work

#: The page's files, by URL path (nothing else on disk is ever served).
STATIC = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/static/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/static/app.css": ("app.css", "text/css; charset=utf-8"),
}
_JOB = re.compile(r"^/api/jobs/([0-9]{1,12})$")
_LENGTH = re.compile(r"^[0-9]{1,19}$")


def is_loopback(host: str) -> bool:
    """Whether `host` (an address, `[::1]`, or a name) is this machine's loopback: a name
    no one else can make resolve elsewhere, so a request naming it did not come through
    DNS rebinding. The one definition for the bound address and the `Host` header."""
    name = host.lower().removeprefix("[").removesuffix("]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def allowed(path: str) -> tuple[str, ...]:
    """The methods a path answers (the `Allow` of a 405); none for a path that is no page
    (a POST to another /api/ path is answered with the list of endpoints)."""
    if path in STATIC or path in ("/favicon.ico", "/api/meta"):
        return ("GET", "HEAD")
    if _JOB.match(path) is not None:
        return ("GET", "HEAD", "DELETE")
    if path.removeprefix("/api/jobs/") in ENDPOINTS or path.removeprefix("/api/") in ENDPOINTS:
        return ("POST",)
    return ()


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
        self.loopback = is_loopback(host)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Quiet for a client that went away or stalled (its connection is simply dropped);
        anything else is a bug, printed with its traceback."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)

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

    #: Whether this request's body was read (a kept-alive connection's next bytes are then
    #: the next request, not this one's body).
    body_read = False

    def parse_request(self) -> bool:
        """Each request on a connection starts with its body unread."""
        self.body_read = False
        return super().parse_request()

    # ---- replies ------------------------------------------------------------------------
    def _unread_body(self) -> bool:
        """Whether the request announced a body that was not read (a refusal reads none):
        left on the connection, it would be taken for the next request."""
        headers = getattr(self, "headers", None)  # none yet when the request line is refused
        if headers is None or self.body_read:
            return False
        length = headers.get("Content-Length")
        return headers.get("Transfer-Encoding") is not None or (
            length is not None and length.strip() != "0"
        )

    def _send(
        self, status: int, body: bytes, kind: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        if status >= 400 or self._unread_body():
            # Closing, not draining: what follows a refused request is not read at all.
            self.send_header("Connection", "close")
            self.close_connection = True
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

    def _refuse(self, status: int, line: str, headers: dict[str, str] | None = None) -> None:
        """An error that is not the CLI's (no page, wrong method, a malformed request)."""
        body = {"error": f"meshsat: error: {line}", "field": None, "exit": 2}
        self._json(status, body, {"X-Meshsat-Exit": "2", **(headers or {})})

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The standard library's refusals (a malformed request line, a 70 kB path, an
        unknown method, oversized headers) as one JSON line, not its HTML page; an unknown
        method on a page is a 405 naming the methods the page answers."""
        if getattr(self, "request_version", "") == "HTTP/0.9":
            self.request_version = "HTTP/1.0"  # a garbage request line: answer with headers
        path = (getattr(self, "path", "") or "").split("?", 1)[0]
        methods = allowed(path) if code == HTTPStatus.NOT_IMPLEMENTED else ()
        if methods:
            self._not_allowed(methods)
            return
        try:
            phrase = HTTPStatus(code).phrase.lower()
        except ValueError:
            phrase = f"error {code}"
        self._refuse(code, phrase if message is None else " ".join(message.split())[:200])

    def _not_allowed(self, methods: tuple[str, ...]) -> None:
        path = self.path.split("?", 1)[0]
        self._refuse(
            HTTPStatus.METHOD_NOT_ALLOWED,
            f"{path[:60]} answers {', '.join(methods)}, not {str(self.command)[:20]}",
            {"Allow": ", ".join(methods)},
        )

    def _route(self) -> str | None:
        """The request's path if the Host check passes and the path answers the method;
        else None, the refusal sent (403, 404 or 405)."""
        if not self._host_ok():
            return None
        path = self.path.split("?", 1)[0]
        methods = allowed(path)
        method = "GET" if self.command == "HEAD" else self.command
        if method in methods or (method == "POST" and not methods and path.startswith("/api/")):
            return path  # an unknown endpoint's 400 lists the endpoints
        if methods:
            self._not_allowed(methods)
        else:
            self._refuse(HTTPStatus.NOT_FOUND, f"no page {path[:60]}")
        return None

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
        if is_loopback(name):
            return True
        self._refuse(HTTPStatus.FORBIDDEN, "unexpected Host header")
        return False

    def _body(self) -> Any:
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise MeshsatError("a request body must be JSON (Content-Type: application/json)")
        lengths = self.headers.get_all("Content-Length") or []
        if self.headers.get("Transfer-Encoding") is not None:
            raise MeshsatError("a request body must be sent with a Content-Length, not chunked")
        if len(lengths) != 1 or not _LENGTH.match(lengths[0].strip()):
            # ASCII digits only: "²" is a digit to `str.isdigit` and not to `int`.
            raise MeshsatError("a request needs one Content-Length, a number of bytes")
        length = int(lengths[0])
        if length > MAX_FILE_BYTES:
            raise MeshsatError(
                f"the request is {length} bytes; the limit is {MAX_FILE_BYTES} bytes"
            )
        try:
            raw = self.rfile.read(length)
        except TimeoutError:
            raise _SlowClient(f"the request body did not arrive within {self.timeout} s") from None
        if len(raw) < length:
            raise MeshsatError(f"the request body ended after {len(raw)} of {length} bytes")
        self.body_read = True
        try:
            return json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        except (UnicodeDecodeError, json.JSONDecodeError, ValueError) as exc:
            raise MeshsatError(f"the request is not JSON: {exc}") from None

    # ---- routes -------------------------------------------------------------------------
    def do_HEAD(self) -> None:
        self.do_GET()

    def do_GET(self) -> None:
        path = self._route()
        if path is None:
            return
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
        except MeshsatError as exc:
            self._fail(exc)
        except Exception as exc:
            self._bug(exc)

    def do_DELETE(self) -> None:
        path = self._route()
        m = None if path is None else _JOB.match(path)
        if m is None:
            return
        try:
            self._json(HTTPStatus.OK, self.server.jobs.cancel(m.group(1)).view())
        except MeshsatError as exc:
            self._fail(exc)

    def do_POST(self) -> None:
        path = self._route()
        if path is None:
            return
        background = path.startswith("/api/jobs/")
        name = path.removeprefix("/api/jobs/" if background else "/api/")
        try:
            body = self._body()
            endpoint, params = prepare(name, body)
            work = Work(f"/api/{name}", endpoint.deadline_s)

            def answer(w: Work) -> Answer:
                return stand_in_notes(params, endpoint.answer(body, params, w))

            if background:
                job = self.server.jobs.start(work, answer, _job_error)
                self._json(HTTPStatus.ACCEPTED, job.view())
            else:
                self._answer(self.server.jobs.run_now(work, answer))
        except _SlowClient as exc:
            self._refuse(HTTPStatus.REQUEST_TIMEOUT, str(exc))
        except (MeshsatError, RecursionError) as exc:
            self._fail(exc)
        except Exception as exc:
            self._bug(exc)


class _SlowClient(MeshsatError):
    """The body did not arrive in time: 408, and the connection is dropped (its reader is
    unusable after a timeout)."""


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
