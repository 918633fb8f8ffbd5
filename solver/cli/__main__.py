"""`python -m meshsat.solver.cli`: the same as the `meshsat` console script."""

from meshsat.entry import main

main()
