"""How long does a PD deployment take to validate? Prints a table; the README quotes it.

For each public recipe (tests/fixtures/pd/) and for a measured 15-worker deployment of
AIConfigurator's sample (5 prefill + 10 decode servers and a router): `validate_deployment`
warm, against the baseline measured in the same run: the same script read as one job, as
`validate --sglang-file` read it before deployments (`load_layout` + one `validate`: the
same shell parse, one layout). The ratio is what reading every server's layout and model,
validating each and the rules between them cost on top.

Second table: `meshsat groups --json --sglang-file` (in-process, warm) on each recipe's first
server alone, a script that names PD flags but is one job, against the same server with its
`--disaggregation-*` flags cut (a script the deployment test does not parse) in the same run.
The ratio is what the PD flags cost the command: its reading the script again (before: three
reads and three parses; now one of each).

Run: PYTHONPATH=. .venv/bin/python benchmarks/bench_deployment.py
"""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Callable
from pathlib import Path

from timing import interleaved_medians, median_seconds

from meshsat.solver.cli import main as cli
from meshsat.solver.deployment.reader import group_servers
from meshsat.solver.deployment.validate import load_server, validate_deployment
from meshsat.solver.inputs.launch import LaunchCommand, read_launch_commands
from meshsat.solver.inputs.layout_input import LayoutSources
from meshsat.solver.validation.validate import validate

FIXTURES = Path(__file__).parent.parent / "tests" / "fixtures" / "pd"
RELEASE = "0.5.23"


def measured() -> str:
    """5 prefill servers (TP 8, DP attention, EP 8) and 10 decode servers and a router."""
    lines, urls = [], []
    for role, n, port, layout in (
        ("prefill", 5, 30000, "--tp 8 --dp 8 --enable-dp-attention --ep 8"),
        ("decode", 10, 30001, "--tp 8 --dp 8 --enable-dp-attention --ep 8"),
    ):
        for i in range(n):
            host = f"10.0.{port % 10}.{i + 1}"
            urls.append(f"--{role} http://{host}:{port}")
            lines.append(
                f"python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V3 "
                f"--disaggregation-mode {role} --host {host} --port {port} {layout}"
            )
    lines.append("python -m sglang_router.launch_router --pd-disaggregation " + " ".join(urls))
    return "\n".join(lines) + "\n"


def median_ms(fn: Callable[[], object]) -> float:
    return 1e3 * median_seconds(fn, 15, warmup=1)


def one_job(text: str) -> Callable[[], object]:
    """The baseline: the script read as one job and validated once."""
    load = load_server(None, RELEASE)

    def run() -> None:
        layout = load(LayoutSources(sglang=text))
        validate(layout.config, layout.model, sglang_version=RELEASE)

    return run


def first_server(text: str, *, pd_flags: bool) -> str:
    """The script's first server alone, one line per node (its `--disaggregation-*` flags
    and their values cut without `pd_flags`)."""
    launches = tuple(c for c in read_launch_commands(text, routers=True) if not c.router)
    _, indices = group_servers(launches)[0]
    return "".join(_line(launches[i], pd_flags) for i in indices)


def _line(command: LaunchCommand, pd_flags: bool) -> str:
    words = [w.text for w in command.words]
    kept: list[str] = []
    i = 0
    while i < len(words):
        word = words[i]
        i += 1
        if pd_flags or not word.startswith("--disaggregation-"):
            kept.append(word)
        elif "=" not in word and i < len(words) and not words[i].startswith("--"):
            i += 1  # the cut flag's value
    return " ".join([command.program, *kept]) + "\n"


def groups_command(path: Path) -> Callable[[], object]:
    def run() -> None:
        with contextlib.suppress(SystemExit):
            cli(["groups", "--json", "--sglang-file", str(path)], stdout=io.StringIO(),
                stderr=io.StringIO())  # fmt: skip

    return run


def one_server_table(cases: dict[str, str], folder: Path) -> None:
    print("\n`groups --sglang-file` on each recipe's first server (median of 15 warm runs,")
    print("the two scripts timed in turn)")
    print(f"{'script':<38} {'PD flags':>11} {'cut':>11} {'ratio':>6}")
    for name, text in cases.items():
        paths = []
        for pd_flags in (True, False):
            path = folder / f"{pd_flags}-{name}"
            path.write_text(first_server(text, pd_flags=pd_flags))
            paths.append(path)
        m = interleaved_medians(
            {"ours": groups_command(paths[0]), "base": groups_command(paths[1])}, 15, warmup=1
        )
        ours, base = 1e3 * m["ours"], 1e3 * m["base"]
        print(f"{name:<38} {ours:>9.2f}ms {base:>9.2f}ms {ours / base:>6.2f}")


def main() -> None:
    cases = {p.name: p.read_text() for p in sorted(FIXTURES.glob("*.sh"))}
    cases["measured 5P+10D (AIC sample shape)"] = measured()
    print(f"bench_deployment (SGLang {RELEASE} pack, median of 15 warm runs)")
    print(f"{'script':<38} {'servers':>7} {'deployment':>11} {'one job':>11} {'ratio':>6}")
    for name, text in cases.items():
        report = validate_deployment(text, sglang_version=RELEASE)
        ours = median_ms(lambda t=text: validate_deployment(t, sglang_version=RELEASE))
        base = median_ms(one_job(text))
        print(
            f"{name:<38} {len(report.roles):>7} {ours:>9.2f}ms {base:>9.2f}ms {ours / base:>6.2f}"
        )
    with tempfile.TemporaryDirectory() as folder:
        one_server_table(cases, Path(folder))


if __name__ == "__main__":
    main()
