"""Hypothesis profiles: CI replays the same examples on every run (a red build always
means a changed behaviour); `pytest --hypothesis-profile explore` draws new ones."""

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, max_examples=500, print_blob=True)
settings.load_profile("ci")
