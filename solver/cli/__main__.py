"""`python -m solver.cli`: the same as the `meshsat` console script."""

from solver.cli import main

main()
