"""Each release's own words for a rule whose condition is unchanged across releases,
held to the errors the releases raised (the recorded fidelity fixtures)."""

from __future__ import annotations

from itertools import islice

import pytest

from fidelity.compare import iter_records, judge

#: How each release words FlashInfer all-to-all's topology check (handle_a2a_moe).
FLASHINFER_TOPOLOGY = (
    "Flashinfer MoE A2A is only supported with dp_size",
    "Flashinfer MoE A2A requires",
)


@pytest.mark.parametrize("release", ["0.5.18", "0.5.19", "0.5.23"])
def test_flashinfer_a2a_topology_is_said_in_the_releases_words(release: str) -> None:
    """0.5.23 says "Flashinfer MoE A2A requires --attn-dp-size equal to --tp-size, except for
    Muse Spark ..."; 0.5.18 and 0.5.19 "... only supported with dp_size == tp_size and
    --enable-dp-attention". meshsat's first violation is the rule, in those words."""
    recorded = (
        r for r in iter_records(release) if (r.get("error") or "").startswith(FLASHINFER_TOPOLOGY)
    )
    records = list(islice(recorded, 4))
    assert records, release
    for rec in records:
        outcome = judge(rec, release)
        assert outcome.errors[0] == "TOPO-A2A-FLASHINFER"
        assert outcome.first_message == rec["error"]
