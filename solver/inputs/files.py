"""Config files: JSON, YAML or TOML mappings of field names to values.

Read through `meshsat.solver.lang.limits`: regular files only, bounded size, UTF-8, bounded
nesting and alias expansion, so a hostile file fails in milliseconds with one line.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from meshsat.solver.errors import InputError
from meshsat.solver.lang.limits import MAX_DEPTH, bracket_depth, check_shape, read_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _yaml_load(text: str) -> Any:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(text, Loader=loader)


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a layout file. Keys are field names (dashes or underscores)."""
    p = Path(path)
    suffix = p.suffix.lower()
    if suffix not in (".json", ".yaml", ".yml", ".toml"):
        raise InputError(f"config file {p} must end in .json, .yaml, .yml or .toml")
    text = read_text(p, "config file")
    if bracket_depth(text) > MAX_DEPTH:
        raise InputError(f"config file {p} is nested deeper than {MAX_DEPTH} levels")
    try:
        if suffix == ".json":
            data = json.loads(text)
        elif suffix == ".toml":
            data = tomllib.loads(text)
        else:
            data = _yaml_load(text)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{p}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{p}: invalid TOML: {exc}") from None
    except RecursionError:
        raise InputError(f"config file {p} is nested deeper than {MAX_DEPTH} levels") from None
    except Exception as exc:  # yaml.YAMLError and its subclasses
        first = str(exc).strip().splitlines()
        raise InputError(f"{p}: invalid YAML: {' '.join(first[:3])[:200]}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"{p} must hold a mapping of field names to values")
    check_shape(data, f"config file {p}")
    return {str(k).replace("-", "_"): v for k, v in data.items()}
