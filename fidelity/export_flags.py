"""Export every release's flag table (fidelity/flags/<v>.json) into the compact table the
command reader ships (solver/inputs/sglang_flags.json): per release, each option string and
how many values it takes (0, 1, 2 for any number), the values a one-value option
accepts where its parser lists choices (argparse exits on any other), the options whose
own action refuses them on sight with SGLang's message (`raises`: a deprecated option the
parser still lists, so it is no unknown flag, yet the launch stops on it), the default of
each layout field's option (what leaving the flag out gives, for the commands meshsat
prints: `meshsat.solver.inputs.command`), and the YAML keys each release's `--config`
merger refuses (fidelity/config_refused.json), and which layout field each option sets
(`dests`: every spelling, deprecated ones included, for `meshsat diff`). Run after
`make fidelity` refreshes the flag dumps:

    python -m fidelity.export_flags
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from meshsat.solver.lang.fields import CONFIG_SPECS

HERE = Path(__file__).resolve().parent
TARGET = HERE.parent / "solver" / "inputs" / "sglang_flags.json"
SUPPRESS = "==SUPPRESS=="  # argparse's "no default": a deprecated alias of another option
NO_VALUE = {"_StoreTrueAction", "_StoreFalseAction", "_CountAction", "DeprecatedStoreTrueAction"}


def main() -> None:
    releases: dict[str, dict[str, int]] = {}
    choices: dict[str, dict[str, list[str]]] = {}
    defaults: dict[str, dict[str, Any]] = {}
    raises: dict[str, dict[str, str]] = {}
    dests: dict[str, dict[str, str]] = {}
    for path in sorted((HERE / "flags").glob("*.json")):
        table = json.loads(path.read_text(encoding="utf-8"))
        flags: dict[str, int] = {}
        accepts: dict[str, list[str]] = {}
        given: dict[str, Any] = {}
        refused: dict[str, str] = {}
        sets: dict[str, str] = {}
        for entry in table["flags"]:
            plain = entry["default"] is None or isinstance(entry["default"], bool | int | str)
            if entry["dest"] in CONFIG_SPECS and plain and entry["default"] != SUPPRESS:
                given[entry["dest"]] = entry["default"]
            nargs = entry.get("nargs")
            takes = 0 if entry["action"] in NO_VALUE or nargs == 0 else 1
            if nargs in ("+", "*") or (isinstance(nargs, int) and nargs > 1):
                takes = 2
            for option in entry["flags"]:
                if option.startswith("--"):
                    flags[option] = takes
                    if entry["dest"] in CONFIG_SPECS:
                        sets[option] = entry["dest"]
                    if entry.get("raises"):
                        refused[option] = entry["raises"]
                    if entry.get("choices") and takes == 1:
                        accepts[option] = [str(c) for c in entry["choices"]]
        releases[path.stem] = dict(sorted(flags.items()))
        choices[path.stem] = dict(sorted(accepts.items()))
        defaults[path.stem] = dict(sorted(given.items()))
        raises[path.stem] = dict(sorted(refused.items()))
        dests[path.stem] = dict(sorted(sets.items()))
    refused = json.loads((HERE / "config_refused.json").read_text(encoding="utf-8"))
    data = {
        "releases": releases,
        "choices": choices,
        "defaults": defaults,
        "raises": raises,
        "config_refused": refused,
        "dests": dests,
    }
    TARGET.write_text(json.dumps(data, separators=(",", ":")) + "\n")
    print(f"{TARGET}: {', '.join(f'{v} ({len(f)})' for v, f in releases.items())}")


if __name__ == "__main__":
    main()
