"""`--where` filters: small Python-like conditions parsed into the rule language.

A filter becomes an ordinary rule tree, so it reaches every back-end exactly as a
catalogue rule does: the generator compiles it into its loops, Z3 translates it, and
the brute-force reference evaluates it with `meshsat.solver.backends.interp`. Nothing is `eval`ed:
Python's own parser (mode "eval") reads the text and only a whitelist of node types
is accepted; anything else is an `InputError` that gives the column.

Names are configuration fields, model facts, derived widths (`attn_tp`, `gpus_used`,
...) and the short aliases of `meshsat.solver.enumeration.space.ALIASES` (`tp`, `cp`, ...); fields
read their values after SGLang's resolution, like every rule. Ordering an optional field
that is unset (`chunked_prefill_size > 4` without a chunk size) is false rather than
an error.
"""

from __future__ import annotations

import ast
import difflib
import math
from collections.abc import Callable, Iterable, Mapping

from meshsat.solver.catalogue.weight_shapes import NAMED as WEIGHT_WIDTHS
from meshsat.solver.enumeration.space import ALIASES
from meshsat.solver.errors import InputError
from meshsat.solver.lang.derived import DERIVED
from meshsat.solver.lang.expr import (
    And,
    Cmp,
    Const,
    Expr,
    ExprTypeError,
    Field,
    In,
    IsSet,
    Named,
    Not,
    Or,
    Value,
    fields_of,
    lift,
)
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.lang.limits import MAX_DEPTH, shown

_DERIVED = {n.name: n for n in (*DERIVED, *WEIGHT_WIDTHS)}
_LITERAL_NAMES: dict[str, object] = {"true": True, "false": False, "none": None}
_CMP = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}
_ARITH: dict[type, Callable[[Expr, Expr], Expr]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}
_OP_TEXT = {
    ast.Div: "/ (use //)",
    ast.Pow: "**",
    ast.BitAnd: "& (use and)",
    ast.BitOr: "| (use or)",
    ast.BitXor: "^",
    ast.LShift: "<<",
    ast.RShift: ">>",
    ast.MatMult: "@",
    ast.Is: "is (use ==)",
    ast.IsNot: "is not (use !=)",
}


def names() -> tuple[str, ...]:
    """Every name a filter may use."""
    return (*SPECS, *_DERIVED, *ALIASES)


class _Bad(Exception):
    def __init__(self, column: int, what: str) -> None:
        super().__init__(what)
        self.column = column
        self.what = what


#: Longest filter text and deepest nesting accepted: real filters are a line long, and
#: the parser and every back-end recurse over the tree.
MAX_FILTER_CHARS = 2000


