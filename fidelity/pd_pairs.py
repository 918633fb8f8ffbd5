"""Record what a real SGLang release says about a prefill/decode pair: the oracle for the
pair rules of `meshsat.solver.catalogue.pd_pairs` (tests/test_deployment_oracle.py).

Runs inside a release's venv (0.5.18, 0.5.19, 0.5.23; `fidelity/cpu_site` on PYTHONPATH
for the torchvision stand-in):

    PYTHONPATH=fidelity/cpu_site ~/.cache/meshsat-fidelity/0.5.23/bin/python \\
        fidelity/pd_pairs.py > tests/fixtures/pd_oracle/0.5.23.json

The decode side's check of its prefill is `CommonKVManager.try_ensure_parallel_info`
(sglang/srt/disaggregation/common/conn.py): it fetches the prefill's parallel info from the
bootstrap server, compares page size and KV dtype, and maps ranks (`_resolve_rank_mapping`:
attention TP, CP, PP). Both are called here on a stand-in decode manager (the attributes
they read, nothing else) with the HTTP fetch answered by the prefill's info, for every
combination of a small grid; each case records whether the release raises (and its
message) and what it warns. Nothing is transferred: what is decided from arguments alone.
"""

from __future__ import annotations

import itertools
import json
import logging
import sys
import types
from typing import Any


def _case(conn: Any, p: dict[str, Any], d: dict[str, Any]) -> dict[str, Any]:
    info = {
        "attn_tp_size": p["attn_tp"],
        "attn_cp_size": p["attn_cp"],
        "dp_size": 1,
        "pp_size": p["pp"],
        "page_size": p["page_size"],
        "kv_cache_dtype": p["kv_cache_dtype"],
        "follow_bootstrap_room": False,
    }
    fields = conn.PrefillServerInfo.__dataclass_fields__
    info = {k: v for k, v in info.items() if k in fields}

    class Response:
        status_code = 200
        text = ""

        def json(self) -> dict[str, Any]:
            return info

    conn.requests.get = lambda *a, **k: Response()
    kv_args = types.SimpleNamespace(page_size=d["page_size"], engine_rank=0, state_types=())
    me = types.SimpleNamespace(
        prefill_info_table={},
        kv_args=kv_args,
        kv_cache_dtype_str=d["kv_cache_dtype"],
        attn_tp_size=d["attn_tp"],
        attn_cp_size=1,
        attn_cp_rank=0,
        dcp_size=d["dcp"],
        pp_size=d["pp"],
        pp_rank=0,
        is_mla_backend=d["mla"],
        is_hybrid_mla_backend=False,
        enable_all_cp_ranks_for_transfer=False,
        kv_layout=None,
        dsv41_spec_layout=None,
    )
    me._resolve_rank_mapping = lambda i: conn.CommonKVManager._resolve_rank_mapping(me, i)
    warnings: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                warnings.append(record.getMessage())

    handler = Catch()
    conn.logger.addHandler(handler)
    if hasattr(conn.logger, "warning_once"):  # once per process would hide later cases
        conn.logger.warning_once = conn.logger.warning
    try:
        conn.CommonKVManager.try_ensure_parallel_info(me, "prefill:8998")
        outcome, message = "ok", ""
    except (RuntimeError, AssertionError, ValueError) as exc:
        text = exc.args[0] if exc.args else ""
        outcome, message = "error", str(text[0] if isinstance(text, tuple) else text)
    finally:
        conn.logger.removeHandler(handler)
    return {"prefill": p, "decode": d, "outcome": outcome, "message": message, "warnings": warnings}


#: 0.4.6.post5's layouts on each side: (tp_size, dp_size); dp > 1 is DP attention.
_LAYOUTS_046 = ((1, 1), (2, 1), (3, 1), (4, 1), (8, 1), (2, 2), (4, 2), (8, 2), (8, 4), (8, 8))


def _receiver_046(cls: type, methods: dict[str, Any], mgr: Any) -> tuple[str, str]:
    """Build one 0.4.6.post5 receiver (the decode's side of a transfer) for every decode
    engine rank; the first that fails gives the outcome."""
    receiver = type("Receiver", (cls,), methods)
    for rank in range(mgr.tp_size):
        mgr.kv_args.engine_rank = rank
        mgr.attn_tp_rank = rank % mgr.tp_size_of_dp
        try:
            receiver(mgr, "prefill:8998", 7)
        except AssertionError as exc:
            return "error", str(exc.args[0]) if exc.args else ""
    return "ok", ""


def _bootstrap_of(prefill_tp: int) -> Any:
    """`requests.get` as 0.4.6.post5's bootstrap server of a prefill with `prefill_tp`
    ranks answers it: every rank's info at `/route`, one rank's at `?engine_rank=`."""

    class Response:
        def __init__(self, rank: int | None) -> None:
            self.status_code = 200 if rank is None or rank < prefill_tp else 404
            self.text = ""

        def json(self) -> dict[str, Any]:
            return {str(r): {"rank": r} for r in range(prefill_tp)}

    def get(url: str, *a: Any, **k: Any) -> Any:
        rank = url.partition("engine_rank=")[2]
        return Response(int(rank) if rank else None)

    return get


