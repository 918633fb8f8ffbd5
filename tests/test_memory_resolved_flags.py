"""Every command sizes a layout's memory from its resolved flags (`memory.sizing_flags`).

SGLang resolves flags that size the pools: a PD decode engine turns its radix cache off
(R-DECODE-RADIX), which with `--max-running-requests` gives 0.5.23's request-capped SWA
pool (`kv.SwaRequestCap`). `validate` read the resolved flags; `enumerate`, `fix` and `plan`
read the base as typed, so a decode engine got the capped pool there only with
`--disable-radix-cache` typed. Here validate's memory (`with_memory`) is the reference for
enumerate's streamed columns on layouts whose resolution changes a sizing flag, and the
same launch with every flag typed (no resolution left to do) the reference for all four.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat import solver
from meshsat.solver.cli.memory_options import memory_model, with_memory
from meshsat.solver.enumeration.layouts import EnumerationQuery, Layout
from meshsat.solver.enumeration.memory_columns import MemoryColumns
from meshsat.solver.enumeration.space import DEFAULT_VARY
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.memory import (
    SIZING_FIELDS,
    Memory,
    MemoryModel,
    Parallel,
    flag_options,
    sizing_flags,
)
from meshsat.solver.memory.models import catalogue_config

GPT_OSS = "openai/gpt-oss-20b"
SPEC = ModelSpec.from_hf_config(catalogue_config(GPT_OSS))
PACK = "0.5.23"
#: A PD decode engine that types neither `--disable-radix-cache` nor its decode radix flag.
DECODE = {"disaggregation_mode": "decode", "max_running_requests": 8}


def _figures(m: Memory) -> tuple[float, int, int, bool]:
    return round(m.weights_gib, 2), m.kv_tokens, m.max_requests, m.fits


def _validated(base: dict[str, Any], values: dict[str, Any]) -> Memory:
    """validate --gpu H200's memory for the layout launched with `base` and `values`."""
    report = solver.validate(Config.model_validate({**base, **values}), SPEC, sglang_version=PACK)
    _, mem = with_memory(report, GPT_OSS, "H200", None, None, PACK)
    assert mem is not None
    return mem


def _columns(
    base: dict[str, Any], gpus: int, vary: tuple[str, ...] = DEFAULT_VARY, limit: int = 12
) -> list[tuple[Layout, tuple[Any, ...]]]:
    """Enumerate's streamed memory columns (H200, `enumerate --gpu`'s model) per layout."""
    e = EnumerationQuery.of(base=base, model=SPEC, vary=vary, sglang_version=PACK).enumerator()
    mm = memory_model(GPT_OSS, "H200", None, None, PACK)
    assert mm is not None
    n = len(e.columns)
    out = []
    for row in MemoryColumns(e, mm).rows(e.rows(gpus)):
        out.append((Layout(row[:n], e.shape), row[n:]))
        if len(out) >= limit:
            break
    return out


def test_a_decode_engine_gets_the_capped_pool_without_typing_the_radix_cache_off() -> None:
    """tp 1 on H200: the capped pool (4,104 SWA tokens: 257 · 8 + 128 · 16 transfer slots)
    and 4,911,824 + more full tokens in enumerate as in validate, and as with
    `--disable-radix-cache` typed; the ratio's pool (as the typed base sized it) differs."""
    rows = [(lay, cols) for lay, cols in _columns(DECODE, 1) if lay.values["pp_size"] == 1]
    assert rows
    lay, cols = rows[0]
    mem = _validated(DECODE, lay.values)
    assert mem.swa_tokens == 257 * 8 + 128 * 16 == 4104
    assert tuple(cols) == _figures(mem)
    typed_off = _validated({**DECODE, "disable_radix_cache": True}, lay.values)
    assert _figures(typed_off) == _figures(mem)
    as_typed = MemoryModel(GPT_OSS, "H200", pack=PACK, **flag_options(DECODE, PACK))
    assert as_typed.of(Parallel.from_resolved(lay.config, lay.derived)).kv_tokens != cols[1]


@settings(max_examples=12, deadline=None)
@given(
    mode=st.sampled_from(("null", "prefill", "decode")),
    running=st.sampled_from((None, 8)),
    radix_off=st.booleans(),
    decode_radix=st.booleans(),
    overlap_off=st.booleans(),
    gpus=st.sampled_from((1, 2)),
)
def test_enumerate_sizes_each_layout_as_validate_does(
    mode: str, running: int | None, radix_off: bool, decode_radix: bool, overlap_off: bool,
    gpus: int,
) -> None:  # fmt: skip
    base: dict[str, Any] = {
        "disaggregation_mode": mode,
        "max_running_requests": running,
        "disable_radix_cache": radix_off,
        "disable_overlap_schedule": overlap_off,
    }
    if mode == "decode":
        base["disaggregation_decode_enable_radix_cache"] = decode_radix
    for lay, cols in _columns(base, gpus):
        assert tuple(cols) == _figures(_validated(base, lay.values)), lay.values


