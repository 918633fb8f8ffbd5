"""Bounded, cancellable work for the web app: a deadline, a cancel flag and progress.

Why not threads that are killed: Python cannot stop a thread from outside. Long answers
(`plan` over many layouts) call `Work.step` after every layout they examine; it raises
`Cancelled` when the user pressed Cancel and `TimedOut` (the CLI's error for `--timeout`)
past the deadline, so the work ends between two layouts and its thread is free again (the
disagg search also calls it, with unchanged counts, while it reads layouts and pairs
them). Z3 searches (`fix`) are bounded by their own `timeout_s` instead.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from meshsat.solver.cli.deadline import TimedOut
from meshsat.solver.cli.output import warnings_to
from meshsat.solver.errors import InputError, MeshsatError


class Cancelled(MeshsatError):
    """The user cancelled the request (the page's Cancel button, or DELETE on the job)."""


class Busy(MeshsatError):
    """Every worker is taken: the request is refused at once rather than queued unbounded."""


@dataclass
class Work:
    """One request's budget: `step` is the progress callback long answers call."""

    what: str
    deadline_s: float
    cancel: threading.Event = field(default_factory=threading.Event)
    started: float = field(default_factory=time.monotonic)
    #: The latest progress, e.g. {"examined": 120, "fit": 40} (the KV plan) or
    #: {"estimated": 12, "of": 40} (layout shapes of the estimate); read by the job poller.
    progress: dict[str, int] = field(default_factory=dict)
    #: The error past the deadline, when the request set it (`plan`'s `timeout`: the CLI's
    #: line, naming `--timeout`); else the server's own, naming the path.
    late: str | None = None
    #: When the work ended (answered or failed): a finished job's time stops there.
    ended: float | None = None

    def step(self, **counts: int) -> None:
        self.progress = counts
        if self.cancel.is_set():
            raise Cancelled(f"{self.what} was cancelled")
        if time.monotonic() - self.started > self.deadline_s:
            raise TimedOut(self.late or f"{self.what} did not finish within {self.deadline_s:g} s")

    @property
    def elapsed_s(self) -> float:
        return (time.monotonic() if self.ended is None else self.ended) - self.started


@dataclass
class Job:
    """A request run in the background so that the page can show progress and cancel it."""

    id: str
    work: Work
    state: str = "running"  # running | done | failed
    answer: Answer | None = None
    error: str | None = None
    field: str | None = None

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "progress": dict(self.work.progress),
            "elapsed_s": round(self.work.elapsed_s, 2),
            "document": None if self.answer is None else self.answer.document,
            "exit": 2
            if self.state == "failed"
            else None
            if self.answer is None
            else self.answer.exit,
            "notes": [] if self.answer is None else list(self.answer.notes),
            "error": self.error,
            "field": self.field,
        }


@dataclass(frozen=True)
class Answer:
    """One answer: the CLI's JSON document, its exit status (0 yes, 1 no) and the notes the
    CLI prints on stderr (served in the `X-Meshsat-Notes` header, so the body keeps the
    CLI's shape)."""

    document: dict[str, Any]
    exit: int
    notes: tuple[str, ...] = ()


def answered(work: Work, answer: Callable[[Work], Answer]) -> Answer:
    """`answer(work)` with the warnings it raises among its notes, not on the server's
    stderr (`SGLang is not installed here; using ...` belongs to the request that asked
    for the installed release): `warnings_to` keeps them to the request's own context, as
    for the command line's concurrent runs."""
    caught: list[str] = []
    with warnings_to(caught.append):
        result = answer(work)
    extra = tuple(n for n in caught if n not in result.notes)
    return replace(result, notes=(*result.notes, *extra)) if extra else result


class Jobs:
    """The running and recent jobs, bounded: at most `workers` run at once (more is `Busy`)
    and at most `kept` finished ones are remembered (the oldest is forgotten first)."""

    def __init__(self, workers: int = 4, kept: int = 64) -> None:
        self._slots = threading.BoundedSemaphore(workers)
        self._lock = threading.Lock()
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._kept = kept
        self._ids = itertools.count(1)

    def run_now(self, work: Work, answer: Callable[[Work], Answer]) -> Answer:
        """Run `answer` in the caller's thread, holding a worker slot."""
        if not self._slots.acquire(blocking=False):
            raise Busy("the server is busy with other requests; try again in a moment")
        try:
            return answered(work, answer)
        finally:
            self._slots.release()

    def start(
        self,
        work: Work,
        answer: Callable[[Work], Answer],
        fail: Callable[[BaseException], tuple[str, str | None]],
    ) -> Job:
        """Run `answer` in a new thread; `fail` turns an error into (line, field)."""
        if not self._slots.acquire(blocking=False):
            raise Busy("the server is busy with other requests; try again in a moment")
        job = Job(str(next(self._ids)), work)
        with self._lock:
            self._jobs[job.id] = job
            while len(self._jobs) > self._kept:
                oldest = next(iter(self._jobs))
                if self._jobs[oldest].state == "running":
                    break
                del self._jobs[oldest]

        def run() -> None:
            try:
                result = answered(work, answer)
                work.ended = time.monotonic()  # before the state a poller reads: it is final
                job.answer, job.state = result, "done"
            except Exception as exc:
                work.ended = time.monotonic()
                job.error, job.field = fail(exc)
                job.state = "failed"
            finally:
                self._slots.release()

        threading.Thread(target=run, name=f"meshsat-job-{job.id}", daemon=True).start()
        return job

    def get(self, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise InputError(f"no job {job_id!r} (finished jobs are kept for a while only)")
        return job

    def cancel(self, job_id: str) -> Job:
        job = self.get(job_id)
        job.work.cancel.set()
        return job
