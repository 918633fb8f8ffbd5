"""The back-ends: every way a rule tree is evaluated, encoded or printed.

`pyeval` compiles trees to Python (the hot path), `interp` walks them (the reference),
`z3enc`/`z3exp` translate them to Z3 (explain; fix and enumerate's cross-checks),
`partial` specialises them, `render` turns them into text; `pycompile` turns generated
source into functions (for `pyeval` and enumeration's code generator). All walk the closed
node set of `meshsat.solver.lang.expr` as `meshsat.solver.lang.visitor.ExprVisitor` subclasses;
tests/test_walkers.py holds each to every node type, tests/test_backends.py proves they agree.
"""
