"""Typed conversion of user values, with errors that name the field and what it accepts."""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from meshsat.solver.backends.render import fmt_value
from meshsat.solver.errors import InputError
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.fields import CONFIG_SPECS, SPECS, FieldSpec
from meshsat.solver.lang.limits import MAX_CHOICES_SHOWN, MAX_GPUS, shown
from meshsat.solver.lang.model_spec import ModelSpec

_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}
_NONE = {"none", "null"}


def accepted(spec: FieldSpec, *, full: bool = False) -> str:
    """What a field accepts, in words, for error messages and help (`full`: every
    choice, for `meshsat fields`; otherwise a long list is summarised)."""
    if spec.choices and full:
        return "one of " + ", ".join(fmt_value(c) for c in spec.choices)
    if spec.choices:
        shown_choices = ", ".join(fmt_value(c) for c in spec.choices[:MAX_CHOICES_SHOWN])
        if len(spec.choices) <= MAX_CHOICES_SHOWN:
            return "one of " + shown_choices
        return (
            f"one of {len(spec.choices)} values, e.g. {shown_choices}, ... (see `meshsat fields`)"
        )
    if spec.kind == "int":
        lo = spec.minimum
        base = (
            "a positive integer"
            if lo == 1
            else "a non-negative integer"
            if lo == 0
            else "an integer"
        )
        return base + (" or none" if spec.optional else "")
    if spec.kind == "bool":
        return "true or false"
    if spec.kind == "float":
        return "a number"
    return "a string" + (" or none" if spec.optional else "")


def unknown_field(name: str, known: Mapping[str, Any] = CONFIG_SPECS) -> InputError:
    flag = "--" + name.replace("_", "-")
    by_flag = [n for n, s in CONFIG_SPECS.items() if flag in s.flags]
    close = by_flag or (
        difflib.get_close_matches(name, list(known), n=1) if len(name) <= 64 else []
    )
    hint = f"; did you mean {close[0]}?" if close else ""
    return InputError(f"unknown field {shown(name)}{hint} (`meshsat fields` lists them)")


def coerce(name: str, text: str) -> Any:
    """Parse a command-line string into the field's type."""
    spec = SPECS.get(name)
    if spec is None or spec.model_fact:
        raise unknown_field(name)
    t = text.strip()
    low = t.lower()
    if spec.optional and low in _NONE and t not in (spec.choices or ()):
        return None  # "none" stays a string where it is a choice (--elastic-ep-backend)
    if spec.kind == "int":
        try:
            number = int(t, 10)
        except ValueError:
            raise _bad(name, spec, text) from None
        _check_bound(name, number)
        return number
    if spec.kind == "float":
        try:
            real = float(t)
        except ValueError:
            raise _bad(name, spec, text) from None
        if not math.isfinite(real):
            raise InputError(f"{name} must be a finite number, got {shown(text)}")
        return real
    if spec.kind == "bool" or (spec.choices and set(spec.choices) <= {None, True, False}):
        if low in _TRUE:
            return True
        if low in _FALSE:
            return False
        raise _bad(name, spec, text)
    if spec.choices and t not in spec.choices:
        raise _bad(name, spec, text)
    return t


def _bad(name: str, spec: FieldSpec, text: str) -> InputError:
    """Built only on failure: a pasted command may set a field tens of thousands of times."""
    return InputError(f"{name} must be {accepted(spec)}, got {shown(text)}")


def _check_bound(name: str, value: Any) -> None:
    """Sizes above `MAX_GPUS` describe no machine: refused before any work is sized by them."""
    spec = SPECS.get(name)
    if (
        spec is not None
        and spec.size
        and isinstance(value, int)
        and not isinstance(value, bool)
        and value > MAX_GPUS
    ):
        raise InputError(f"{name} = {shown(value)} is above the limit of {MAX_GPUS} GPUs")


def _field_error(err: Mapping[str, Any], data: Mapping[str, Any]) -> InputError:
    loc = err.get("loc") or ()
    name = str(loc[0]) if loc else "?"
    if err.get("type") == "extra_forbidden":
        return unknown_field(name)
    spec = SPECS.get(name)
    value = data.get(name, err.get("input"))
    if spec is None:
        return InputError(f"{name}: {err.get('msg')}")
    return InputError(f"{name} must be {accepted(spec)}, got {shown(value)}")


def config_from_values(values: Mapping[str, Any]) -> Config:
    """Build a Config, turning the first validation problem into one readable line."""
    if not isinstance(values, Mapping):
        raise InputError(f"a layout must be a mapping, not {type(values).__name__}")
    data = {str(k).replace("-", "_"): v for k, v in values.items()}
    for k, v in data.items():
        if k not in CONFIG_SPECS:
            raise unknown_field(k)
        if isinstance(v, float) and not math.isfinite(v):
            raise InputError(f"{k} must be a finite number, got {v}")
        _check_bound(k, v)
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise _field_error(exc.errors()[0], data) from None


def as_config(config: Config | Mapping[str, Any]) -> Config:
    if isinstance(config, Config):
        return config
    if isinstance(config, Mapping):
        return config_from_values(config)
    raise InputError(f"a layout must be a Config or a mapping, not {type(config).__name__}")


def as_model(model: ModelSpec | Mapping[str, Any] | None) -> ModelSpec | None:
    if model is None or isinstance(model, ModelSpec):
        return model
    if isinstance(model, Mapping):
        if "architectures" in model or "model_type" in model:
            return ModelSpec.from_hf_config(model)
        try:
            return ModelSpec.model_validate(dict(model))
        except ValidationError as exc:
            err = exc.errors()[0]
            name = str(err["loc"][0]) if err.get("loc") else "?"
            raise InputError(f"model fact {shown(name)}: {err.get('msg')}") from None
    raise InputError(f"a model must be a ModelSpec or a mapping, not {type(model).__name__}")
