"""Whether a release has a model class for the model's architecture (MODEL-ARCH-SUPPORTED).

SGLang resolves `config.json`'s `architectures` only when the model loads
(`get_model_architecture` -> `ModelRegistry.resolve_model_cls`), never in `ServerArgs`
resolution, so the rule is a launch check. The registry's keys are the `EntryClass` names
of each release's `sglang/srt/models/*.py`, recorded per release by fidelity/model_archs.py
into solver/packs/model_archs.json (no aliases: the registry adds none).

- 0.4.6.post5 has no fallback: an architecture outside its registry stops the launch with
  "Model architectures [...] are not supported for now" (an error).
- 0.5.18 on hand such a model to the Transformers backend (`resolve_transformers_arch`),
  which serves it when the installed transformers has a compatible class and refuses it
  otherwise; meshsat cannot see the installed transformers, so there it is a warning.

meshsat reads the first entry of `architectures` (ModelSpec.architecture); without model
facts the rule is not checked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from meshsat.solver.lang.expr import Expr, is_set, ite, named, one_of
from meshsat.solver.lang.fields import F
from meshsat.solver.lang.rule import Rule

RULE_ID = "MODEL-ARCH-SUPPORTED"
#: Where the release resolves the architecture: when the model loader builds the model.
SRC = "model_loader/utils.py get_model_architecture"


@dataclass(frozen=True)
class Registry:
    """One release's model registry, as recorded."""

    version: str
    architectures: frozenset[str]
    #: 0.5.18 on: an architecture outside the registry goes to the Transformers backend.
    transformers_fallback: bool


@cache
def registries() -> Mapping[str, Registry]:
    """Every recorded release's registry, oldest first."""
    text = resources.files("meshsat.solver.packs").joinpath("model_archs.json").read_text()
    data = json.loads(text)
    return {
        v: Registry(v, frozenset(d["architectures"]), bool(d["transformers_fallback"]))
        for v, d in data.items()
    }


def newer_with(version: str, architecture: str) -> str | None:
    """The first recorded release after `version` whose registry has `architecture`."""
    names = list(registries())
    later = names[names.index(version) + 1 :] if version in names else []
    return next((v for v in later if architecture in registries()[v].architectures), None)


def _upgrade(version: str, missing: tuple[str, ...]) -> Expr:
    """The hint's advice per architecture: the first later release that has it."""
    names = list(registries())
    later = names[names.index(version) + 1 :]
    expr: Expr | str = (
        f"a model SGLang serves (no recorded release after {version} has a model class for it)"
    )
    for v in reversed(later):
        has = tuple(a for a in missing if a in registries()[v].architectures)
        if has:
            expr = ite(one_of(F.architecture, *has), f"--sglang-version {v} or newer", expr)
    if isinstance(expr, str):
        expr = ite(is_set(F.architecture), expr, expr)
    return named("arch_upgrade", expr)


def rule(version: str) -> Rule:
    """MODEL-ARCH-SUPPORTED for one release (its own registry and wording)."""
    reg = registries()[version]
    known = tuple(sorted(reg.architectures))
    # Every architecture some other release knows and this one lacks: the hint names the
    # release that added it.
    missing = tuple(
        sorted({a for r in registries().values() for a in r.architectures} - reg.architectures)
    )
    upgrade = _upgrade(version, missing)
    when = is_set(F.architecture) & (upgrade != "")
    if reg.transformers_fallback:
        return Rule(
            RULE_ID,
            when,
            one_of(F.architecture, *known),
            "{architecture} has no SGLang implementation, falling back to Transformers "
            "implementation. Some features may not be supported and performance may not be "
            f"optimal. (SGLang {version}'s model registry has no {{architecture}}; the launch "
            "fails unless the installed transformers has a compatible class.)",
            SRC,
            hint="{arch_upgrade}",
            severity="warning",
        )
    return Rule(
        RULE_ID,
        when,
        one_of(F.architecture, *known),
        "Model architectures ['{architecture}'] are not supported for now. Supported "
        f"architectures: the {len(known)} of SGLang {version}'s model registry.",
        SRC,
        hint="{arch_upgrade}",
    )
