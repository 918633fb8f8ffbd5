"""Agreement on a corpus the fixtures never saw: record a release on another seed, replay it.

    PYTHONPATH=. python -m fidelity.heldout 0.5.23 0.5.19 --seed 23 [--n 6000]

The fixtures (tests/fixtures/fidelity) are what meshsat's rules were checked against while
they were written, so agreement on them can flatter. This records each release again with a
seed the fixtures do not use (random corpus, the sweep of every flag choice, native layouts
and targeted records, as `fidelity.record` does) into a temporary file, replays it on the
release's pack and prints the agreement per pack, with every disagreement class. Needs the
release's venv (`make fidelity` builds it); not part of `make test`.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from fidelity.compare import pack_for, replay
from fidelity.record import record


def _pct(a: int, b: int) -> str:
    return f"{100 * a / b:6.2f} %" if b else "    n/a"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("versions", nargs="+")
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--n", type=int, default=6000)
    a = ap.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for v in a.versions:
            path = record(v, a.n, a.seed, out=Path(tmp) / f"{v}.jsonl.gz")
            t, _ = replay(v, path)
            rows.append(t)
            for cls, n in t.classes.most_common():
                print(f"  {v} {n:>4} {cls[:140]}")
    print(f"held-out corpus, seed {a.seed} (the fixtures use seed 0)")
    print(
        f"{'release':<13}{'pack':<13}{'configs':>8}{'SGLang ok':>11}{'verdict':>10}"
        f"{'1st viol.':>11}{'resolved':>10}{'launch':>10}"
    )
    for t in rows:
        print(
            f"{t.version:<13}{pack_for(t.version):<13}{t.n:>8}{_pct(t.sglang_valid, t.n):>11}"
            f"{_pct(t.verdict_agree, t.n):>10}{_pct(t.first_agree, t.both_reject):>11}"
            f"{_pct(t.resolved_agree, t.both_accept):>10}{_pct(t.launch_agree, t.both_accept):>10}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
