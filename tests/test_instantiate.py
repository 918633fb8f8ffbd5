"""meshsat.cp.instantiate: from a layout to process groups and a bound strategy.

Tier 2 in one process (gloo, world 1) for the refusals; tier 3 in real processes at world
4 and 6, where every attention-CP group runs a CP attention layer (heads split over the
attention-TP group too) and is compared with single-process float64 attention.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
import torch.distributed as dist

from meshsat.cp import (
    CPConfigError,
    InterleaveStrategy,
    UnknownStrategyError,
    ZigzagStrategy,
    get_cp_strategy,
)
from meshsat.cp.batch import CPBatch
from meshsat.cp.demo import MODEL, TOLERANCE, run_layer
from meshsat.cp.instantiate import instantiate
from meshsat.solver import InvalidLayoutError
from meshsat.solver.groups import GROUP_KINDS
from tests.cp_helpers import spawn_world

CP_ON = {"enable_prefill_cp": True}
WORLD_4: list[dict[str, Any]] = [
    {"tp_size": 4, "attn_cp_size": 2, **CP_ON, "cp_strategy": "zigzag"},
    {"tp_size": 4, "attn_cp_size": 2, **CP_ON, "cp_strategy": "interleave"},
    {"tp_size": 4, "attn_cp_size": 4, **CP_ON, "cp_strategy": "zigzag", "ep_size": 1},
    {"tp_size": 2, "pp_size": 2, "attn_cp_size": 2, **CP_ON, "cp_strategy": "interleave"},
    {
        "tp_size": 4,
        "dp_size": 2,
        "enable_dp_attention": True,
        "attn_cp_size": 2,
        **CP_ON,
        "cp_strategy": "zigzag",
        "moe_dp_size": 2,
        "ep_size": 2,
    },
    {"tp_size": 4},  # no CP: heads over four TP ranks, no strategy bound
]
WORLD_6: list[dict[str, Any]] = [
    {
        "tp_size": 6,
        "dp_size": 3,
        "enable_dp_attention": True,
        "attn_cp_size": 2,
        **CP_ON,
        "cp_strategy": "zigzag",
    },
    {"tp_size": 6, "attn_cp_size": 3, **CP_ON, "cp_strategy": "interleave"},
    {"tp_size": 6, "attn_cp_size": 3, **CP_ON, "cp_strategy": "zigzag"},
    # Plain DP replicas: SGLang's tp % (dp_size·attn_cp_size) forbids CP beside them here.
    {"tp_size": 2, "dp_size": 3},
]
BATCH = CPBatch((40, 29, 61), (0, 7, 13))


def check_layout(rank: int, config: dict[str, Any], seed: int) -> None:
    handle = instantiate(config, model=MODEL)
    plan = handle.plan
    assert handle.coords == plan.ranks[rank]
    for kind in GROUP_KINDS:
        members = handle.members[kind]
        assert rank in members and members in plan.groups[kind]
        assert dist.get_world_size(handle.groups[kind]) == len(members)
        assert dist.get_rank(handle.groups[kind]) == members.index(rank)
    strategy = handle.strategy
    if config.get("enable_prefill_cp") and config.get("attn_cp_size", 1) > 1:
        expected = ZigzagStrategy if config["cp_strategy"] == "zigzag" else InterleaveStrategy
        assert isinstance(strategy, expected) and get_cp_strategy() is strategy
        assert strategy.cp_size == plan.widths.attn_cp
        assert strategy.cp_rank == handle.coords.attn_cp
    else:
        assert strategy is None and get_cp_strategy() is None
    error, used_cp = run_layer(handle, BATCH, seed, torch.float32)
    assert used_cp == (strategy is not None)
    assert error <= TOLERANCE[torch.float32], (config, error)


def layouts_worker(rank: int, world: int, device: torch.device, layouts: list[dict]) -> None:
    torch.set_num_threads(1)
    for i, config in enumerate(layouts):
        check_layout(rank, config, seed=i)


@pytest.mark.multiprocess
@pytest.mark.parametrize("world,layouts", [(4, WORLD_4), (6, WORLD_6)], ids=["world4", "world6"])
def test_instantiate_runs_cp_attention_in_every_group(
    tmp_path: Path, world: int, layouts: list[dict[str, Any]]
) -> None:
    spawn_world(world, layouts_worker, str(tmp_path), torch.device("cpu"), layouts)


@pytest.fixture
def world_of_one(tmp_path: Path) -> Any:
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rdv'}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


def test_invalid_layout_raises_before_any_group(
    world_of_one: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[object] = []
    monkeypatch.setattr(dist, "new_group", lambda *a, **k: made.append(a) or None)
    with pytest.raises(InvalidLayoutError, match=r"\[CP-TP-DIV\]"):
        instantiate({"tp_size": 1, "attn_cp_size": 2})
    with pytest.raises(CPConfigError, match="layout uses 2 GPU"):
        instantiate({"tp_size": 2})
    assert made == []


def test_world_of_one_binds_nothing(world_of_one: None) -> None:
    handle = instantiate({"tp_size": 1, "enable_prefill_cp": True, "cp_strategy": "zigzag"})
    assert handle.strategy is None and handle.members["attn_cp"] == (0,)
    with pytest.raises(CPConfigError, match="rank 3 was asked for"):
        instantiate({}, rank=3)


def test_an_unknown_strategy_is_refused_even_where_cp_is_off(world_of_one: None) -> None:
    """A typo whatever the layout: it used to pass silently when CP was off."""
    with pytest.raises(UnknownStrategyError, match="unknown cp_strategy 'foo'") as caught:
        instantiate({"tp_size": 1}, strategy="foo")
    assert isinstance(caught.value, CPConfigError)


def test_the_demo_layer_runs_without_cached_prefixes(world_of_one: None) -> None:
    """No prefix at all is zero prefix rows, which `view(0, -1, ...)` could not shape."""
    handle = instantiate({"tp_size": 1}, model=MODEL, sglang_version="0.5.23")
    error, _ = run_layer(handle, CPBatch((20, 30), (0, 0)), 0, torch.float32)
    assert error <= TOLERANCE[torch.float32]


def test_needs_an_initialised_process_group() -> None:
    assert not dist.is_initialized()
    with pytest.raises(CPConfigError, match="init_process_group"):
        instantiate({"tp_size": 1})


def test_demo_end_to_end_without_torchrun(capfd: pytest.CaptureFixture[str]) -> None:
    from meshsat.cp.demo import main

    args = [
        "--spawn",
        "2",
        "--set",
        "tp_size=2",
        "--set",
        "attn_cp_size=2",
        "--set",
        "enable_prefill_cp=true",
        "--set",
        "cp_strategy=zigzag",
    ]
    assert main(args) == 0
    # each rank validates the layout; a warning (no SGLang here: the newest pack) is one
    # note from rank 0, not a raw warning per process
    err = capfd.readouterr().err
    assert "Warning" not in err and err.count("note:") <= 1, err
    assert main(["--spawn", "2", "--set", "tp_size=2", "--set", "attn_cp_size=3"]) == 1
    assert main(["--spawn", "2", "--set", "tp_size=4"]) == 2


#: Valid under SGLang 0.5.19's rules; 0.5.23 added DCP-NO-PREFILL-CP, which rejects it.
DCP_WITH_PREFILL_CP = {"tp_size": 2, "attn_cp_size": 2, **CP_ON, "cp_strategy": "zigzag",
                       "dcp_size": 2}  # fmt: skip


def test_the_chosen_pack_validates_the_layout() -> None:
    with pytest.raises(InvalidLayoutError, match="DCP-NO-PREFILL-CP"):
        instantiate(DCP_WITH_PREFILL_CP, sglang_version="0.5.23")
    # 0.5.19's rules pass it: instantiate gets as far as wanting the process group.
    with pytest.raises(CPConfigError, match="init_process_group"):
        instantiate(DCP_WITH_PREFILL_CP, sglang_version="0.5.19")


def test_the_no_sglang_note_names_an_option_the_demo_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`make demo` prints this note from the demo's ranks; each option it suggests must be
    one `python -m meshsat.cp.demo` parses, and the keyword it names one `instantiate`
    takes."""
    import inspect
    import re
    import warnings
    from importlib import metadata

    from meshsat.cp.demo import _parse
    from meshsat.solver.packs import registry

    def not_installed(name: str) -> str:
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(registry.metadata, "version", not_installed)
    registry.installed_pack.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            registry.installed_pack()
    finally:
        registry.installed_pack.cache_clear()
    (note,) = [str(w.message) for w in caught]
    flags = re.findall(r"--[a-z][a-z-]*", note)
    keywords = re.findall(r"([a-z_]+)=", note)
    assert flags == ["--sglang-version"] and keywords == ["sglang_version"], note
    for flag in flags:
        args = _parse([flag, "0.5.19", "--set", "tp_size=2"])
        assert getattr(args, flag[2:].replace("-", "_")) == "0.5.19"
    assert all(k in inspect.signature(instantiate).parameters for k in keywords)


def test_the_demo_runs_under_the_release_it_is_given(capfd: pytest.CaptureFixture[str]) -> None:
    from meshsat.cp.demo import main

    sets = [a for k, v in DCP_WITH_PREFILL_CP.items() for a in ("--set", f"{k}={v}")]
    assert main(["--spawn", "2", *sets, "--sglang-version", "0.5.19"]) == 0
    assert "OK" in capfd.readouterr().out
    with pytest.raises(SystemExit) as bad:
        main(["--sglang-version", "9.9", *sets])
    assert bad.value.code == 2
    assert "unknown SGLang version '9.9'" in capfd.readouterr().err
