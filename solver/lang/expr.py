"""The rule language: a small typed expression tree that every back-end walks.

Rules and resolution steps are written once in this language. The Python back-end
(`pyeval`) compiles a tree to Python source; the Z3 back-ends translate the same
tree to Z3 terms; the renderer turns it into text for `meshsat rules` and into
arithmetic for violation messages. Keeping the language this small is what makes
the back-ends provably agree: there are only a dozen node types to get right.

Operators are overloaded for readability (`F.tp_size % F.dp_size == 0`), so `==`
on a node builds an `Eq` node instead of comparing trees; use `key()` to compare.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Literal

Kind = Literal["int", "bool", "enum", "float"]
Value = int | bool | float | str | None

# Sentinel choices for fields whose value set is open (any string is accepted).
OPEN: tuple[Value, ...] = ()


class ExprTypeError(TypeError):
    """A rule was written with mismatched types; raised when the catalogue is built."""


class Expr:
    """Base node. Subclasses are frozen dataclasses without generated `__eq__`."""

    kind: Kind

    def children(self) -> tuple[Expr, ...]:
        return ()

    def key(self) -> tuple[object, ...]:
        """Structural identity, for tests and memo tables (`==` builds nodes)."""
        return (type(self).__name__, *(c.key() for c in self.children()))

    # --- arithmetic -------------------------------------------------------
    def __add__(self, other: object) -> Expr:
        return Arith("+", self, lift(other))

    def __radd__(self, other: object) -> Expr:
        return Arith("+", lift(other), self)

    def __sub__(self, other: object) -> Expr:
        return Arith("-", self, lift(other))

    def __rsub__(self, other: object) -> Expr:
        return Arith("-", lift(other), self)

    def __mul__(self, other: object) -> Expr:
        return Arith("*", self, lift(other))

    def __rmul__(self, other: object) -> Expr:
        return Arith("*", lift(other), self)

    def __floordiv__(self, other: object) -> Expr:
        return Arith("//", self, lift(other))

    def __mod__(self, other: object) -> Expr:
        return Arith("%", self, lift(other))

    # --- comparison ---------------------------------------------------------
    def __eq__(self, other: object) -> Expr:  # type: ignore[override]
        return Cmp("==", self, lift(other, like=self))

    def __ne__(self, other: object) -> Expr:  # type: ignore[override]
        return Cmp("!=", self, lift(other, like=self))

    def __lt__(self, other: object) -> Expr:
        return Cmp("<", self, lift(other))

    def __le__(self, other: object) -> Expr:
        return Cmp("<=", self, lift(other))

    def __gt__(self, other: object) -> Expr:
        return Cmp(">", self, lift(other))

    def __ge__(self, other: object) -> Expr:
        return Cmp(">=", self, lift(other))

    __hash__ = object.__hash__

    # --- logic ----------------------------------------------------------------
    def __and__(self, other: object) -> Expr:
        return And(self, lift(other))

    def __or__(self, other: object) -> Expr:
        return Or(self, lift(other))

    def __invert__(self) -> Expr:
        return Not(self)

    def __bool__(self) -> bool:
        raise ExprTypeError("a rule expression has no truth value; use & | ~ instead of and/or/not")


@dataclass(frozen=True, eq=False)
class Const(Expr):
    value: Value
    kind: Kind

    def key(self) -> tuple[object, ...]:
        return ("Const", self.kind, self.value)


@dataclass(frozen=True, eq=False)
class Field(Expr):
    """A configuration field or model fact.

    `raw` reads the value the user gave, before SGLang's silent resolution;
    otherwise the resolved value is read. `optional` fields may be None and must be
    guarded with `IsSet` before their value is used in arithmetic.
    """

    name: str
    kind: Kind
    choices: tuple[Value, ...] = OPEN
    optional: bool = False
    raw: bool = False

    def key(self) -> tuple[object, ...]:
        return ("Field", self.name, self.raw)

    @property
    def as_raw(self) -> Field:
        return Field(self.name, self.kind, self.choices, self.optional, raw=True)


@dataclass(frozen=True, eq=False)
class Named(Expr):
    """A derived width (attn_tp, gpus_used, ...): rendered by name, evaluated by body."""

    name: str
    body: Expr

    @property
    def kind(self) -> Kind:  # type: ignore[override]
        return self.body.kind

    def children(self) -> tuple[Expr, ...]:
        return (self.body,)

    def key(self) -> tuple[object, ...]:
        return ("Named", self.name, self.body.key())


ArithOp = Literal["+", "-", "*", "//", "%"]
CmpOp = Literal["==", "!=", "<", "<=", ">", ">="]


@dataclass(frozen=True, eq=False)
class Arith(Expr):
    """Integer arithmetic. `x // 0` and `x % 0` are defined as 0 in every back-end."""

    op: ArithOp
    a: Expr
    b: Expr

    def __post_init__(self) -> None:
        for side in (self.a, self.b):
            if side.kind not in ("int", "float"):
                raise ExprTypeError(f"arithmetic {self.op!r} on a {side.kind} operand")
        if self.op in ("//", "%") and "float" in (self.a.kind, self.b.kind):
            raise ExprTypeError(f"{self.op!r} needs integer operands")

    @property
    def kind(self) -> Kind:  # type: ignore[override]
        return "float" if "float" in (self.a.kind, self.b.kind) else "int"

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)

    def key(self) -> tuple[object, ...]:
        return ("Arith", self.op, self.a.key(), self.b.key())


@dataclass(frozen=True, eq=False)
class Cmp(Expr):
    op: CmpOp
    a: Expr
    b: Expr
    kind: Kind = "bool"

    def __post_init__(self) -> None:
        ka, kb = self.a.kind, self.b.kind
        numeric = {"int", "float"}
        if self.op in ("==", "!="):
            if ka != kb and not (ka in numeric and kb in numeric):
                raise ExprTypeError(f"cannot compare {ka} with {kb}")
        elif ka not in numeric or kb not in numeric:
            raise ExprTypeError(f"ordering {self.op!r} needs numbers, got {ka} and {kb}")

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)

    def key(self) -> tuple[object, ...]:
        return ("Cmp", self.op, self.a.key(), self.b.key())


@dataclass(frozen=True, eq=False)
class Divides(Expr):
    """`d` divides `n` (n % d == 0). Kept as its own node because the exponent
    encoding turns it into linear inequalities, which a `%` node would hide."""

    d: Expr
    n: Expr
    kind: Kind = "bool"

    def __post_init__(self) -> None:
        if self.d.kind != "int" or self.n.kind != "int":
            raise ExprTypeError("divides() needs integer operands")

    def children(self) -> tuple[Expr, ...]:
        return (self.d, self.n)


@dataclass(frozen=True, eq=False)
class And(Expr):
    args: tuple[Expr, ...]
    kind: Kind = "bool"

    def __init__(self, *args: Expr) -> None:
        object.__setattr__(self, "args", tuple(_flatten(And, args)))
        object.__setattr__(self, "kind", "bool")
        _require_bool(self.args, "and")

    def children(self) -> tuple[Expr, ...]:
        return self.args


@dataclass(frozen=True, eq=False)
class Or(Expr):
    args: tuple[Expr, ...]
    kind: Kind = "bool"

    def __init__(self, *args: Expr) -> None:
        object.__setattr__(self, "args", tuple(_flatten(Or, args)))
        object.__setattr__(self, "kind", "bool")
        _require_bool(self.args, "or")

    def children(self) -> tuple[Expr, ...]:
        return self.args


@dataclass(frozen=True, eq=False)
class Not(Expr):
    a: Expr
    kind: Kind = "bool"

    def __post_init__(self) -> None:
        _require_bool((self.a,), "not")

    def children(self) -> tuple[Expr, ...]:
        return (self.a,)


@dataclass(frozen=True, eq=False)
class Implies(Expr):
    a: Expr
    b: Expr
    kind: Kind = "bool"

    def __post_init__(self) -> None:
        _require_bool((self.a, self.b), "implies")

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)


@dataclass(frozen=True, eq=False)
class Ite(Expr):
    cond: Expr
    then: Expr
    other: Expr

    def __post_init__(self) -> None:
        _require_bool((self.cond,), "if-then-else condition")
        kt, ko = self.then.kind, self.other.kind
        if kt != ko and not ({kt, ko} <= {"int", "float"}):
            raise ExprTypeError(f"if-then-else branches differ: {kt} and {ko}")

    @property
    def kind(self) -> Kind:  # type: ignore[override]
        return self.then.kind if self.then.kind == self.other.kind else "float"

    def children(self) -> tuple[Expr, ...]:
        return (self.cond, self.then, self.other)


@dataclass(frozen=True, eq=False)
class In(Expr):
    """Membership of a field's value in a literal set (enum and int fields)."""

    x: Expr
    values: tuple[Value, ...]
    kind: Kind = "bool"

    def __post_init__(self) -> None:
        for v in self.values:
            _check_literal(self.x, v)

    def children(self) -> tuple[Expr, ...]:
        return (self.x,)

    def key(self) -> tuple[object, ...]:
        return ("In", self.x.key(), self.values)


