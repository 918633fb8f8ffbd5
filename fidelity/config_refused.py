"""Record the keys each release's `--config FILE` merger refuses (fidelity/config_refused.json;
`fidelity/export_flags.py` ships them in solver/inputs/sglang_flags.json).

Why: SGLang turns a YAML config's keys into flags (`ConfigArgumentMerger`), and refuses at
start-up a key whose option is neither on/off nor one value ("Unsupported config option
'enable_dp_attention' with action 'DeprecatedStoreTrueAction'", 0.5.23), which the same
flag on the command line is not. Each release decides it its own way (0.5.19 by `dest` and
the action's class, 0.5.23 by every long spelling and the number of values), so the record
is each release's own merger built on its own parser. Runs inside a release venv
($HOME/.cache/meshsat-fidelity/<version>), from the repository root:

    PYTHONPATH=fidelity/cpu_site ~/.cache/meshsat-fidelity/0.5.23/bin/python \\
      fidelity/config_refused.py 0.5.23
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fidelity" / "config_refused.json"
#: Where the merger lives: 0.5.18 keeps it beside server_args.py.
MODULES = ("sglang.srt.utils.server_args_config_parser", "sglang.srt.server_args_config_parser")


def refused() -> dict[str, str] | None:
    """The release's refused keys and each one's action class (None: no merger)."""
    from sglang.srt.server_args import ServerArgs

    for name in MODULES:
        try:
            merger_cls = importlib.import_module(name).ConfigArgumentMerger
            break
        except (ImportError, AttributeError):
            continue
    else:
        return None
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    merger = merger_cls(parser)
    return {k: type(a).__name__ for k, a in sorted(merger.unsupported_actions.items())}


def main() -> int:
    version = sys.argv[1]
    import sglang

    assert sglang.__version__ == version, (sglang.__version__, version)
    data = json.loads(OUT.read_text()) if OUT.is_file() else {}
    keys = refused()
    if keys is None:
        data.pop(version, None)
        print(f"{version}: no --config merger")
    else:
        data[version] = keys
        print(f"{version}: {len(keys)} refused key(s)")
    OUT.write_text(json.dumps(dict(sorted(data.items())), indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
