"""Every back-end walks every node type, and they agree on a tree that holds them all.

The language's node types are a closed set (`NODE_TYPES`); each back-end is an
`ExprVisitor` with one method per type. These tests fail when a node type is added to
`meshsat.solver.lang.expr` without joining `NODE_TYPES`, when a back-end lacks a method for one,
or when a new back-end appears without joining the agreement test below. The oracle for
values is the interpreter (`meshsat.solver.backends.interp`), the naive reference the other
back-ends are already held to on the whole catalogue in tests/test_backends.py.
"""

from __future__ import annotations

import inspect
import itertools
import re
from collections.abc import Callable
from typing import Any

import pytest
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

import meshsat.solver.backends.partial as partial
import meshsat.solver.backends.render as render
import meshsat.solver.backends.z3exp  # noqa: F401  (its encoder reuses Z3Terms; imported so it is seen)
import meshsat.solver.lang.expr as expr_module
from meshsat.solver.backends.interp import Evaluator, evaluate
from meshsat.solver.backends.pycompile import compile_function, source_of
from meshsat.solver.backends.pyeval import PyCompiler, compile_predicate
from meshsat.solver.backends.z3enc import Z3Encoder, Z3Terms
from meshsat.solver.lang.expr import (
    NODE_TYPES,
    And,
    Const,
    Divides,
    Expr,
    Implies,
    In,
    IsSet,
    Named,
    Not,
    Or,
    ite,
    walk,
)
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.lang.visitor import ExprVisitor, method_name

TP, DP = SPECS["tp_size"].ref, SPECS["dp_size"].ref
CHUNK = SPECS["chunked_prefill_size"].ref  # optional int
FLAG = SPECS["enable_dp_attention"].ref
STRATEGY = SPECS["cp_strategy"].ref  # optional enum with choices
A2A = SPECS["moe_a2a_backend"].ref
NAMES = (
    "tp_size",
    "dp_size",
    "chunked_prefill_size",
    "enable_dp_attention",
    "cp_strategy",
    "moe_a2a_backend",
)

