"""docker's `--gpus` device list as a server's placement on its machine (HOST-GPU-*).

Oracle: what docker makes of the value: the shell's unquoting (`shlex`), then one CSV
record (`opts/gpus.go` `GpuOpts.Set` reads it with Go's `csv.Reader`), whose `device=`
field lists the machine's GPUs the container gets, in order; the GPUs two servers share
are the intersection of those lists at the ids each server's ranks take (tp 2: 0, 1).
"""

from __future__ import annotations

import csv
import shlex

import pytest

from meshsat.solver.deployment.validate import validate_deployment

LAUNCH = (
    "python3 -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct "
    "--disaggregation-mode {role} --tp 2 --port {port} --host 0.0.0.0"
)


def _script(prefill: str, decode: str) -> str:
    lines = [
        f"docker run -d --gpus {gpus} --network host lmsysorg/sglang:latest "
        + LAUNCH.format(role=role, port=port)
        for role, port, gpus in (("prefill", 30000, prefill), ("decode", 30001, decode))
    ]
    return "\n".join(lines) + "\n"


def _docker_devices(written: str) -> list[int] | None:
    """The machine GPUs docker gives the container for `--gpus WRITTEN`; None where the
    value is no device list docker accepts (a count, `all`, `device=0,1` unquoted: two
    fields, a device and a count, which docker refuses)."""
    fields = next(csv.reader([shlex.split(written)[0]]))
    if len(fields) != 1 or not fields[0].startswith("device="):
        return None
    return [int(i) for i in fields[0].removeprefix("device=").split(",")]


@pytest.mark.parametrize(
    ("prefill", "decode"),
    [
        ("'\"device=0,1\"'", "'\"device=2,3\"'"),  # QA's dk1: apart
        ("'\"device=0,1\"'", "'\"device=1,2\"'"),  # GPU 1 twice
        ("'\"device=3,2\"'", "'\"device=2,3\"'"),  # both on 2, 3
        ("device=0", "device=1"),  # one id each: apart, but tp 2 needs two
        ("all", "all"),
    ],
)
def test_docker_gpu_lists_place_the_servers(prefill: str, decode: str) -> None:
    """QA's dk1: two containers on disjoint `--gpus '"device=..."'` lists were read as both
    on GPUs 0, 1 (HOST-GPU-UNPLACED)."""
    lists = [_docker_devices(v) for v in (prefill, decode)]
    report = validate_deployment(_script(prefill, decode))
    found = {f.rule: f for f in report.findings if f.rule.startswith("HOST-GPU")}
    if lists[0] is None or lists[1] is None:
        assert set(found) == {"HOST-GPU-UNPLACED"}
        return
    shared = set(lists[0][:2]) & set(lists[1][:2])
    assert set(found) == ({"HOST-GPU-OVERLAP"} if shared else set())
    if shared:
        assert (
            f"its GPU(s) {', '.join(map(str, sorted(shared)))}:"
            in found["HOST-GPU-OVERLAP"].message
        )