def test_flags_a_row_holds_itself_size_that_row() -> None:
    """`disaggregation_mode` varied: each row's radix cache resolves on its own (a
    dependent column), and each row is sized by its own model (`MemoryModel.with_flags`)."""
    base = {"max_running_requests": 8}
    rows = _columns(base, 1, vary=("tp_size", "disaggregation_mode"), limit=100)
    modes = {lay.values["disaggregation_mode"] for lay, _ in rows}
    assert modes >= {"null", "decode"}
    kv = {}
    for lay, cols in rows:
        assert tuple(cols) == _figures(_validated(base, lay.values)), lay.values
        kv[lay.values["disaggregation_mode"]] = cols[1]
    assert kv["decode"] != kv["null"]


def test_fix_keeps_a_decode_engine_that_loads_as_resolved() -> None:
    """A `--swa-full-tokens-ratio` so small that the ratio's SWA pool cannot hold the
    window: with the radix cache on it does not start (MEM-FIT), as a PD decode engine it
    runs the capped pool and loads. fix sized it with the radix cache as typed (on) and
    searched for another layout; now it keeps the input, as validate judges it."""
    launch = {"swa_full_tokens_ratio": 1e-5}
    mm = memory_model(GPT_OSS, "H200", None, None, PACK, launch=launch)
    assert mm is not None
    cfg = Config.model_validate({**DECODE, "tp_size": 1})
    report = solver.validate(cfg, SPEC, sglang_version=PACK)
    _, mem = with_memory(report, GPT_OSS, "H200", None, None, PACK, launch=launch)
    assert mem is not None and mem.fits
    null = Config.model_validate({**DECODE, "disaggregation_mode": "null", "tp_size": 1})
    _, refused = with_memory(
        solver.validate(null, SPEC, sglang_version=PACK), GPT_OSS, "H200", None, None, PACK,
        launch=launch,
    )  # fmt: skip
    assert refused is not None and not refused.fits
    result = solver.fix(cfg, SPEC, memory=mm, sglang_version=PACK)
    assert result.valid_input and result.best.changes == ()


def test_plan_layouts_size_rows_as_validate_does() -> None:
    from meshsat.solver.cli.plan_cmd import plan_layouts
    from meshsat.solver.memory.gpus import gpu

    rows = plan_layouts(GPT_OSS, gpu("H200"), 2, top=3, sglang_version=PACK)
    assert rows
    for row in rows:
        values = {
            "tp_size": row.tp, "pp_size": row.pp, "dp_size": row.dp, "ep_size": row.ep,
            "enable_dp_attention": row.dp_attention, "attn_cp_size": row.attn_cp,
            "dcp_size": row.dcp,
        }  # fmt: skip
        mem = _validated({**gpu("H200").layout_fields}, values)
        assert (row.weights_gib, row.kv_tokens_per_pool, row.max_requests) == (
            round(mem.weights_gib, 2),
            mem.max_total_num_tokens,
            mem.max_requests,
        )


def test_disagg_decode_roles_are_sized_as_decode_engines() -> None:
    """plan --disagg's decode role: its layouts' memory is a decode engine's, the same as a
    model built with every decode flag typed (`--disable-radix-cache` included)."""
    from meshsat.solver.perf import PerfModel
    from meshsat.solver.perf.disagg import role_layouts

    pm = PerfModel(GPT_OSS, "H200", memory_options={"pack": PACK})
    typed = {**DECODE, "disable_radix_cache": True}
    reference = MemoryModel(
        GPT_OSS, "H200", context_length=pm.memory.context_length, pack=PACK,
        raise_default_fraction=True, **flag_options(typed, PACK),
    )  # fmt: skip
    layouts = solver.enumerate(2, base=DECODE, model=SPEC, up_to=True, sglang_version=PACK)
    roles = role_layouts(layouts, pm, "decode")
    assert roles
    for role in roles:
        assert role.memory == reference.of(role.parallel)
    assert roles[0].memory != pm.memory.of(roles[0].parallel)


@pytest.mark.parametrize(
    "base", [DECODE, {"moe_a2a_backend": "deepep", "deepep_mode": "normal", "tp_size": 2}]
)
def test_sizing_flags_read_the_graph_flags_as_typed(base: dict[str, Any]) -> None:
    """DeepEP's normal mode turns the CUDA graphs off after the default fraction is sized
    (R-A2A-DISPATCH-MODE): the sizing flags keep the typed graph flags, and hold nothing
    of the layout but `SIZING_FIELDS`, the only fields `flag_options` may read."""
    from meshsat.solver.memory.sizing import Sizing

    report = solver.validate(Config.model_validate(base), SPEC, sglang_version=PACK)
    flags = sizing_flags(report.resolved, report.config.model_dump())
    assert set(flags) == set(SIZING_FIELDS)
    assert flags["disable_cuda_graph"] is False
    assert flags["disable_radix_cache"] is (base is DECODE)
    with pytest.raises(ValueError, match="SIZING_FIELDS"):
        Sizing(report.resolved).get("tp_size")
