"""validate and check: every violated rule, not just the first, in microseconds.

Validation evaluates the compiled catalogue in Python. Z3 is imported only to explain
an invalid layout (which user-set fields jointly conflict), so a server validating its
arguments at start-up never pays for the solver.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import replace
from itertools import groupby
from types import MappingProxyType
from typing import Any

from meshsat.solver.backends.pyeval import StepChange, compiled
from meshsat.solver.backends.render import failure_detail, format_message
from meshsat.solver.catalogue.quantization import QUANT_CHECKPOINT, QUANT_METHOD, served
from meshsat.solver.inputs import as_config, as_model
from meshsat.solver.inputs.spelling import DP_GROUP, spelled
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.limits import flag_of
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import Pack, get_pack, installed_pack
from meshsat.solver.validation.report import InvalidLayoutError, Note, Report, Violation

_NO_MODEL: dict[str, Any] = dict(ModelSpec().__dict__)


def environment(config: Config, model: ModelSpec | None) -> dict[str, Any]:
    """The raw evaluation environment: config fields and model facts in one mapping."""
    facts = _NO_MODEL if model is None else model.__dict__
    return {**config.__dict__, **facts}


def _violation(
    pack: Pack, index: int, resolved: Mapping[str, Any], raw: Mapping[str, Any]
) -> Violation:
    rule = pack.rules[index]
    return Violation(
        rule=rule.id,
        message=format_message(rule, resolved),
        fields=rule.fields,
        detail=failure_detail(rule, resolved, raw),
        hint=format_message(replace(rule, message=rule.hint), resolved),
        source=rule.source,
        severity=rule.severity,
        stage=pack.stage(rule.id),
    )


def validate(
    config: Config | Mapping[str, Any],
    model: ModelSpec | Mapping[str, Any] | None = None,
    *,
    explain: bool | None = None,
    sglang_version: str | Pack | None = None,
) -> Report:
    """Check a layout against every rule of one SGLang release.

    `explain=None` computes the conflicting fields only when the layout is invalid;
    `False` never does (no Z3 import), `True` always tries. `sglang_version` picks the
    release's pack ("0.5.23", "installed"); the newest pack without one.
    """
    if explain is not None:
        flag_of(explain, "explain")
    cfg = as_config(config)
    spec = as_model(model)
    pack = get_pack(sglang_version)
    c = compiled(pack)
    raw = environment(cfg, spec)
    resolved, changes = c.resolve(raw)
    failed = c.violations(resolved, raw)
    errors: list[Violation] = []
    warnings: list[Violation] = []
    for i in failed:
        (warnings if pack.rules[i].severity == "warning" else errors).append(
            _violation(pack, i, resolved, raw)
        )
    steps = pack.resolutions
    derived = c.derived(resolved)
    user = cfg.user_set()

    def visible(name: str, undone: tuple[tuple[str, Any], ...]) -> bool:
        # Undo just this change: if no width, GPU count or CP outcome moves, the user
        # cannot see it (unless it overrides their own value).
        return name in user or any(c.derived({**resolved, n: o}) != derived for n, o in undone)

    spelling = "attn_dp_size" not in pack.absent_fields
    notes = tuple(
        Note(
            steps[ri].id,
            name,
            old,
            new,
            steps[ri].because,
            steps[ri].source,
            visible(name, undone),
        )
        for ri, si, name, old, new, undone in _as_released(raw, changes, spelling)
        if not steps[ri].steps[si].quiet
    )
    notes += _loader_notes(pack, spec, resolved, errors)
    valid = not errors
    conflict = None
    if explain or (explain is None and not valid):
        from meshsat.solver.validation.explain import conflict_core

        conflict = conflict_core(cfg, spec, raw, pack) if not valid else ()
    return Report(
        valid=valid,
        config=cfg,
        model=spec,
        violations=tuple(errors),
        warnings=tuple(warnings),
        notes=notes,
        derived=MappingProxyType(derived),
        resolved_env=MappingProxyType(resolved),
        conflict=conflict,
        sglang_version=pack.version,
        attn_dp_spelling=spelling,
    )


#: One silent change as a note says it: (step, assignment, field, old, new, the internal
#: (field, old) pairs that undo it).
_Change = tuple[int, int, str, Any, Any, tuple[tuple[str, Any], ...]]


def _as_released(
    raw: Mapping[str, Any], changes: list[StepChange], attn_dp_spelling: bool
) -> Iterator[_Change]:
    """The resolution's changes in the release's spelling. From 0.5.23 on a change to
    meshsat's internal `dp_size` / `enable_dp_attention` is said as the change to the
    release's own `attn_dp_size` and `dp_size` (DWDP sets attn_dp_size = dwdp and dp_size
    = 1 there, not dp_size = dwdp): each assignment's attention-DP fields are spelled before
    and after it, where its first one changed."""
    if not attn_dp_spelling:
        yield from ((ri, si, n, old, new, ((n, old),)) for ri, si, n, old, new in changes)
        return
    state = dict(raw)
    for (ri, si), group in groupby(changes, key=lambda ch: (ch[0], ch[1])):
        made = list(group)
        dp = tuple((name, old) for _, _, name, old, _ in made if name in DP_GROUP)
        before = spelled(state, attn_dp_spelling) if dp else {}
        state.update((name, new) for _, _, name, _, new in made)
        said = False
        for _, _, name, old, new in made:
            if name not in DP_GROUP:
                yield ri, si, name, old, new, ((name, old),)
            elif not said:
                said = True
                after = spelled(state, attn_dp_spelling)
                for f in sorted(DP_GROUP):
                    if before[f] != after[f]:
                        yield ri, si, f, before[f], after[f], dp


def _loader_notes(
    pack: Pack, spec: ModelSpec | None, resolved: Mapping[str, Any], errors: list[Violation]
) -> tuple[Note, ...]:
    """What the model loader serves when the checkpoint's override replaces the typed
    `--quantization` (`catalogue.quantization.served`: a ModelOpt export's own method,
    GPTQ / AWQ's Marlin for `marlin`). Not a resolution step: `server_args` keeps the typed
    value, which later handlers read; only `ModelConfig.quantization` changes."""
    typed = resolved.get("quantization")
    if spec is None or typed is None or QUANT_CHECKPOINT.id not in pack.by_id:
        return ()
    if any(v.rule in (QUANT_METHOD, QUANT_CHECKPOINT.id) for v in errors):
        return ()
    got = served(spec.quant_method, typed)
    if got is None:
        return ()
    because = (
        f"the checkpoint's {spec.quant_method} overrides it in the model loader (the "
        "server's arguments keep the typed value)"
    )
    return (
        Note(
            "R-LOADER-QUANT",
            "quantization",
            typed,
            got,
            because,
            "ModelConfig._verify_quantization",
        ),
    )


def check(
    config: Config | Mapping[str, Any],
    model: ModelSpec | Mapping[str, Any] | None = None,
    *,
    explain: bool | None = False,
    sglang_version: str | Pack | None = None,
) -> Report:
    """Validate, raising one `InvalidLayoutError` that carries every violated rule.

    For servers at start-up the default imports no solver, even on failure; `explain` is
    `validate`'s, for callers that show the conflict to a person. Without `sglang_version`
    the rules are those of the SGLang installed in this process (read from its package
    metadata, never imported), else the newest pack's.
    """
    pack = installed_pack() if sglang_version is None else get_pack(sglang_version)
    report = validate(config, model, explain=explain, sglang_version=pack)
    if not report.valid:
        raise InvalidLayoutError(report)
    return report