@dataclass(frozen=True, eq=False)
class IsSet(Expr):
    """The optional field holds a value (is not None)."""

    x: Field
    kind: Kind = "bool"

    def __post_init__(self) -> None:
        if not self.x.optional:
            raise ExprTypeError(f"{self.x.name} is never None; IsSet() is meaningless on it")

    def children(self) -> tuple[Expr, ...]:
        return (self.x,)


# --- constructors ---------------------------------------------------------------

TRUE = Const(True, "bool")
FALSE = Const(False, "bool")


def lift(value: object, like: Expr | None = None) -> Expr:
    """Turn a Python literal into a constant of the right kind.

    `like` gives the other side of an equality so that `F.cp_strategy == "zigzag"`
    checks the literal against the field's declared choices at catalogue build time.
    """
    if isinstance(value, Expr):
        return value
    if like is not None:
        _check_literal(like, value)
        if like.kind == "enum" or value is None:
            return Const(value, like.kind)  # type: ignore[arg-type]
    if isinstance(value, bool):
        return Const(value, "bool")
    if isinstance(value, int):
        return Const(value, "int")
    if isinstance(value, float):
        return Const(value, "float")
    if isinstance(value, str):
        return Const(value, "enum")
    raise ExprTypeError(f"cannot use {value!r} in a rule")


