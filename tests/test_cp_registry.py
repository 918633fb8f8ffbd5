"""Strategy names and the process-wide binding."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from meshsat.cp import (
    CPAttentionBackend,
    CPConfigError,
    CPError,
    CPStrategyKind,
    InterleaveStrategy,
    UnknownStrategyError,
    ZigzagStrategy,
    bind_cp_strategy,
    get_cp_strategy,
    get_cp_strategy_kind,
    is_cp_enabled,
    is_interleave,
    is_zigzag,
    reset_cp_strategy,
)
from tests.cp_helpers import local_sim_comms


@pytest.fixture(autouse=True)
def unbound() -> Iterator[None]:
    reset_cp_strategy()
    yield
    reset_cp_strategy()


def test_kind_values_match_sglang_and_only_sglang_names_parse() -> None:
    """SGLang's values 0..2 (ring is this package's 3); `from_string` is SGLang's parser:
    'none' and 'ring' are not strategies a user configures there, `parse` knows every name."""
    assert [(k.cli_value, int(k)) for k in CPStrategyKind] == [
        ("none", 0),
        ("zigzag", 1),
        ("interleave", 2),
        ("ring", 3),
    ]
    assert CPStrategyKind.from_string("zigzag") is CPStrategyKind.ZIGZAG
    assert CPStrategyKind.from_string("interleave") is CPStrategyKind.INTERLEAVE
    for kind in CPStrategyKind:
        assert CPStrategyKind.parse(kind.cli_value) is kind


@pytest.mark.parametrize("name", ["none", "ring", "in-seq-split", "ZIGZAG", "", "round_robin"])
def test_unknown_names_raise_like_sglang(name: str) -> None:
    with pytest.raises(
        UnknownStrategyError,
        match=r"Unknown cp_strategy=.*; expected one of \{'zigzag', 'interleave'\}",
    ):
        CPStrategyKind.from_string(name)


def test_every_error_shares_one_root_that_is_a_value_error() -> None:
    with pytest.raises(CPError):
        CPStrategyKind.from_string("bogus")
    assert issubclass(CPError, ValueError)
    assert CPAttentionBackend.from_string("fa3") is CPAttentionBackend.FLASH_ATTENTION
    assert CPAttentionBackend.from_string("flashinfer") is CPAttentionBackend.VARLEN
    with pytest.raises(UnknownStrategyError, match="Unsupported attention_backend='triton'"):
        CPAttentionBackend.from_string("triton")


def test_binds_only_when_enabled_and_cp_above_one() -> None:
    comm = local_sim_comms(2)[1]
    assert bind_cp_strategy(enable_prefill_cp=False, cp_size=2, cp_strategy="zigzag") is None
    assert bind_cp_strategy(enable_prefill_cp=True, cp_size=1, cp_strategy="zigzag") is None
    assert get_cp_strategy() is None and not is_cp_enabled()
    assert get_cp_strategy_kind() is CPStrategyKind.NONE

    zig = bind_cp_strategy(
        enable_prefill_cp=True, cp_size=2, cp_strategy="zigzag", comm_or_group=comm
    )
    assert isinstance(zig, ZigzagStrategy) and get_cp_strategy() is zig
    assert zig.cp_rank == 1 and is_zigzag() and not is_interleave() and is_cp_enabled()

    inter = bind_cp_strategy(
        enable_prefill_cp=True, cp_size=2, cp_strategy="interleave", comm_or_group=comm
    )
    assert isinstance(inter, InterleaveStrategy) and get_cp_strategy() is inter and is_interleave()

    reset_cp_strategy()
    assert get_cp_strategy() is None and get_cp_strategy_kind() is CPStrategyKind.NONE


def test_bad_arguments_raise_and_keep_the_previous_binding() -> None:
    comm = local_sim_comms(2)[0]
    bound = bind_cp_strategy(
        enable_prefill_cp=True, cp_size=2, cp_strategy="zigzag", comm_or_group=comm
    )
    with pytest.raises(
        CPConfigError, match=r"needs cp_strategy one of 'zigzag', 'interleave'.*; got None"
    ):
        bind_cp_strategy(enable_prefill_cp=True, cp_size=2, cp_strategy=None)
    with pytest.raises(CPConfigError, match="got 'none'"):
        bind_cp_strategy(enable_prefill_cp=True, cp_size=2, cp_strategy="none")
    with pytest.raises(UnknownStrategyError):
        bind_cp_strategy(enable_prefill_cp=False, cp_size=2, cp_strategy="zig-zag")
    with pytest.raises(CPConfigError, match="cp_size must be an int >= 1, got 0"):
        bind_cp_strategy(enable_prefill_cp=True, cp_size=0, cp_strategy="zigzag")
    with pytest.raises(CPConfigError, match="cp_size 4 but the communicator's group has 2 ranks"):
        bind_cp_strategy(
            enable_prefill_cp=True, cp_size=4, cp_strategy="zigzag", comm_or_group=comm
        )
    assert get_cp_strategy() is bound