def parse(
    text: str,
    extra: Mapping[str, Field] | None = None,
    widths: Mapping[str, Named] | None = None,
) -> Expr:
    """The filter as a boolean rule tree; `InputError` with the column on any problem.

    `extra` adds names beyond the configuration (enumerate's memory columns, which are not
    fields of any rule); a filter given them may also use decimal literals (`kv_tokens >=
    1e6`), since it is evaluated in Python, never compiled into the loops or Z3.

    Integer division and remainder by zero are errors for a literal divisor; for a
    divisor that depends on the layout, a layout where it is zero fails the filter (the
    rule language's `x // 0 == 0` would otherwise silently keep it).

    `widths`: a release's own definitions of the derived widths (`Pack.named_widths`), which
    replace the default ones of the same name (0.5.23 redefines `shared_tp`).
    """
    if not isinstance(text, str):
        raise TypeError(f"a where filter must be a string, got {type(text).__name__}")
    if len(text) > MAX_FILTER_CHARS:
        raise InputError(f"a --where expression is limited to {MAX_FILTER_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise _error(text, *_syntax_position(text, exc)) from None
    except (RecursionError, MemoryError):
        raise InputError(f"a --where expression nests deeper than {MAX_DEPTH} levels") from None
    if _depth(tree.body) > MAX_DEPTH:
        raise InputError(f"a --where expression nests deeper than {MAX_DEPTH} levels")
    builder = _Builder(text, extra or {}, widths or {})
    try:
        expr = builder.build(tree.body)
        if expr.kind != "bool":
            raise _Bad(1, f"a filter must be a condition, not a{_an(expr.kind)} value")
    except _Bad as exc:
        raise _error(text, exc.column, exc.what) from None
    if builder.divisors:
        zero = Const(0, "int")
        expr = And(*(Cmp("!=", d, zero) for d in builder.divisors), expr)
    return expr


def _depth(root: ast.AST) -> int:
    """Nesting depth of a parsed filter, without recursion."""
    deepest = 0
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        if depth <= MAX_DEPTH:
            stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return deepest


def split_reading(
    texts: Iterable[str],
    names: Mapping[str, Field],
    columns: Iterable[str],
    widths: Mapping[str, Named] | None = None,
) -> tuple[tuple[str, ...], tuple[Expr, ...]]:
    """The filters that read none of `columns` (as written, for an earlier stage) and those
    that read one (parsed with the extra `names` and the release's `widths`, as `parse`); a
    syntax error raises here with its column. Each stage that adds columns (memory,
    estimates) takes its filters so."""
    reading = set(columns)
    rest: list[str] = []
    found: list[Expr] = []
    for text in texts:
        expr = parse(text, names, widths)
        if reading.intersection(fields_of(expr)):
            found.append(expr)
        else:
            rest.append(text)
    return tuple(rest), tuple(found)


def parse_all(texts: tuple[str, ...] | list[str]) -> tuple[Expr, ...]:
    return tuple(parse(t) for t in texts)


def _an(kind: str) -> str:
    return {"int": "n integer", "enum": " text", "float": " number"}.get(kind, " " + kind)


def _syntax_position(text: str, exc: SyntaxError) -> tuple[int, str]:
    msg = exc.msg or "invalid syntax"
    if "\n" in text.strip():
        return 1, "a filter must fit on one line"
    if (exc.lineno or 1) > 1 or not exc.offset:
        # The parser ran off the end: point at the last character written.
        return max(len(text.rstrip()), 1), "the expression ends too early"
    return exc.offset, msg


def _error(text: str, column: int, what: str) -> InputError:
    return InputError(f"bad --where expression at column {column}: {what} (in {shown(text)})")


class _Builder:
    def __init__(self, text: str, extra: Mapping[str, Field], widths: Mapping[str, Named]) -> None:
        self.text = text
        self.extra = extra
        self.derived = {n: widths.get(n, e) for n, e in _DERIVED.items()}
        #: Non-literal divisors: the filter holds only where they are non-zero.
        self.divisors: list[Expr] = []

    def _op_col(self, left: ast.expr, right: ast.expr) -> int:
        """Column of the operator written between two operands."""
        start = int(getattr(left, "end_col_offset", 0) or 0)
        gap = self.text[start : right.col_offset]
        skipped = len(gap) - len(gap.lstrip(" )"))
        return start + skipped + 1

    def build(self, node: ast.AST) -> Expr:
        method = getattr(self, "_" + type(node).__name__, None)
        if method is None:
            raise _Bad(_col(node), f"{_describe(node)} is not allowed in a filter")
        result: Expr = method(node)
        return result

    # --- leaves ---------------------------------------------------------------------
    def _Name(self, node: ast.Name) -> Expr:
        name = node.id
        if name in _LITERAL_NAMES:
            return lift(_LITERAL_NAMES[name]) if name != "none" else Const(None, "enum")
        if name in self.derived:
            return self.derived[name]
        if name in self.extra:
            return self.extra[name]
        field = ALIASES.get(name, name)
        if field in SPECS:
            return SPECS[field].ref
        close = difflib.get_close_matches(name, [*names(), *self.extra], n=1, cutoff=0.5)
        hint = f"; did you mean {close[0]}?" if close else ""
        raise _Bad(_col(node), f"unknown name {name!r}{hint}")

    def _Constant(self, node: ast.Constant) -> Expr:
        value = node.value
        if value is None or isinstance(value, bool | int | str):
            return lift(value) if value is not None else Const(None, "enum")
        if self.extra and isinstance(value, float) and math.isfinite(value):
            return Const(value, "float")
        raise _Bad(
            _col(node),
            f"the literal {value!r} is not allowed (integers, strings, true/false and none are)",
        )

    def _UnaryOp(self, node: ast.UnaryOp) -> Expr:
        if isinstance(node.op, ast.Not):
            operand = self.build(node.operand)
            self._need_bool(operand, node.operand)
            return Not(operand)
        if isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
            value = node.operand.value
            if isinstance(value, int) and not isinstance(value, bool):
                return Const(-value, "int")
        raise _Bad(_col(node), f"{_describe(node)} is not allowed in a filter")

    # --- operators ----------------------------------------------------------------------
    def _BoolOp(self, node: ast.BoolOp) -> Expr:
        parts = [self.build(v) for v in node.values]
        for part, source in zip(parts, node.values, strict=True):
            self._need_bool(part, source)
        return And(*parts) if isinstance(node.op, ast.And) else Or(*parts)

    def _BinOp(self, node: ast.BinOp) -> Expr:
        make = _ARITH.get(type(node.op))
        if make is None:
            text = _OP_TEXT.get(type(node.op), type(node.op).__name__)
            raise _Bad(self._op_col(node.left, node.right), f"the operator {text} is not allowed")
        a, b = self.build(node.left), self.build(node.right)
        for side, source in ((a, node.left), (b, node.right)):
            if side.kind != "int":
                raise _Bad(_col(source), f"arithmetic needs integers, got a{_an(side.kind)}")
        if isinstance(node.op, ast.FloorDiv | ast.Mod):
            if isinstance(b, Const) and b.value == 0:
                raise _Bad(_col(node.right), "division by zero")
            if not isinstance(b, Const):
                self.divisors.append(b)
        return make(a, b)

    def _Compare(self, node: ast.Compare) -> Expr:
        left_node: ast.expr = node.left
        left = self.build(left_node)
        parts: list[Expr] = []
        last = len(node.ops) - 1
        for i, (op, right_node) in enumerate(zip(node.ops, node.comparators, strict=True)):
            if isinstance(op, ast.In | ast.NotIn):
                if i != last:
                    raise _Bad(_col(node.comparators[i + 1]), "nothing may follow `in (...)`")
                part = self._membership(left, right_node)
                parts.append(Not(part) if isinstance(op, ast.NotIn) else part)
                continue
            symbol = _CMP.get(type(op))
            if symbol is None:
                text = _OP_TEXT.get(type(op), type(op).__name__)
                raise _Bad(
                    self._op_col(left_node, right_node), f"the operator {text} is not allowed"
                )
            right = self.build(right_node)
            parts.append(self._compare(symbol, left, left_node, right, right_node))
            left_node, left = right_node, right
        return parts[0] if len(parts) == 1 else And(*parts)

    def _compare(self, op: str, a: Expr, a_node: ast.expr, b: Expr, b_node: ast.expr) -> Expr:
        a, b = self._literal_like(a, a_node, b), self._literal_like(b, b_node, a)
        try:
            cmp = Cmp(op, a, b)  # type: ignore[arg-type]
        except ExprTypeError as exc:
            raise _Bad(_col(b_node), str(exc)) from None
        # An unset optional field makes an ordering false, and arithmetic on it too (it
        # has no number to add): `moe_dense_tp_size + 1 > 0` raised a TypeError in the
        # generated loops. Equality with the field itself is fine (None == 2 is false).
        sides = (
            (a, b) if op not in ("==", "!=") else [x for x in (a, b) if not isinstance(x, Field)]
        )
        return _guarded(cmp, *sides)

    def _literal_like(self, e: Expr, node: ast.expr, other: Expr) -> Expr:
        """Re-lift a literal against the other side, so `cp_strategy == 'zigzg'` fails
        here with the field's choices rather than silently matching nothing."""
        if not isinstance(e, Const) or isinstance(other, Const):
            return e
        try:
            return lift(e.value, like=other)
        except ExprTypeError as exc:
            raise _Bad(_col(node), str(exc)) from None

    def _membership(self, x: Expr, container: ast.expr) -> Expr:
        if not isinstance(container, ast.Tuple | ast.List | ast.Set):
            raise _Bad(_col(container), "`in` needs a parenthesised list of literals")
        values: list[Value] = []
        for item in container.elts:
            lit = self._literal_like(self.build(item), item, x)
            if not isinstance(lit, Const):
                raise _Bad(_col(item), "`in` takes literals only")
            values.append(lit.value)
        try:
            member = In(x, tuple(values))
        except ExprTypeError as exc:
            raise _Bad(_col(container), str(exc)) from None
        return member if isinstance(x, Field) else _guarded(member, x)

    def _need_bool(self, e: Expr, node: ast.AST) -> None:
        if e.kind != "bool":
            raise _Bad(_col(node), f"expected a condition, got a{_an(e.kind)} value")


def _col(node: ast.AST) -> int:
    return int(getattr(node, "col_offset", 0)) + 1


def _describe(node: ast.AST) -> str:
    kinds = {
        ast.Call: "a function call",
        ast.Attribute: "attribute access",
        ast.Subscript: "indexing",
        ast.Lambda: "lambda",
        ast.JoinedStr: "an f-string",
        ast.IfExp: "if-else",
        ast.NamedExpr: "assignment",
        ast.UnaryOp: "this unary operator",
    }
    return kinds.get(type(node), f"{type(node).__name__} syntax")


def _guarded(e: Expr, *sides: Expr) -> Expr:
    """`e` where every optional field the `sides` read holds a value: derived widths are
    not entered (they guard their own optional reads, and a guard here would change what
    they mean)."""
    seen: dict[tuple[str, bool], Field] = {}
    stack = list(sides)
    while stack:
        node = stack.pop()
        if isinstance(node, Named):
            continue
        if isinstance(node, Field) and node.optional:
            seen.setdefault((node.name, node.raw), node)
        stack.extend(node.children())
    guards = [IsSet(f) for f in seen.values()]
    return And(*guards, e) if guards else e
