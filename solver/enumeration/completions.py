"""Admissible flag completions per numeric signature.

The generator binds the numeric fields in Python loops. What remains of the rules is
a small boolean problem over the flag and enum fields (prefill CP and its strategy,
an all-to-all backend, ...) whose only link to the numbers is a handful of atoms such
as `ep_size == tp_size`. The truth values of those atoms are the *signature* of a
numeric tuple; every tuple with the same signature has the same completions, so each
signature is solved once and cached, and the loops stream the product.

`Z3Completions` enumerates the completions of one signature with Z3 (a handful of
checks on a formula with a few variables); this is the division of labour the solver
notes measured as fastest. `PyCompletions` brute-forces the same finite product in
Python; tests require both to agree on every signature met.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from meshsat.solver.backends.pyeval import compile_predicate
from meshsat.solver.backends.z3lock import z3_locked
from meshsat.solver.enumeration.space import Dim, varied_fields
from meshsat.solver.lang.expr import TRUE, And, Expr, Field, Value

Completion = tuple[Value, ...]
Signature = tuple[bool, ...]
CompletionFn = Callable[[Signature], tuple[Completion, ...]]


def placeholder(i: int) -> Field:
    """The stand-in for the i-th numeric atom of a signature."""
    return Field(f"__sig{i}", "bool")


def _product(dims: Sequence[Dim]) -> list[Completion]:
    return [
        tuple(v for part in combo for v in part)
        for combo in itertools.product(*(d.values for d in dims))
    ]


class PyCompletions:
    """Brute force over the finite product: the reference for `Z3Completions`."""

    def __init__(self, dims: Sequence[Dim], constraints: Sequence[Expr], n_atoms: int) -> None:
        self.points = _product(dims)
        params = (*varied_fields(dims), *(placeholder(i).name for i in range(n_atoms)))
        self.predicate = compile_predicate(And(*constraints) if constraints else TRUE, params)

    def __call__(self, sig: Signature) -> tuple[Completion, ...]:
        return tuple(p for p in self.points if self.predicate(*p, *sig))


class Z3Completions:
    """All models of the flag formula under one signature, by Z3 with blocking clauses.

    Blocking clauses are the wrong tool for whole layouts (docs/encodings.md: ~200/s),
    but here a signature has at most a few dozen completions over a few variables.
    """

    @z3_locked
    def __init__(self, dims: Sequence[Dim], constraints: Sequence[Expr], n_atoms: int) -> None:
        import z3

        from meshsat.solver.backends.z3enc import Sym, Z3Encoder

        self.z3 = z3
        self.fields = varied_fields(dims)
        self.enc = Z3Encoder((), self.fields)
        env = dict(self.enc.raw)
        self.atoms = [z3.Bool(placeholder(i).name) for i in range(n_atoms)]
        for i, atom in enumerate(self.atoms):
            env[placeholder(i).name] = Sym(atom)
        self.solver = z3.Solver()
        self.solver.add(*self.enc.domain)
        for d in dims:
            self.solver.add(
                z3.Or(
                    [
                        z3.And(
                            [self.enc.value_term(f, v) for f, v in zip(d.fields, vals, strict=True)]
                        )
                        for vals in d.values
                    ]
                )
            )
        for c in constraints:
            self.solver.add(self.enc.term(c, env).val)
        self.order = {p: i for i, p in enumerate(_product(dims))}

    @z3_locked
    def __call__(self, sig: Signature) -> tuple[Completion, ...]:
        z3, s = self.z3, self.solver
        s.push()
        s.add(*(a == v for a, v in zip(self.atoms, sig, strict=True)))
        found: list[Completion] = []
        while s.check() == z3.sat:
            m = s.model()
            point: Completion = tuple(self.enc.decode(m, f) for f in self.fields)
            found.append(point)
            s.add(
                z3.Not(
                    z3.And(
                        [self.enc.value_term(f, v) for f, v in zip(self.fields, point, strict=True)]
                    )
                )
            )
        s.pop()
        return tuple(sorted(found, key=self.order.__getitem__))


class Table:
    """A signature cache the generated loops read directly (`memo.get`, then `solve`)."""

    def __init__(self, completions: CompletionFn) -> None:
        self.memo: dict[Signature, tuple[Completion, ...]] = {}
        self.completions = completions

    def solve(self, sig: Signature) -> tuple[Completion, ...]:
        found = self.memo[sig] = self.completions(sig)
        return found


def make(
    backend: str, dims: Sequence[Dim], constraints: Sequence[Expr], n_atoms: int
) -> CompletionFn:
    if backend == "z3":
        return Z3Completions(dims, constraints, n_atoms)
    if backend == "python":
        return PyCompletions(dims, constraints, n_atoms)
    raise ValueError(f"unknown completion back-end {backend!r} (z3 or python)")
