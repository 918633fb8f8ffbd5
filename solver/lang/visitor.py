"""The one walker protocol for rule trees: a visitor with a method per node type.

Every back-end (interpreter, compiled Python, Z3, partial evaluation, rendering) is an
`ExprVisitor` subclass. The abstract methods make mypy and the interpreter refuse a
back-end that forgets a node type, and `visit` dispatches through a per-class table
built once when the subclass is defined: one dict lookup and one call per node, instead
of the chain of `isinstance` tests each back-end used to run (about as fast for the first
node types and faster for the last ones).

Method names follow the node class: `Const` -> `visit_const`, `IsSet` -> `visit_is_set`.

A walker that gives every node a meaning (a value, a term, a text) is a visitor. Code that
only asks whether a tree has one particular shape (a product of fields, a conjunction, a
comparison with a literal) and treats everything else alike still uses `isinstance`: such
a query has a default and no new node type can break it.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, ClassVar, Generic, TypeVar

from meshsat.solver.lang import expr as ex

T = TypeVar("T")


def method_name(node_type: type[ex.Expr]) -> str:
    """The visitor method for a node type: `IsSet` -> `visit_is_set`."""
    return "visit_" + re.sub(r"(?<!^)(?=[A-Z])", "_", node_type.__name__).lower()


class ExprVisitor(ABC, Generic[T]):
    """Walks a tree by node type; subclasses implement one method per `NODE_TYPES` entry.

    The visitor only dispatches: whether and how children are visited is each method's
    choice (short-circuiting connectives, memoised recursion, hooks that recurse).
    """

    _dispatch: ClassVar[dict[type[ex.Expr], Callable[[Any, Any], Any]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch = {t: getattr(cls, method_name(t)) for t in ex.NODE_TYPES}

    def visit(self, e: ex.Expr) -> T:
        try:
            method = self._dispatch[type(e)]
        except KeyError:
            raise TypeError(f"{type(self).__name__} has no method for {type(e).__name__}") from None
        result: T = method(self, e)
        return result

    @abstractmethod
    def visit_const(self, e: ex.Const) -> T: ...

    @abstractmethod
    def visit_field(self, e: ex.Field) -> T: ...

    @abstractmethod
    def visit_named(self, e: ex.Named) -> T: ...

    @abstractmethod
    def visit_arith(self, e: ex.Arith) -> T: ...

    @abstractmethod
    def visit_cmp(self, e: ex.Cmp) -> T: ...

    @abstractmethod
    def visit_divides(self, e: ex.Divides) -> T: ...

    @abstractmethod
    def visit_and(self, e: ex.And) -> T: ...

    @abstractmethod
    def visit_or(self, e: ex.Or) -> T: ...

    @abstractmethod
    def visit_not(self, e: ex.Not) -> T: ...

    @abstractmethod
    def visit_implies(self, e: ex.Implies) -> T: ...

    @abstractmethod
    def visit_ite(self, e: ex.Ite) -> T: ...

    @abstractmethod
    def visit_in(self, e: ex.In) -> T: ...

    @abstractmethod
    def visit_is_set(self, e: ex.IsSet) -> T: ...
