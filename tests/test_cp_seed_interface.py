"""SGLang's interface (`layers/cp/base.py`), driven the way its callers drive it: keyword by
keyword, through the process-wide binding, on an engine-style forward batch. The oracle for the
numbers is the float64 single-process attention of tests/cp_helpers.py."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import torch

from meshsat import cp
from meshsat.cp import (
    BaseContextParallelMetadata,
    ContextParallelStrategy,
    ContextParallelStrategyKind,
    CPAttentionBackendKind,
    CPBatch,
    CPBatchError,
    CPConfigError,
    CPForwardBatch,
    LayerKV,
    UnknownStrategyError,
)
from meshsat.solver import Config
from tests.cp_helpers import LocalSimComm, local_sim_comms, make_inputs, run_local_ranks, tolerance


@pytest.fixture(autouse=True)
def unbound() -> Iterator[None]:
    cp.reset_cp_strategy()
    yield
    cp.reset_cp_strategy()


def test_the_abstract_methods_have_the_seeds_signatures() -> None:
    """Names, parameter names and defaults an engine passes by keyword."""
    expected = {
        "can_apply": ["self", "num_tokens", "forward_batch"],
        "build_metadata": ["self", "num_tokens", "seqs_len", "extend_seqs_len"],
        "shard_hidden_states": ["self", "x", "forward_batch"],
        "shard_position_ids": ["self", "positions", "forward_batch"],
        "gather_hidden_states": ["self", "x", "forward_batch", "stream"],
        "gather_kv_cache": ["self", "x", "forward_batch", "stream"],
        "shard_per_request": ["self", "extend_seqs_cpu", "extend_seqs"],
        "split_before_forward": ["self", "forward_batch", "input_ids", "positions", "input_embeds"],
        "run_attention": ["self", "q", "forward_batch", "device", "attn_fn", "attention_backend"],
        "materialize_full_kv": ["self", "forward_batch", "layer", "k", "v", "swa_loc"],
        "reindex_attn_metadata": ["self", "core_attn_metadata"],
    }
    for cls in (ContextParallelStrategy, cp.ZigzagCPStrategy, cp.InterleaveCPStrategy):
        for name, params in expected.items():
            sig = inspect.signature(getattr(cls, name))
            assert list(sig.parameters) == params, (cls, name)
        run = inspect.signature(cls.run_attention).parameters["attention_backend"]
        assert run.default is CPAttentionBackendKind.FLASH_ATTENTION
        for name in ("gather_hidden_states", "gather_kv_cache"):
            assert inspect.signature(getattr(cls, name)).parameters["stream"].default is None
    assert BaseContextParallelMetadata() == BaseContextParallelMetadata(total_seq_lens=0, bs=1)


def test_kind_parser_raises_for_none_like_the_seed() -> None:
    with pytest.raises(ValueError, match=r"Unknown cp_strategy='none'"):
        ContextParallelStrategyKind.from_string("none")
    assert ContextParallelStrategyKind.ZIGZAG.cli_value == "zigzag"
    with pytest.raises(ValueError, match="Unsupported attention_backend='torch'"):
        CPAttentionBackendKind.from_string("torch")


@pytest.mark.parametrize(
    "server_args",
    [
        SimpleNamespace(enable_prefill_cp=False, attn_cp_size=2, cp_strategy="bogus"),
        SimpleNamespace(enable_prefill_cp=True, attn_cp_size=1, cp_strategy="bogus"),
        {"enable_prefill_cp": False, "attn_cp_size": 4, "cp_strategy": "none"},
        Config(tp_size=2),
    ],
)
def test_init_binds_nothing_when_cp_is_off_whatever_the_name(server_args: object) -> None:
    assert cp.init_cp_strategy(server_args) is None  # type: ignore[func-returns-value]
    assert cp.get_cp_strategy() is None and not cp.is_cp_enabled()
    assert cp.get_cp_strategy_kind() is ContextParallelStrategyKind.NONE


def test_init_with_cp_on_and_a_bad_name_raises_like_the_seed() -> None:
    comm = local_sim_comms(2)[0]
    args = SimpleNamespace(enable_prefill_cp=True, attn_cp_size=2, cp_strategy="none")
    with pytest.raises(UnknownStrategyError, match=r"Unknown cp_strategy='none'"):
        cp.init_cp_strategy(args, comm_or_group=comm)
    args.cp_strategy = "ring"  # this package's layout, but not an SGLang value
    with pytest.raises(ValueError, match=r"Unknown cp_strategy='ring'"):
        cp.init_cp_strategy(args, comm_or_group=comm)


def test_get_cp_strategy_initialises_lazily_from_the_server_args() -> None:
    """A worker that only registered the server args recovers the binding on first use; a
    meshsat Config carries SGLang's attribute names. With a world of one process group absent,
    the lazy path constructs the strategy as the seed does and finds its group at first use."""
    config = Config(tp_size=2, attn_cp_size=2, enable_prefill_cp=True, cp_strategy="interleave")
    comm = local_sim_comms(2)[1]
    cp.init_cp_strategy(config, comm_or_group=comm)
    bound = cp.get_cp_strategy()
    assert isinstance(bound, cp.InterleaveCPStrategy) and bound.cp_rank == 1
    assert cp.get_cp_strategy() is bound and cp.is_interleave() and not cp.is_zigzag()
    assert not bound.per_layer_attn_cp_comm
    cp.set_global_server_args(
        SimpleNamespace(enable_prefill_cp=True, _is_dsa_model_arch=True, attn_cp_size=1)
    )
    assert bound.per_layer_attn_cp_comm  # SGLang's DSA rule, read from the server args

    cp.reset_cp_strategy()
    cp.set_global_server_args(SimpleNamespace(enable_prefill_cp=True, attn_cp_size=1))
    assert cp.get_cp_strategy() is None  # lazy init ran and bound nothing (cp size 1)
    cp.set_global_server_args(
        SimpleNamespace(enable_prefill_cp=True, attn_cp_size=2, cp_strategy="zigzag")
    )
    lazy = cp.get_cp_strategy()  # constructed like the seed's, with no group in the process
    assert isinstance(lazy, cp.ZigzagCPStrategy) and lazy.cp_size == 2
    with pytest.raises(CPConfigError, match=r"initialise torch\.distributed with cp_size ranks"):
        lazy.cp_rank  # noqa: B018  # first use: the process has no group of 2 ranks


def test_a_forward_through_the_seed_interface_equals_the_oracle() -> None:
    """cp 2, prefixes, GQA: the engine's calls with the seed's keywords, result exact."""
    batch = CPBatch((13, 9), (5, 0))
    x = make_inputs(
        batch, heads=4, kv_heads=2, dim=8, dtype=torch.float32, device=torch.device("cpu"), seed=3
    )
    expected = x.oracle(batch)
    ids = torch.arange(batch.num_tokens)
    positions = torch.arange(batch.num_tokens) + 100

    def rank(comm: LocalSimComm) -> torch.Tensor:
        strategy = cp.ZigzagCPStrategy(cp_size=2, comm=comm)
        fb = CPForwardBatch(
            extend_seq_lens_cpu=list(batch.extend_lens),
            extend_prefix_lens_cpu=list(batch.prefix_lens),
        )
        num_tokens = batch.num_tokens
        assert strategy.can_apply(num_tokens=num_tokens, forward_batch=fb)
        meta = strategy.build_metadata(
            num_tokens=num_tokens, seqs_len=list(batch.seq_lens), extend_seqs_len=[13, 9]
        )
        assert (meta.total_seq_lens, meta.bs) == (sum(batch.seq_lens), 2)
        fb.attn_cp_metadata = meta
        assert (
            strategy.split_before_forward(
                forward_batch=fb, input_ids=ids, positions=positions, input_embeds=None
            )
            is None
        )
        assert fb.cp_v2_input_ids is not None and fb.positions is not None
        mine = meta.rank_tokens[strategy.cp_rank]
        assert torch.equal(fb.cp_v2_input_ids[: mine.numel()], ids[mine])
        q = strategy.shard_hidden_states(x=x.q, forward_batch=fb)
        k = strategy.shard_hidden_states(x=x.k, forward_batch=fb)
        v = strategy.shard_hidden_states(x=x.v, forward_batch=fb)
        kv = LayerKV.from_prefix(batch, x.prefix_k, x.prefix_v)
        strategy.materialize_full_kv(forward_batch=fb, layer=kv, k=k, v=v, swa_loc=None)
        assert strategy.reindex_attn_metadata(core_attn_metadata=object()) is None
        out = strategy.run_attention(
            q=q,
            forward_batch=fb,
            device=q.device,
            attn_fn=strategy.default_attn_fn(fb, kv),
            attention_backend=CPAttentionBackendKind.FLASH_ATTENTION,
        )
        with pytest.raises(CPConfigError, match="swa_loc"):
            strategy.materialize_full_kv(fb, kv, k, v, swa_loc=torch.zeros(1))
        with pytest.raises(CPConfigError, match="streams are CUDA only"):
            strategy.gather_hidden_states(out, fb, stream=object())
        with pytest.raises(CPBatchError, match="immutable"):
            strategy.split_before_forward(CPBatch((1,), (0,)), None, positions)
        return strategy.gather_hidden_states(x=out, forward_batch=fb, stream=None)

    for full in run_local_ranks(2, rank):
        torch.testing.assert_close(full.double(), expected, **tolerance(torch.float32))
