"""How a release spells a layout on its command line, where that differs from meshsat's
internal spelling (one spelling inside, so that every rule reads one field per concept)."""

from __future__ import annotations

from typing import Any

from meshsat.solver.lang.config import Config
from meshsat.solver.lang.fields import CONFIG_SPECS


def spelled(config: Config, attn_dp_spelling: bool) -> dict[str, Any]:
    """The config's fields as a release spells them on its command line: from 0.5.23 on
    (`attn_dp_spelling`), DP attention over N groups is `attn_dp_size = N` with `dp_size` 1,
    where meshsat's internal spelling is `enable_dp_attention` with `dp_size = N`."""
    values = dict(config.__dict__)
    if attn_dp_spelling and values["enable_dp_attention"]:
        # The width is dp_size in meshsat's spelling; a config that already carries the
        # release's own (`--enable-dp-attention --attn-dp-size 2`, or `fix` changing
        # attn_dp_size on such a command) keeps it rather than dp_size's 1.
        width = values["dp_size"] if values["dp_size"] > 1 else values["attn_dp_size"]
        values.update(attn_dp_size=width, dp_size=1, enable_dp_attention=False)
    return {n: values[n] for n in CONFIG_SPECS}
