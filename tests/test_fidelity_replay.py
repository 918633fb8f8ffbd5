"""meshsat against the real SGLang, through recorded verdicts (no SGLang needed here).

The oracle is SGLang itself: `python -m fidelity.record` ran each release's own
`ServerArgs` resolution on generated configs and stored its verdict, the step that
raised and the resolved layout fields in tests/fixtures/fidelity/. meshsat models one
release today (the seed's, SEED_RELEASE); its verdicts must agree with that release's
record except for the disagreement classes listed, with a measured reason, in
fidelity/disagreements/<version>.json. Other releases are only checked for shape here:
their packs do not exist yet.
"""

from __future__ import annotations

import json

import pytest

from fidelity.compare import DISAGREEMENTS, listed, load, recorded_versions, replay

SEED_RELEASE = "0.5.19"


def test_every_release_fixture_is_complete_and_reaches_both_verdicts() -> None:
    versions = recorded_versions()
    assert SEED_RELEASE in versions
    for v in versions:
        header, records = load(v)
        assert header["sglang"] == v and header["n"] == len(records) >= 5000
        accepted = sum(r["accepted"] for r in records)
        assert 0.2 <= accepted / len(records) <= 0.9, (v, accepted)
        assert not any("harness_error" in r for r in records), v
        for r in records:
            assert ("resolved" in r) == r["accepted"]
            assert r["accepted"] or (r["step"] and r["error"] is not None)


#: Measured on the recorded fixtures (README, Performance): the replay may not fall below.
FLOORS = {"0.5.19": (0.9625, 0.995), "0.5.23": (0.9525, 0.993)}


@pytest.mark.parametrize("version", sorted(FLOORS))
def test_release_disagreements_are_exactly_the_listed_ones(version: str) -> None:
    """Every release with its own pack: each disagreement class listed with its reason, and
    verdict and first-violation agreement at least what was measured."""
    table, _ = replay(version)
    verdict, first = FLOORS[version]
    assert table.verdict_agree / table.n >= verdict
    assert table.first_agree / table.both_reject >= first
    explained = listed(version)
    unexplained = {c: n for c, n in table.classes.items() if c not in explained}
    assert not unexplained, f"disagreements with SGLang {version} not listed: {unexplained}"
    stale = {c for c in explained if c not in table.classes}
    assert not stale, f"listed disagreements that no longer occur (remove them): {stale}"
    for c, n in table.classes.items():
        assert explained[c]["count"] == n, (c, explained[c]["count"], n)


@pytest.mark.parametrize("version", sorted(FLOORS))
def test_disagreement_file_gives_a_reason_for_every_class(version: str) -> None:
    data = json.loads((DISAGREEMENTS / f"{version}.json").read_text())
    assert data["sglang"] == version
    for c in data["classes"]:
        assert c["reason"].strip() not in ("", "UNEXPLAINED") and c["example_ids"], c["class"]
