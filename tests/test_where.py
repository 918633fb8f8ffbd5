"""`--where` parsing: the accepted language, the trees it builds, the errors it gives."""

from __future__ import annotations

from typing import Any

import pytest

from meshsat.solver.backends.interp import evaluate
from meshsat.solver.enumeration.where import parse
from meshsat.solver.errors import InputError
from meshsat.solver.lang.config import Config
from meshsat.solver.validation.validate import environment


def _env(**values: Any) -> dict[str, Any]:
    return {**environment(Config(), None), **values}


# Each filter with a hand-computed expectation for three layouts.
LAYOUTS = [
    _env(tp_size=8, dp_size=2, enable_dp_attention=True, attn_cp_size=2, ep_size=8),
    _env(tp_size=16, pp_size=2, dcp_size=4, enable_prefill_cp=True, cp_strategy="zigzag"),
    _env(tp_size=4, dp_size=3, moe_dp_size=2, ep_size=2),
]
CASES: list[tuple[str, tuple[bool, bool, bool]]] = [
    ("attn_tp <= 8", (True, False, True)),  # attn_tp: 2, 16, 4
    ("attn_tp == 2", (True, False, False)),
    ("ep >= 8", (True, False, False)),
    ("cp_strategy == 'zigzag'", (False, True, False)),
    ("cp_strategy != 'zigzag'", (True, False, True)),
    ("cp_strategy == none", (True, False, True)),
    ("cp_strategy == None", (True, False, True)),
    ("enable_dp_attention", (True, False, False)),
    ("not enable_dp_attention and tp > 4", (False, True, False)),
    ("tp in (4, 16)", (False, True, True)),
    ("tp not in (4, 16)", (True, False, False)),
    ("cp_strategy in ('zigzag', 'interleave')", (False, True, False)),
    ("1 < pp <= 2", (False, True, False)),
    ("2 <= tp // dp <= 4", (True, False, False)),  # tp//dp: 4, 16, 1
    ("tp % 3 == 1 or dcp == 4", (False, True, True)),
    ("gpus_used == 12", (False, False, True)),  # 8, 32, 12
    ("gpus_used - engine_world == 8", (False, False, True)),
    ("(tp + pp) * 2 == 36", (False, True, False)),
    ("moe_tp == 1 and moe_dp == 2", (False, False, True)),  # moe_tp: 1, 16, 1
    ("cp_active", (False, False, False)),  # attn_cp 1 in the CP layout
    ("enable_prefill_cp == true", (False, True, False)),
    ("dp == -1 or dp == 3", (False, False, True)),
    ("chunked_prefill_size > 4", (False, False, False)),  # unset: no ordering holds
    ("chunked_prefill_size == none", (True, True, True)),
    ("tp_size == 8 or attn_cp_size == 1 and dcp_size == 4", (True, True, False)),
]


@pytest.mark.parametrize(("text", "expected"), CASES)
def test_filters_evaluate_as_written(text: str, expected: tuple[bool, ...]) -> None:
    expr = parse(text)
    assert expr.kind == "bool"
    assert tuple(bool(evaluate(expr, env)) for env in LAYOUTS) == expected


def test_aliases_mean_the_fields() -> None:
    for alias, field in [
        ("tp", "tp_size"),
        ("attn_cp", "attn_cp_size"),
        ("moe_dp", "moe_dp_size"),
        ("dcp", "dcp_size"),
        ("dwdp", "dwdp_size"),
    ]:
        assert parse(f"{alias} == 2").key() == parse(f"{field} == 2").key()


def test_optional_order_is_guarded() -> None:
    expr = parse("chunked_prefill_size >= 4096")
    assert evaluate(expr, _env(chunked_prefill_size=8192)) is True
    assert evaluate(expr, _env(chunked_prefill_size=None)) is False


def test_example_error_gives_column() -> None:
    with pytest.raises(InputError) as exc:
        parse("attn_tp <= ")
    assert str(exc.value).startswith("bad --where expression at column 10: ")


BAD: list[tuple[str, int, str]] = [
    ("attn_tp <= ", 10, "ends too early"),
    ("tp == 8 8", 9, "invalid syntax"),
    ("tq == 8", 1, "did you mean tp?"),
    ("atn_tp <= 8", 1, "did you mean attn_tp?"),
    ("tp == 8 and cp_strategy == 'zigzg'", 28, "'zigzg' is not a value of cp_strategy"),
    ("__import__('os').system('true')", 1, "function call"),
    ("tp.bit_length() == 3", 1, "function call"),
    ("tp == 8 and config.x", 13, "attribute access"),
    ("tp[0] == 1", 1, "indexing"),
    ("tp / 2 == 4", 4, "/ (use //)"),
    ("tp ** 2 == 4", 4, "**"),
    ("tp == 8.5", 7, "8.5"),
    ("tp", 1, "must be a condition"),
    ("tp + 1", 1, "must be a condition"),
    ("tp and pp", 1, "expected a condition"),
    ("enable_dp_attention == 1", 24, "cannot compare bool with int"),
    ("cp_strategy < 'zigzag'", 15, "ordering"),
    ("tp is 8", 4, "is (use ==)"),
    ("tp in pp", 7, "parenthesised list"),
    ("tp in (pp, 2)", 8, "literals only"),
    ("(lambda: 1)() == 1", 1, "function call"),
    ("tp == 1 if pp else 2", 1, "if-else"),
    ("tp == 1\n", 1, ""),
    ("tp == 1\npp == 2", 1, "one line"),
    ("'a' + 1 == 2", 1, "arithmetic needs integers"),
    ("-tp == 1", 1, "unary"),
    ("tp == 1 ==", 10, "ends too early"),
    ("cp_strategy == 3", 16, "3 is not a value of cp_strategy"),
    ("tp_size == none", 12, "tp_size is never None"),
]


@pytest.mark.parametrize(("text", "column", "fragment"), BAD)
def test_bad_filters_name_the_column(text: str, column: int, fragment: str) -> None:
    if text == "tp == 1\n":  # a trailing newline is harmless
        parse(text)
        return
    with pytest.raises(InputError) as exc:
        parse(text)
    message = str(exc.value)
    assert message.startswith(f"bad --where expression at column {column}: "), message
    assert fragment in message


def test_whitelist_is_closed() -> None:
    """No Python construct outside the whitelist slips through (a sample of them)."""
    for text in [
        "[tp][0] == 1",
        "{tp: 1} == 1",
        "f'{tp}' == '8'",
        "(tp := 1) == 1",
        "tp if pp else dp",
        "*tp",
        "await tp",
        "tp @ pp == 1",
        "~tp == 1",
        "tp << 1 == 2",
        "b'x' == tp",
        "...",
        "tp == 1j",
    ]:
        with pytest.raises(InputError, match="bad --where expression at column"):
            parse(text)


def test_every_name_parses_and_reads_its_value() -> None:
    from meshsat.solver.enumeration.where import names

    env = _env()
    for name in names():
        assert evaluate(parse(f"{name} == {name}"), env) is True, name
