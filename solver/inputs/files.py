"""Config files: JSON, YAML or TOML mappings of field names to values."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from solver.errors import InputError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a layout file. Keys are field names (dashes or underscores)."""
    p = Path(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise InputError(f"config file not found: {p}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read config file {p}: {exc}") from None
    suffix = p.suffix.lower()
    try:
        if suffix == ".json":
            data = json.loads(text)
        elif suffix in (".yaml", ".yml"):
            import yaml

            data = yaml.safe_load(text)
        elif suffix == ".toml":
            data = tomllib.loads(text)
        else:
            raise InputError(f"config file {p} must end in .json, .yaml, .yml or .toml")
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{p}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{p}: invalid TOML: {exc}") from None
    except InputError:
        raise
    except Exception as exc:  # yaml.YAMLError and its subclasses
        first = str(exc).strip().splitlines()
        raise InputError(f"{p}: invalid YAML: {' '.join(first[:3])}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(f"{p} must hold a mapping of field names to values")
    return {str(k).replace("-", "_"): v for k, v in data.items()}
