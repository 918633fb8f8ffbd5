"""How a release spells a layout on its command line, where that differs from meshsat's
internal spelling (one spelling inside, so that every rule reads one field per concept)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from meshsat.solver.lang.config import Config
from meshsat.solver.lang.fields import CONFIG_SPECS

#: Spelled together in a release that has `--attn-dp-size`: there DP attention over N groups
#: is `--attn-dp-size N` (`dp_size` counts replicas), and `--enable-dp-attention --dp-size N`
#: the deprecated form; typing one of them is typing the group. Inside meshsat `dp_size` is
#: the width whenever `enable_dp_attention` is on.
DP_GROUP = ("dp_size", "enable_dp_attention", "attn_dp_size")


def spelled(config: Config | Mapping[str, Any], attn_dp_spelling: bool) -> dict[str, Any]:
    """The config's fields as a release spells them on its command line: from 0.5.23 on
    (`attn_dp_spelling`), DP attention over N groups is `attn_dp_size = N` with `dp_size` 1,
    where meshsat's internal spelling is `enable_dp_attention` with `dp_size = N`. A mapping
    (a resolved environment, which also holds model facts) is spelled the same way."""
    values = dict(config.__dict__ if isinstance(config, Config) else config)
    if attn_dp_spelling and values["enable_dp_attention"]:
        # The width is dp_size in meshsat's spelling; a config that already carries the
        # release's own (`--enable-dp-attention --attn-dp-size 2`, or `fix` changing
        # attn_dp_size on such a command) keeps it rather than dp_size's 1.
        width = values["dp_size"] if values["dp_size"] > 1 else values["attn_dp_size"]
        values.update(attn_dp_size=width, dp_size=1, enable_dp_attention=False)
    return {n: values[n] for n in CONFIG_SPECS}


def released_fields(
    fields: tuple[str, ...],
    typed: frozenset[str] | set[str],
    dp_attention: bool,
    attn_dp_spelling: bool,
) -> tuple[str, ...]:
    """A rule's fields as the release names them: from 0.5.23 on, with DP attention on, the
    internal `enable_dp_attention`/`dp_size` are the DP-attention group, named as the user
    typed it (`--attn-dp-size N`, or the deprecated `--enable-dp-attention --dp-size N`),
    `attn_dp_size` when they typed neither."""
    internal = {"enable_dp_attention", "dp_size"}
    if not (attn_dp_spelling and dp_attention and internal & set(fields)):
        return fields
    typed_group = [f for f in (*fields, *DP_GROUP) if f in typed and f in DP_GROUP]
    group = list(dict.fromkeys(typed_group)) or ["attn_dp_size"]
    out: list[str] = []
    for f in fields:
        for name in group if f in internal or f == "attn_dp_size" else [f]:
            if name not in out:
                out.append(name)
    return tuple(out)
