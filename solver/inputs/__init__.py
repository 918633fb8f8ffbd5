"""Adapters from outside vocabularies (files, `--set`, SGLang command lines, HF configs)
into the typed `Config` and `ModelSpec`, with one readable line for every bad input."""

from __future__ import annotations

from meshsat.solver.inputs.convert import as_config, as_model, coerce, config_from_values
from meshsat.solver.inputs.files import load_config_file
from meshsat.solver.inputs.layout_input import LayoutInput, LayoutSources, load_layout
from meshsat.solver.inputs.sglang_cmdline import ParsedCommandLine, parse_sglang_command

__all__ = [
    "LayoutInput",
    "LayoutSources",
    "ParsedCommandLine",
    "as_config",
    "as_model",
    "coerce",
    "config_from_values",
    "load_config_file",
    "load_layout",
    "parse_sglang_command",
]
