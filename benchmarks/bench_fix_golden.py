"""The golden fix table: does `fix`'s first answer match an operator's, case by case?

    PYTHONPATH=. .venv/bin/python benchmarks/bench_fix_golden.py

tests/fix_golden.py lists broken layouts with every fix an experienced operator would
accept (tests/test_fix_golden.py asserts each). This prints the table with what `fix`
answered and its time (median of 3 runs, in one process).
"""

from __future__ import annotations

from timing import timed

from meshsat.solver.repair.fix import fix
from meshsat.solver.repair.objective import same_value
from tests.enum_cases import MODELS
from tests.fix_golden import CASES


def main() -> None:
    passed = 0
    print(f"{'case':<38}{'ok':>4}{'ms':>8}  first fix")
    for case in CASES:
        model = MODELS[case.model] if case.model else None
        runs = timed(lambda case=case, model=model: fix(case.layout, model), 3)
        report = runs.result
        got = {c.field: c.new for c in report.best.changes} if report.fixes else {}
        ok = any(
            got.keys() == want.keys() and all(same_value(got[k], want[k]) for k in want)
            for want in case.accepted
        )
        passed += ok
        ms = 1000 * runs.median
        print(f"{case.name:<38}{'yes' if ok else 'NO':>4}{ms:>8.0f}  {got}")
    print(f"{passed}/{len(CASES)} first fixes are an operator's")


if __name__ == "__main__":
    main()
