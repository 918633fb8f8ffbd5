"""Agreement of meshsat with the real SGLang, per recorded release (a table, not a test).

    PYTHONPATH=. python benchmarks/bench_fidelity.py

For each fixture in tests/fixtures/fidelity/ (recorded by `make fidelity`): how many
configs SGLang accepts, how often meshsat's verdict agrees (meshsat's resolution-stage
rules against SGLang's argument resolution), how often the resolved layout fields agree
where both accept, how often meshsat's first violation is the error SGLang stopped at
where both reject, and how often meshsat's check_server_args() rules agree with the
release's own check_server_args() (run by the recorder on what resolution accepted).
"load only" counts configs both accept that meshsat rejects only for a rule SGLang checks
when it loads the model on GPUs (no recorder can run it; listed in disagreements/).
Each release is judged on its own pack where meshsat has one, else on the seed's: those
rows show how far the nearest pack is from a release it does not model.
"rules" is how many of the pack's rules (errors and advice) some record breaks, of
those a record can reach (fidelity/targets.py lists the others with the reason).
Also the replay speed (median of 3 runs).
"""

from __future__ import annotations

from timing import timed

from fidelity.compare import load, pack_for, recorded_versions, replay
from fidelity.targets import reached, unreached


def pct(a: int, b: int) -> str:
    return f"{100 * a / b:6.2f} %" if b else "    n/a"


def _ids(version: str) -> set[str]:
    from meshsat.solver.packs import get_pack

    return {r.id for r in get_pack(version).constraints}


def main() -> None:
    print(
        f"{'release':<13}{'pack':<13}{'configs':>8}{'SGLang ok':>11}{'verdict':>10}"
        f"{'resolved':>10}{'1st viol.':>10}{'launch':>10}{'load only':>10}{'classes':>9}"
        f"{'rules':>9}{'replay ms':>11}"
    )
    for v in recorded_versions():
        runs = timed(lambda v=v: replay(v), 3)
        t, _ = runs.result
        ids = _ids(v)
        hit = reached(v, load(v)[1]) & ids
        out_of_reach = sum(why != "not reached" for why in unreached(v, hit).values())
        rules = f"{len(hit)}/{len(ids) - out_of_reach}"
        print(
            f"{v:<13}{pack_for(v):<13}{t.n:>8}{pct(t.sglang_valid, t.n):>11}"
            f"{pct(t.verdict_agree, t.n):>10}{pct(t.resolved_agree, t.both_accept):>10}"
            f"{pct(t.first_agree, t.both_reject):>10}{pct(t.launch_agree, t.both_accept):>10}"
            f"{t.model_load_only:>10}{len(t.classes):>9}{rules:>9}"
            f"{1000 * runs.median:>11.0f}"
        )


if __name__ == "__main__":
    main()