#: A derived width over `//`, `%` and a conditional, as the catalogue's widths are.
WIDTH = Named("test_width", ite(FLAG, TP // DP, TP % DP))

#: One tree with every node type, written as rules are (guards before optionals).
FULL: Expr = And(
    Or(Divides(DP, TP.as_raw), Not(FLAG)),
    Implies(IsSet(CHUNK), CHUNK + DP * 2 - 1 >= WIDTH) | (WIDTH < TP + 1),
    (STRATEGY != None) | In(A2A, ("none", "deepep")),  # noqa: E711 (builds a node)
    ~(FLAG & (STRATEGY == "zigzag")) | (WIDTH * 2 > DP),
    (STRATEGY == None) | (TP % DP == 0),  # noqa: E711
)


def _visitors() -> set[type[ExprVisitor[Any]]]:
    found: set[type[ExprVisitor[Any]]] = set()
    todo: list[type[ExprVisitor[Any]]] = list(ExprVisitor.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls.__module__.startswith("meshsat.solver."):
            found.add(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_node_types_are_closed() -> None:
    defined = {
        obj
        for obj in vars(expr_module).values()
        if inspect.isclass(obj) and issubclass(obj, Expr) and obj is not Expr
    }
    assert set(NODE_TYPES) == defined
    assert len(NODE_TYPES) == len(set(NODE_TYPES))


def test_the_protocol_has_one_abstract_method_per_node_type() -> None:
    assert ExprVisitor.__abstractmethods__ == {method_name(t) for t in NODE_TYPES}
    assert method_name(IsSet) == "visit_is_set"


def test_every_backend_overrides_every_node_method() -> None:
    visitors = _visitors()
    assert visitors == set(RUNNERS), "a new ExprVisitor must join the agreement test"
    for cls in visitors:
        assert not inspect.isabstract(cls), cls
        for t in NODE_TYPES:
            name = method_name(t)
            assert getattr(cls, name) is not getattr(ExprVisitor, name), (cls, name)


def test_the_tree_holds_every_node_type() -> None:
    assert {type(n) for n in walk(FULL)} == set(NODE_TYPES)


def test_an_unknown_node_type_is_refused() -> None:
    class Stray(Expr):
        kind = "bool"

    with pytest.raises(TypeError, match="no method for Stray"):
        Evaluator({}, {}).visit(Stray())


# --- every back-end on the tree, against the interpreter -----------------------------


def _py(e: Expr, env: dict[str, Any], raw: dict[str, Any]) -> Any:
    c = PyCompiler()
    code = c.code(e)
    binds = [f"    v_{n} = v[{n!r}]" for n in c.reads]
    binds += [f"    u_{n} = u[{n!r}]" for n in c.raw_reads]
    return compile_function("\n".join(["def f(v, u):", *binds, f"    return {code}"]), "f")(
        env, raw
    )


def _partial(e: Expr, env: dict[str, Any], raw: dict[str, Any]) -> Any:
    done = partial.specialise(
        e,
        {n: Const(v, SPECS[n].kind) for n, v in env.items()},
        {n: Const(v, SPECS[n].kind) for n, v in raw.items()},
    )
    assert isinstance(done, Const), render.text(done)
    return done.value


def _z3(e: Expr, env: dict[str, Any], raw: dict[str, Any]) -> Any:
    # Z3's variables are the raw ones (no resolution steps here), so raw == resolved.
    enc = Z3Encoder((), NAMES)
    term = enc.term(e, enc.resolved).val
    pairs = [p for n in NAMES for p in enc.constants(n, env[n])]
    value = z3.simplify(z3.substitute(term, *pairs))
    return z3.is_true(value) if z3.is_bool(value) else value.as_long()


def _text(e: Expr, env: dict[str, Any], raw: dict[str, Any]) -> Any:
    # Text has no value to compare: every field the tree reads appears in it.
    shown = render.text(e)
    assert all(n in shown for n in expr_module.fields_of(e)), shown
    return evaluate(e, env, raw)


RUNNERS: dict[type[ExprVisitor[Any]], Callable[[Expr, dict[str, Any], dict[str, Any]], Any]] = {
    Evaluator: evaluate,
    PyCompiler: _py,
    partial._Specialiser: _partial,
    render._Text: _text,
    Z3Terms: _z3,
}

envs = st.fixed_dictionaries(
    {
        "tp_size": st.integers(0, 8),
        "dp_size": st.integers(0, 4),
        "chunked_prefill_size": st.none() | st.integers(0, 12),
        "enable_dp_attention": st.booleans(),
        "cp_strategy": st.sampled_from(SPECS["cp_strategy"].choices),
        "moe_a2a_backend": st.sampled_from(SPECS["moe_a2a_backend"].choices),
    }
)


@settings(max_examples=150, deadline=None)
@given(envs, st.integers(0, 8))
def test_backends_agree_with_the_interpreter_on_every_node_type(
    env: dict[str, Any], raw_tp: int
) -> None:
    for raw in (env, {**env, "tp_size": raw_tp}):
        want = evaluate(FULL, env, raw)
        for cls, run in RUNNERS.items():
            if cls is Z3Terms and raw is not env:
                continue
            assert run(FULL, env, raw) == want, cls.__name__
        # The derived width alone: a number, through `//`, `%` and a conditional.
        width = evaluate(WIDTH, env)
        for run in (_py, _partial, _z3):
            assert run(WIDTH, env, env) == width


@given(envs)
@settings(max_examples=50, deadline=None)
def test_partial_evaluation_leaves_a_tree_that_means_the_same(env: dict[str, Any]) -> None:
    known = {n: Const(env[n], SPECS[n].kind) for n in ("enable_dp_attention", "cp_strategy")}
    rest = partial.specialise(FULL, known)
    assert evaluate(rest, env) == evaluate(FULL, env)


def test_generated_code_names_its_temporaries() -> None:
    # Compound divisors are held under names that say what they compute, plain fields
    # divide directly, and the named code still computes what the interpreter does.
    e = Divides(WIDTH, TP) | (TP // WIDTH + TP % (DP * 2) > DP)
    fn = compile_predicate(e, ("tp_size", "dp_size", "enable_dp_attention"))
    source = source_of(fn)
    assert "(w_test_width := " in source
    assert "(d_dp_size_2 := " in source
    assert "% v_dp_size if v_dp_size else 0" in source
    assert not re.search(r"\b_t\d", source)
    for tp, dp, flag in itertools.product(range(5), range(4), (False, True)):
        env = {"tp_size": tp, "dp_size": dp, "enable_dp_attention": flag}
        assert fn(tp, dp, flag) == evaluate(e, env)
