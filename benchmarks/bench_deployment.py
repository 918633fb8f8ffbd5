"""How long does a PD deployment take to validate? Prints a table; the README quotes it.

For each public recipe (tests/fixtures/pd/) and for a measured 15-worker deployment of
AIConfigurator's sample (5 prefill + 10 decode servers and a router): `validate_deployment`
warm, against the baseline measured in the same run: the same script read as one job, as
`validate --sglang-file` read it before deployments (`load_layout` + one `validate`: the
same shell parse, one layout). The ratio is what reading every server's layout and model,
validating each and the rules between them cost on top.

Run: .venv/bin/python benchmarks/bench_deployment.py
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from pathlib import Path

from meshsat.solver.deployment.validate import load_server, validate_deployment
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


def median_ms(fn: Callable[[], object], n: int = 15) -> float:
    fn()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def one_job(text: str) -> Callable[[], object]:
    """The baseline: the script read as one job and validated once."""
    load = load_server(None, RELEASE)

    def run() -> None:
        layout = load(LayoutSources(sglang=text))
        validate(layout.config, layout.model, sglang_version=RELEASE)

    return run


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


if __name__ == "__main__":
    main()
