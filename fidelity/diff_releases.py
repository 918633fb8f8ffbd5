"""What changed between two recorded releases: flags, step order, and rules (measured).

    python -m fidelity.diff_releases 0.5.19 0.5.23 [--json fidelity/diffs/0.5.19..0.5.23.json]

The raw material for rule packs: both releases ran the *same* generated layouts (the
recorder uses one seed; each release got its own spelling of them), so comparing record
`id` by record `id` shows which verdicts and errors moved. Three parts:
- flags: options added, removed, or changed (choices, default, deprecation) among the
  flags whose dest is a layout field meshsat knows or a field new in the later release
  that the parallel steps read;
- steps: the order of resolution steps each release ran on a default config;
- rules: per-(step, error text) counts in each release (release-only `native` layouts
  included), and the verdict transitions (A's outcome -> B's outcome) on the shared
  layouts, with counts and example ids.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from fidelity.compare import load

HERE = Path(__file__).resolve().parent
LAYOUT_WORDS = (
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "moe",
    "parallel",
    "nnodes",
    "node_rank",
    "eplb",
    "expert",
    "a2a",
    "attention",
    "chunked_prefill",
    "disaggregation",
    "elastic",
    "dwdp",
    "load_balance",
    "cuda_graph",
)


def _layout(dest: str) -> bool:
    return any(re.search(rf"(^|_){w}(_|$)", dest) for w in LAYOUT_WORDS)


def flags(a: str, b: str) -> dict[str, Any]:
    fa = json.loads((HERE / "flags" / f"{a}.json").read_text())
    fb = json.loads((HERE / "flags" / f"{b}.json").read_text())
    by_a = {f["dest"]: f for f in fa["flags"]}
    by_b = {f["dest"]: f for f in fb["flags"]}
    out: dict[str, Any] = {"added": [], "removed": [], "changed": []}
    for d in sorted(set(by_b) - set(by_a)):
        if _layout(d):
            f = by_b[d]
            out["added"].append({"dest": d, "flags": f["flags"], "help": f["help"]})
    for d in sorted(set(by_a) - set(by_b)):
        if _layout(d):
            out["removed"].append(
                {"dest": d, "flags": by_a[d]["flags"], "field_in_b": d in fb["fields"]}
            )
    for d in sorted(set(by_a) & set(by_b)):
        if not _layout(d):
            continue
        ch: dict[str, Any] = {
            k: [by_a[d][k], by_b[d][k]]
            for k in ("flags", "choices", "default", "deprecated", "action")
            if by_a[d][k] != by_b[d][k]
        }
        if ch:
            ch["dest"] = d
            out["changed"].append(ch)
    out["fields_only_in_a"] = sorted(d for d in set(fa["fields"]) - set(fb["fields"]) if _layout(d))
    out["fields_only_in_b"] = sorted(d for d in set(fb["fields"]) - set(fa["fields"]) if _layout(d))
    out["resolution"] = [fa["resolution"], fb["resolution"]]
    return out


def steps(a: str, b: str) -> dict[str, Any]:
    # Pre-pipeline releases name their steps `_handle_x` (methods); compare by `handle_x`.
    sa = [s.lstrip("_") for s in json.loads((HERE / "flags" / f"{a}.json").read_text())["steps"]]
    sb = [s.lstrip("_") for s in json.loads((HERE / "flags" / f"{b}.json").read_text())["steps"]]
    return {
        "a": sa,
        "b": sb,
        "only_in_a": [s for s in sa if s not in sb],
        "only_in_b": [s for s in sb if s not in sa],
    }


def _norm(text: str) -> str:
    return re.sub(r"-?\d+", "N", (text or "").split("\n")[0])[:110]


def _outcome(r: dict[str, Any]) -> str:
    if r["accepted"]:
        return "accept"
    return f"{(r['step'] or '').lstrip('_')}: {_norm(r['error'])}"


def rules(a: str, b: str) -> dict[str, Any]:
    _, ra = load(a)
    _, rb = load(b)
    errs_a = Counter(_outcome(r) for r in ra if not r["accepted"])
    errs_b = Counter(_outcome(r) for r in rb if not r["accepted"])
    trans: Counter[tuple[str, str]] = Counter()
    ex: dict[tuple[str, str], list[int]] = {}
    common = [r for r in ra if not r.get("native")], [r for r in rb if not r.get("native")]
    for x, y in zip(*common, strict=True):
        assert x["id"] == y["id"] and x["config"] == y["config"]
        oa, ob = _outcome(x), _outcome(y)
        if oa != ob:
            trans[(oa, ob)] += 1
            ex.setdefault((oa, ob), []).append(x["id"])
    return {
        "errors_only_in_a": {k: v for k, v in errs_a.most_common() if k not in errs_b},
        "errors_only_in_b": {k: v for k, v in errs_b.most_common() if k not in errs_a},
        "transitions": [
            {"a": k[0], "b": k[1], "count": n, "example_ids": ex[k][:4]}
            for k, n in trans.most_common()
        ],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    report = {
        "a": args.a,
        "b": args.b,
        "flags": flags(args.a, args.b),
        "steps": steps(args.a, args.b),
        "rules": rules(args.a, args.b),
    }
    text = json.dumps(report, indent=1)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