def divides(d: Expr | int, n: Expr | int) -> Expr:
    return Divides(lift(d), lift(n))


def ite(cond: Expr, then: Expr | Value, other: Expr | Value) -> Expr:
    t = lift(then)
    return Ite(cond, t, lift(other, like=t if isinstance(other, str | None) else None))


def one_of(x: Expr, *values: Value) -> Expr:
    return In(x, tuple(values))


def is_set(x: Expr) -> Expr:
    if not isinstance(x, Field):
        raise ExprTypeError("is_set() takes a field")
    return IsSet(x)


def named(name: str, body: Expr) -> Named:
    return Named(name, body)


# --- walking ----------------------------------------------------------------------


def walk(expr: Expr) -> Iterator[Expr]:
    """Pre-order traversal, entering derived widths."""
    stack = [expr]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children()))


def named_in(*exprs: Expr) -> dict[str, Named]:
    """The derived widths the trees name, by name (the first of a name kept): what a rule's
    message quotes (`{mlp_tp}`), what two releases' rules are compared by, and what a
    release's `--where` and memory model read (`Pack.named_widths`)."""
    found: dict[str, Named] = {}
    for expr in exprs:
        for node in walk(expr):
            if isinstance(node, Named):
                found.setdefault(node.name, node)
    return found


def fields_of(expr: Expr, *, raw: bool | None = None) -> tuple[str, ...]:
    """Names of the fields an expression reads, in first-seen order.

    `raw=True` keeps only raw reads, `raw=False` only resolved ones.
    """
    seen: dict[str, None] = {}
    for node in walk(expr):
        if isinstance(node, Field) and (raw is None or node.raw == raw):
            seen.setdefault(node.name, None)
    return tuple(seen)


def _flatten(cls: type, args: Iterable[Expr]) -> Iterator[Expr]:
    for a in args:
        a = lift(a)
        if type(a) is cls:
            yield from a.args  # type: ignore[attr-defined]
        else:
            yield a


def _require_bool(args: Iterable[Expr], what: str) -> None:
    for a in args:
        if a.kind != "bool":
            raise ExprTypeError(f"{what} needs boolean operands, got {a.kind}")


def _check_literal(x: Expr, v: object) -> None:
    if isinstance(x, Field) and x.choices and v not in x.choices:
        allowed = ", ".join(repr(c) for c in x.choices)
        raise ExprTypeError(f"{v!r} is not a value of {x.name} (one of {allowed})")
    if v is None and isinstance(x, Field) and not x.optional:
        raise ExprTypeError(f"{x.name} is never None")


#: The closed set of node types. Every back-end is an `ExprVisitor` with one method per
#: entry (solver.lang.visitor); tests/test_walkers.py fails when a concrete `Expr`
#: subclass is missing here, so a new node type cannot slip past a back-end.
NODE_TYPES: tuple[type[Expr], ...] = (
    Const,
    Field,
    Named,
    Arith,
    Cmp,
    Divides,
    And,
    Or,
    Not,
    Implies,
    Ite,
    In,
    IsSet,
)