def _cases_046(logger: Any) -> list[dict[str, Any]]:
    """0.4.6.post5 checks its prefill in the receivers' constructors: Mooncake's
    (`MooncakeKVReceiver.__init__`) and NIXL's (`NixlKVReceiver._get_bootstrap_info_from_
    server`, whose assertion is logged and ends in `assert self.bootstrap_info is not None`).
    The network calls are answered as a prefill of that layout would."""
    from sglang.srt.disaggregation.mooncake.conn import MooncakeKVReceiver
    from sglang.srt.disaggregation.nixl import conn as nixl

    logged: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            logged.append(record.getMessage())

    nixl.logger.addHandler(Catch())
    cases = []
    for (p_tp, p_dp), (d_tp, d_dp), mla in itertools.product(
        _LAYOUTS_046, _LAYOUTS_046, (False, True)
    ):
        if p_tp % p_dp or d_tp % d_dp:
            continue
        mgr = types.SimpleNamespace(
            tp_size=d_tp, dp_size=d_dp, tp_size_of_dp=d_tp // d_dp, attn_tp_rank=0,
            enable_dp_attention=d_dp > 1, is_mla_backend=mla,
            kv_args=types.SimpleNamespace(engine_rank=0),
            prefill_tp_size_table={}, prefill_dp_size_table={}, connection_pool={},
            prefill_peer_infos={}, get_session_id=lambda: "s", update_status=lambda *a: None,
        )  # fmt: skip
        outcome, message = _receiver_046(
            MooncakeKVReceiver,
            {
                "_get_prefill_dp_size_from_server": lambda self, t=p_tp, d=p_dp: (t, d),
                "_get_bootstrap_info_from_server": lambda self, rank, group: {},
                "_register_kv_args": lambda self: None,
            },
            mgr,
        )
        side = {"tp": p_tp, "dp": p_dp}
        decode = {"tp": d_tp, "dp": d_dp, "mla": mla}
        cases.append({"backend": "mooncake", "prefill": side, "decode": decode,
                      "outcome": outcome, "message": message, "warnings": []})  # fmt: skip
        nixl.requests.get = _bootstrap_of(p_tp)
        del logged[:]
        mgr = types.SimpleNamespace(**{**vars(mgr), "prefill_peer_infos": {}})
        outcome, message = _receiver_046(nixl.NixlKVReceiver, {}, mgr)
        said = [m for m in logged if "Only support" in m]
        cases.append({"backend": "nixl", "prefill": side, "decode": decode, "outcome": outcome,
                      "message": said[0] if said else message, "warnings": []})  # fmt: skip
    return cases


def main() -> None:
    from sglang.version import __version__

    if __version__ == "0.4.6.post5":
        from sglang.srt.disaggregation.mooncake import conn as mooncake

        cases = _cases_046(mooncake.logger)
        sys.stdout.write(f'{{"release": {json.dumps(__version__)}, "cases": [\n')
        sys.stdout.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
        sys.stdout.write("\n]}\n")
        return
    from sglang.srt.disaggregation.common import conn

    cases = []
    grid = itertools.product(
        (1, 2, 3, 4, 6, 8),  # prefill attention TP
        (1, 2, 3, 4, 6, 8),  # decode attention TP
        (1, 2),  # prefill PP
        (1, 2, 4),  # decode PP
        (False, True),  # MLA
    )
    for p_tp, d_tp, p_pp, d_pp, mla in grid:
        p = {"attn_tp": p_tp, "attn_cp": 1, "pp": p_pp, "page_size": 1, "kv_cache_dtype": "auto"}
        d = {"attn_tp": d_tp, "pp": d_pp, "page_size": 1, "kv_cache_dtype": "auto"}
        cases.append(_case(conn, p, {**d, "dcp": 1, "mla": mla}))
    for p_page, d_page, p_dtype, d_dtype in itertools.product(
        (1, 64), (1, 64), ("auto", "fp8_e4m3"), ("auto", "fp8_e4m3")
    ):
        p = {"attn_tp": 1, "attn_cp": 1, "pp": 1, "page_size": p_page, "kv_cache_dtype": p_dtype}
        d = {"attn_tp": 1, "pp": 1, "page_size": d_page, "kv_cache_dtype": d_dtype}
        cases.append(_case(conn, p, {**d, "dcp": 1, "mla": True}))
    for p_cp, d_dcp, mla in itertools.product((1, 2), (1, 2), (False, True)):
        p = {"attn_tp": 2, "attn_cp": p_cp, "pp": 1, "page_size": 1, "kv_cache_dtype": "auto"}
        d = {"attn_tp": 2, "pp": 1, "page_size": 1, "kv_cache_dtype": "auto"}
        cases.append(_case(conn, p, {**d, "dcp": d_dcp, "mla": mla}))
    sys.stdout.write(f'{{"release": {json.dumps(__version__)}, "cases": [\n')
    sys.stdout.write(",\n".join(json.dumps(c, separators=(",", ":")) for c in cases))
    sys.stdout.write("\n]}\n")


if __name__ == "__main__":
    main()
