"""The speculative algorithm's name (`handle_speculative_decoding`, 0.5.18 to 0.5.23): the
names `SpeculativeAlgorithm` knows per release, the spellings SGLang upper-cases
(`R-SPEC-CASE`) and the refusal of any other name (`SPEC-UNKNOWN-ALGORITHM`).

Why apart: both steps read one list of names per release and run before any algorithm's own
handler (upper-casing opens the handler, `SpeculativeAlgorithm.from_string` follows), so
every check in `speculative` and `speculative_dflash_uno` reads the name they leave.
`catalogue/__init__.py` places them around the handler's other steps in SGLang's order.
"""

from __future__ import annotations

from meshsat.solver.catalogue.speculative import SRC
from meshsat.solver.lang.expr import is_set, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Resolution, Rule, assign

_alg = F.speculative_algorithm

#: `SpeculativeAlgorithm`'s members (NONE is one: no speculative decoding) and its NEXTN alias
#: (0.5.18, 0.5.19; 0.5.23 adds UNO): the one list of names per release that R-SPEC-CASE
#: and SPEC-UNKNOWN-ALGORITHM both read. 0.4.6.post5's argparse takes EAGLE, EAGLE3 and
#: NEXTN (FLAG-CHOICE).
KNOWN_ALGORITHMS = (
    "DFLASH",
    "DSPARK",
    "EAGLE",
    "EAGLE3",
    "FROZEN_KV_MTP",
    "STANDALONE",
    "NGRAM",
    "NONE",
    "NEXTN",
)
KNOWN_ALGORITHMS_0_5_23 = (*KNOWN_ALGORITHMS, "UNO")
#: The mixed-case spellings SGLang's own docs and model cards use, by name.
_CAMEL = {"NEXTN": "NextN", "NGRAM": "NGram", "DFLASH": "DFlash", "DSPARK": "DSpark"}


def spellings(name: str) -> tuple[str, ...]:
    """The spellings of `name` other than its own that a user types (lower case,
    capitalised, title case, the docs' camel case): SGLang upper-cases any string, and
    meshsat's string fields hold only the literals its rules name (there is no upper-case
    operation), so a rarer mixing of cases stays unknown here though SGLang takes it."""
    typed = {name.lower(), name.capitalize(), name.title(), _CAMEL.get(name, name)}
    return tuple(sorted(typed - {name}))


def upper_case(names: tuple[str, ...]) -> Resolution:
    """`handle_speculative_decoding` opens with `speculative_algorithm.upper()` (0.5.18 to
    0.5.23), before the NEXTN alias and every check of the handler: `--speculative-algorithm
    ngram` is NGRAM, `NextN` is NEXTN (then EAGLE) to them all. NONE (no algorithm) is left
    as typed."""
    return Resolution(
        "R-SPEC-CASE",
        SRC,
        "SGLang upper-cases --speculative-algorithm (ngram is NGRAM)",
        tuple(
            assign(one_of(_alg, *spellings(name)), speculative_algorithm=name)
            for name in names
            if name != "NONE"
        ),
    )


UPPER_CASE = upper_case(KNOWN_ALGORITHMS)


def unknown_algorithm(names: tuple[str, ...]) -> Rule:
    """`SpeculativeAlgorithm.from_string`, called by `handle_speculative_decoding` before any
    algorithm's own handler (the CLI takes any string): an unknown name is refused. It reads
    the name R-SPEC-CASE has upper-cased from the same `names` (NEXTN is EAGLE by then), and
    NONE as typed. SGLang has upper-cased every name by then, so it quotes an unknown one
    upper-cased ("mtp" is "MTP"); meshsat keeps an unknown name as typed (no resolution
    names every string) and upper-cases it in the message (`{...:upper}`)."""
    return Rule(
        "SPEC-UNKNOWN-ALGORITHM",
        is_set(_alg),
        one_of(_alg, *names, *spellings("NONE")),
        "Unknown speculative algorithm name: {speculative_algorithm:upper}",
        SRC,
        hint="one of " + ", ".join(n for n in names if n != "NONE"),
    )


UNKNOWN_ALGORITHM = unknown_algorithm(KNOWN_ALGORITHMS)
