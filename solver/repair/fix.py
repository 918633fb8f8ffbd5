"""`fix`: the nearest layout SGLang accepts, keeping what the user cares about.

A MaxSMT question over the single rule declaration: every error rule is hard (through the
exponent encoding of `meshsat.solver.backends.z3exp`), so are the pins (the input's value, typed
and as SGLang runs it: `meshsat.solver.repair.pins`), the model facts,
the hardware (`gpus_per_node`, `platform`) and, with `gpus`, the GPU count; keeping each
field's value is soft. Fields no rule reads never change.

The objective, defined here once (the tests' brute-force oracle re-derives it from these
words, not from this code), is a sequence of tiers: a later tier only ranks the fixes that
tie on every earlier one, so an earlier tier is given up only when no valid layout keeps it.
1. gpus: the layout uses the GPU count of the input (always kept under `gpus`, a hard
   constraint).
2. features: the number of the user's features not kept (`meshsat.solver.repair.features`): a
   feature the input has off that the fix turns on, or one the input has on that the fix
   turns off or leaves without a width that makes it work (DP attention with dp 1, prefill
   CP with attention CP 1). Which all-to-all backend is kept once chosen; choosing one
   where the input had none counts once, as "an MoE all-to-all backend". A hard feature
   (`Feature.hard`: joining a running elastic-EP job) that the input has off is not a
   tier but a constraint: no fix turns it on.
3. user_fields, then other_fields: the number of changed fields the user set, then the
   number of other changed fields (every field counts one).
4. size: the total size change, sum over sizes of |mbits(new) - mbits(old)|, where
   mbits(x) = sum over the prime factors p of x (with multiplicity) of round(1000*log2 p):
   1000*|log2(new/old)| with log2 p rounded to milli-bits, so that it is an exact integer.
Objective "changes" (the default) minimises the tiers in that order; "distance" puts the size
change (4) before the field counts (3), tiers 1 and 2 still first. Remaining ties go first
to the fewest changed fields set to a value SGLang rewrites (an alias such as
`--moe-runner-backend megamoe`), then, field by field (tool-only facts such as environment
variables first, then declaration order), to keeping the input's value, else the nearest one
(`meshsat.solver.repair.search`), so the same input always gives the same answer.

The search space: with `gpus=N` every size is a divisor of N (every size of a layout on N
GPUs divides N). Without it, sizes range over the divisors of M, the least common multiple of
the sizes the user set and the GPUs the input uses: fix then never grows a size beyond the
user's scale, but the GPU count may change, and the result says so.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from meshsat.solver.backends.render import condition, fmt_value
from meshsat.solver.backends.z3lock import z3_locked
from meshsat.solver.errors import InputError
from meshsat.solver.inputs import as_config, as_model
from meshsat.solver.inputs.command import launch_command
from meshsat.solver.inputs.convert import unknown_field
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.derived import DERIVED
from meshsat.solver.lang.expr import And, Cmp, Expr, IsSet, Not, lift
from meshsat.solver.lang.fields import CONFIG_SPECS, SPECS
from meshsat.solver.lang.limits import MAX_GPUS, MAX_TIMEOUT_S, items_of, shown
from meshsat.solver.lang.model_spec import MODEL_FACT_NAMES, ModelSpec
from meshsat.solver.packs import Pack, get_pack
from meshsat.solver.repair.features import FEATURES, turned_on
from meshsat.solver.repair.objective import TIER_WORDS, ZERO, objective_of, same_value
from meshsat.solver.repair.pins import pins_broken
from meshsat.solver.repair.results import (
    Change,
    Conflict,
    FixReport,
    FixResult,
    FixSelfCheckError,
    Relaxation,
    RuleRef,
)
from meshsat.solver.validation.undecided import undecided
from meshsat.solver.validation.validate import environment, validate

if TYPE_CHECKING:
    from meshsat.solver.backends.z3exp import Universe
    from meshsat.solver.memory import MemoryModel
    from meshsat.solver.repair.search import Outcome, Relaxed, Search

OBJECTIVES = ("changes", "distance")


# --- the command line -----------------------------------------------------------------------
def command_line(config: Config, pack: Pack | None = None, model_path: str | None = None) -> str:
    """The fix as the command a user pastes (`meshsat.solver.inputs.command`, shared with
    `plan` and `enumerate --command`)."""
    return launch_command(config, pack, model_path=model_path)


# --- the API --------------------------------------------------------------------------------
@z3_locked
def fix(
    config: Config | Mapping[str, Any],
    model: ModelSpec | Mapping[str, Any] | None = None,
    pins: Iterable[str] = (),
    gpus: int | None = None,
    objective: str = "changes",
    top: int = 1,
    timeout_s: float = 10,
    *,
    sglang_version: str | Pack | None = None,
    memory: MemoryModel | None = None,
    unknown: Mapping[str, str] | None = None,
) -> FixReport:
    """The `top` nearest valid layouts to `config`, best first, as a `FixReport`.

    `pins` name fields that keep the input's value, as typed and as SGLang runs it after its
    silent changes (an unset field stays unset; a valid input that SGLang runs with another
    value of a pin is repaired, `unpinned` names those); `gpus` makes the layout use exactly
    that many GPUs; `objective` is "changes" or "distance" (module docstring). A valid
    input (on `gpus` GPUs, when given) comes back unchanged as the only fix. With `top`
    above 1, each later fix keeps at least one field that each earlier fix changes (a real
    alternative: the same fields to other values, or more fields, are not) and prints
    another command (`FixReport.distinct`), so fewer may come back. `relaxed` says which
    tiers the best fix gives up and why.

    Pins that cannot all hold give `conflict`, a minimal set of pins and rules, and no fix.
    Every Z3 call is bounded by what is left of `timeout_s`: `optimal` says whether a fix
    is proven best, `timed_out` whether the time ran out (if it runs out while ties are
    broken, the objectives stay proven but which of the equals is returned may vary). Bad
    arguments raise `InputError`. `sglang_version` picks the release's rules (`validate`).
    With `memory` (a `meshsat.solver.memory.MemoryModel`: the model and the GPU), only layouts that
    load are proposed (`_fitting`); none fitting is a conflict naming `MEM-FIT`.
    `unknown` (field -> the value as written): fields a launch gives values meshsat cannot
    know, left at SGLang's default in `config`; a rule that fails only through them is not
    known to fail, so an input breaking nothing else is valid (`undecided` names those
    rules), and a fix of the rest starts from the defaults.
    Thread-safe: the whole call holds the process-wide Z3 lock (`meshsat.solver.backends.z3lock`).
    """
    pinned = _check_args(pins, gpus, objective, top, timeout_s)
    # Absurd timeouts (1e308) are capped: Z3 takes milliseconds as a machine integer.
    deadline_s = time.monotonic() + min(timeout_s, MAX_TIMEOUT_S)
    cfg, spec = as_config(config), as_model(model)
    pack = get_pack(sglang_version)
    report = undecided(validate(cfg, spec, explain=False, sglang_version=pack), unknown or {})
    before = int(report.derived["gpus_used"])
    if before > MAX_GPUS:  # each size is bounded, their product is not (limits.MAX_GPUS)
        raise InputError(
            f"the layout uses {shown(before)} GPUs; fix works up to the limit of {MAX_GPUS} GPUs"
        )
    # meshsat's advice is no error, but fix never proposes a layout that breaks it, so an
    # input that does is repaired too (Pack.constraints).
    advised = tuple(w.rule for w in report.warnings if w.rule in pack.advice)
    violations = tuple(v.rule for v in report.violations)
    user = cfg.user_set()
    from meshsat.solver.backends.z3exp import Universe

    if gpus is not None:
        universe = Universe.dividing(gpus)
    else:
        given = [getattr(cfg, n) for n in user if SPECS[n].size and not SPECS[n].tool_only]
        universe = Universe.dividing(math.lcm(before, *given, _fewest_gpus(memory, before)))
    base = FixReport(
        cfg,
        spec,
        objective,
        gpus,
        False,
        violations,
        before,
        universe.bound,
        fixes=(),
        advice=advised,
        undecided=report.undecided,
    )
    env = environment(cfg, spec)
    # A pin SGLang rewrites in the input itself is not kept by the input.
    spelling = "attn_dp_size" not in pack.absent_fields
    unpinned = pins_broken({n: env[n] for n in pinned}, report.resolved_env, env, spelling)
    base = _replace(base, unpinned=unpinned)
    # Valid by the rules, but its weights do not load: the fix repairs MEM-FIT too.
    heavy = memory is not None and report.valid and not _loads(memory, report)
    if report.valid and not advised and not unpinned and gpus in (None, before) and not heavy:
        unchanged = FixResult(
            cfg,
            (),
            report.notes,
            True,
            ZERO,
            command_line(cfg, pack),
            before,
            resolved=report.resolved_env,
        )
        return _replace(base, valid_input=True, fixes=(unchanged,))
    from meshsat.solver.repair import problem as fp
    from meshsat.solver.repair.search import Deadline, Search

    for name in pinned:
        value = getattr(cfg, name)
        if name in fp.changeable(pack) and SPECS[name].size and not universe.divides_bound(value):
            rule = _rule_ref(pack, fp.DIVIDE_RULE, gpus, universe.bound)
            return _replace(base, conflict=Conflict(((name, value),), (rule,)))
    beyond = fp.resolved_beyond(pack, frozenset(pinned))
    fixed = tuple((n, env[n]) for n in (*fp.FIXED_FACTS, *MODEL_FACT_NAMES, *sorted(beyond)))
    key = fp.Key(universe, gpus, fixed, pack, beyond)
    keep_gpus = before if gpus is None else None

    def _fitting(search: Search, objective: str, pins: list[str], top: int) -> Outcome:
        """The search, again each time a fix does not load: its memory shape (every value the
        memory model reads) is excluded and the question asked anew, so what comes back is
        the best layout among those that load. Fitting is not linear arithmetic over sizes
        (it is the model's bytes over the GPU's), so it is checked in Python, not encoded."""
        while True:
            outcome = search.run(objective, pins, top, why=memory is None)
            if memory is None or outcome.conflict is not None or not outcome.found:
                return outcome if memory is None else search.explained(outcome, pins)
            heavy = [
                shape
                for f in outcome.found
                if not _loads(memory, (shape := _checked(pack, cfg, spec, f.values)))
            ]
            if not heavy or search.deadline.ms() <= 0:
                if heavy:  # out of time: keep only what loads
                    outcome.found = [
                        f
                        for f in outcome.found
                        if _loads(memory, _checked(pack, cfg, spec, f.values))
                    ]
                    outcome.timed_out = True
                return search.explained(outcome, pins)
            live = set(fp.changeable(pack))
            if not memory.facts.is_moe:  # without experts the MoE widths move no byte
                live -= set(_MOE_FIELDS)
            widths = _MEMORY_WIDTHS if memory.facts.is_moe else _DENSE_WIDTHS
            for r in heavy:
                # Weights that leave no pool whatever else changes: one block for every
                # layout sharing them (dp, CP, DCP and the rest of the shape do not move a
                # weight byte), not one per shape.
                heavy_weights = _weights_alone_too_heavy(memory, r)
                fields = _WEIGHT_FIELDS if heavy_weights else _MEMORY_FIELDS
                read = _WEIGHT_WIDTHS if heavy_weights else widths
                search.blocked.append(search.enc.formula(_other_shape(r, live, fields, read)))

    searched = set(fp.changeable(pack)) | beyond  # the others hold as they are
    wanted = [n for n in pinned if n in searched]

    def _ask(prob: fp.Problem, guarded: bool) -> tuple[Search, Outcome]:
        """The question on `prob`, under its lock. `guarded`: a shared solver keeps what
        earlier questions taught it, which now and then makes a later one pathologically
        slow (`fp.STALE_CHECK_MS`), so on a problem that has served before the first check
        gets a slice of the time (a stall is then asked again of a fresh problem)."""
        search = Search(prob, env, user, keep_gpus, Deadline(deadline_s - time.monotonic()))
        search.prefer = violations
        if memory is not None:
            # Widths whose lightest layout cannot hold the weights are excluded before the
            # search: one at a time, each proposed, found heavy and blocked, they ran out the
            # timeout (Qwen3-235B at `--tp 6` on H100: no fix in 60 s).
            tp, pp = SPECS["tp_size"].ref, SPECS["pp_size"].ref
            attn_tp = next(w for w in DERIVED if w.name == "attn_tp")
            for t, s, a in _too_heavy_widths(memory, universe, gpus):
                these = And(
                    Cmp("==", tp, lift(t)), Cmp("==", pp, lift(s)), Cmp("==", attn_tp, lift(a))
                )
                search.blocked.append(prob.enc.formula(Not(these)))
        with prob.lock:
            if guarded and prob.calls:
                search.first_check_ms = max(fp.STALE_CHECK_MS, search.deadline.ms() // 4)
            prob.calls += 1
            return search, _fitting(search, objective, wanted, top)

    search, outcome = _ask(fp.problem(key), guarded=True)
    if outcome.stalled:  # with what is left of the time
        search, outcome = _ask(fp.fresh_problem(key), guarded=False)
    if search.blocked and outcome.conflict is not None:
        return _replace(base, conflict=_no_fit(cfg, pinned, memory))
    if search.blocked and not outcome.found:  # out of time before a layout that loads
        return _replace(base, timed_out=True)
    if outcome.conflict is not None:
        pin_names, rule_ids = outcome.conflict
        rules = tuple(_rule_ref(pack, r, gpus, universe.bound) for r in rule_ids)
        conflict = Conflict(
            tuple((n, getattr(cfg, n)) for n in pin_names), rules or _rewrites(report, pin_names)
        )
        return _replace(base, conflict=conflict)
    fixes = tuple(
        _result(
            pack,
            cfg,
            spec,
            f.values,
            f.optimal,
            gpus,
            before,
            (*violations, *advised, *(("MEM-FIT",) if heavy else ())),
            f.proven,
            f.tier_ms,
            pinned,
        )
        for f in outcome.found
    )
    relaxed = tuple(
        _relaxation(pack, cfg, r, before, gpus, universe.bound) for r in outcome.relaxed
    )
    return _replace(base, fixes=fixes, timed_out=outcome.timed_out, relaxed=relaxed).distinct()


def _relaxation(
    pack: Pack, cfg: Config, why: Relaxed, before: int, gpus: int | None, bound: int
) -> Relaxation:
    """A relaxed tier in words: what no layout keeps, and what gives way."""
    pins = " and ".join(f"{n} {fmt_value(getattr(cfg, n))}" for n in why.pins)
    with_pins = f" with {pins}" if pins else ""
    rules = tuple(_rule_ref(pack, r, gpus, bound) for r in why.rules)
    ids = ", ".join(r.id for r in rules) or "the rules"
    if why.tier == "gpus":
        text = f"no layout on {before} GPUs{with_pins} satisfies {ids}; the GPU count changes"
    else:
        was_on = dict(zip((f.name for f in FEATURES), turned_on(cfg.model_dump()), strict=True))
        kept = [f.kept_words(was_on[f.name]) for f in FEATURES if f.name in why.features]
        on = f"{gpus or before} GPUs"
        text = (
            f"no layout on {on}{with_pins} keeps {' and '.join(kept) or 'the feature set'} "
            f"({ids}); {TIER_WORDS['features']} changes"
        )
    return Relaxation(why.tier, text, rules, why.pins, why.features)


def _check_args(
    pins: Iterable[str], gpus: int | None, objective: str, top: int, timeout_s: float
) -> tuple[str, ...]:
    names = []
    for pin in items_of(pins, "pins"):
        name = pin.strip().replace("-", "_")
        if name not in CONFIG_SPECS:
            raise unknown_field(name)
        names.append(name)
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1):
        raise InputError(f"--gpus must be a positive integer, got {shown(gpus)}")
    if gpus is not None and gpus > MAX_GPUS:
        raise InputError(f"--gpus {shown(gpus)} is above the limit of {MAX_GPUS} GPUs")
    if objective not in OBJECTIVES:
        raise InputError(f"--objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    if isinstance(top, bool) or not isinstance(top, int) or top < 1:
        raise InputError(f"--top must be a positive integer, got {top!r}")
    number = isinstance(timeout_s, int | float) and not isinstance(timeout_s, bool)
    if not number or not 0 < timeout_s < math.inf:
        raise InputError(f"--timeout must be a positive number of seconds, got {shown(timeout_s)}")
    return tuple(dict.fromkeys(names))


def _result(
    pack: Pack,
    cfg: Config,
    spec: ModelSpec | None,
    values: Mapping[str, Any],
    optimal: bool,
    gpus: int | None,
    before: int,
    repairs: tuple[str, ...],
    proven: Mapping[str, bool],
    tier_ms: Mapping[str, float],
    pins: tuple[str, ...] = (),
) -> FixResult:
    data = _fixed_values(cfg, values)
    new = Config.model_validate(data)
    changed = [n for n in CONFIG_SPECS if not same_value(getattr(new, n), getattr(cfg, n))]
    report = validate(new, spec, explain=False, sglang_version=pack)
    used = int(report.derived["gpus_used"])
    advised = [w.rule for w in report.warnings if w.rule in pack.advice]
    # The pins as SGLang runs the layout, checked by the plain evaluator, not by Z3.
    unpinned = pins_broken(
        {n: getattr(cfg, n) for n in pins},
        report.resolved_env,
        environment(new, spec),
        "attn_dp_size" not in pack.absent_fields,
    )
    if not report.valid or advised or unpinned or (gpus is not None and used != gpus):
        broken = ", ".join(
            [*(v.rule for v in report.violations), *advised, *(f"pin {n}" for n in unpinned)]
        )
        broken = broken or f"uses {used} GPUs"
        raise FixSelfCheckError(f"fix produced an invalid layout ({broken}): {data}")
    # A field put back to unset where SGLang resolves the user's value anyway is no change.
    same = frozenset(
        n
        for n in changed
        if getattr(new, n) is None and same_value(report.resolved_env.get(n), getattr(cfg, n))
    )
    changes = tuple(
        Change(n, getattr(cfg, n), getattr(new, n))
        for n in CONFIG_SPECS
        if n in changed and n not in same
    )
    # What goes with a feature switched off is shown, but the switch is what it costs.
    dropped = frozenset(n for n in changed if n not in values)
    return FixResult(
        new,
        changes,
        report.notes,
        optimal,
        objective_of(
            cfg,
            new,
            before if gpus is None else gpus,
            used,
            unchanged=same | dropped,
            resolved=report.resolved_env,
        ),
        command_line(new, pack),
        used,
        repairs=repairs,
        proven=dict(proven),
        tier_ms=dict(tier_ms),
        resolved=report.resolved_env,
    )


#: What the memory model reads of a layout (`Parallel.from_resolved`): two layouts that agree
#: on these load the same.
#: `chunked_prefill_size` moves the default `mem_fraction_static` too, but it is open-ended (any
#: integer): blocking it value by value never ends, so a shape is blocked at every chunk size.
#: So are the sizing flags (`memory.SIZING_FIELDS`, which `_loads` reads as each candidate
#: resolves them): a search that fails to fit would otherwise try each of their values in
#: turn before it gives up.
_MEMORY_FIELDS = (
    "tp_size", "pp_size", "dp_size", "attn_cp_size", "ep_size", "moe_dp_size", "dcp_size",
    "moe_dense_tp_size", "enable_dp_attention", "enable_dp_lm_head",
)  # fmt: skip
_MEMORY_WIDTHS = ("attn_tp", "attn_dp", "moe_tp", "replicas")
#: What the weights read (`meshsat.solver.memory.weights`: tp, pp, EP, the dense TP, DP
#: attention and the DP LM head, and the attention and MoE widths derived from them).
_WEIGHT_FIELDS = (
    "tp_size", "pp_size", "ep_size", "moe_dense_tp_size", "enable_dp_attention",
    "enable_dp_lm_head",
)  # fmt: skip
_WEIGHT_WIDTHS = ("attn_tp", "moe_tp")
#: What only a model with experts reads (`meshsat.solver.memory.weights`: the expert term).
_MOE_FIELDS = ("ep_size", "moe_dp_size")
_DENSE_WIDTHS = ("attn_tp", "attn_dp", "replicas")


def _checked(pack: Pack, cfg: Config, spec: ModelSpec | None, values: Mapping[str, Any]) -> Any:
    """The validation report of a fix's layout (what `_result` builds, before it is one)."""
    new = Config.model_validate(_fixed_values(cfg, values))
    return validate(new, spec, explain=False, sglang_version=pack)


#: Fields that only tune a feature, by the field that switches it on: a fix that switches
#: the feature off drops them with it (the command loses their flags too,
#: `meshsat.solver.inputs.rewrite`).
DEPENDENT = {
    "speculative_algorithm": (
        "speculative_num_draft_tokens",
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_ngram_max_bfs_breadth",
    )
}


def _fixed_values(cfg: Config, values: Mapping[str, Any]) -> dict[str, Any]:
    changed = [n for n, v in values.items() if not same_value(v, getattr(cfg, n))]
    keep = set(cfg.user_set()) | set(changed)
    for switch, fields in DEPENDENT.items():
        if switch in changed and values[switch] is None:
            keep -= set(fields)
    return {n: (values[n] if n in values else getattr(cfg, n)) for n in CONFIG_SPECS if n in keep}


def _fewest_gpus(memory: MemoryModel | None, before: int) -> int:
    """A GPU count the sizes searched must include when the input's cannot hold the model:
    the least power of two above it at which plain TP loads. Without it a model too big
    for the input's GPUs was searched only on the divisors of that count, none of which
    loads (Qwen3-235B at `--tp 6` on H100: tp 2 x pp 6 after 60 s, where tp 8 loads)."""
    from meshsat.solver.memory import Parallel

    def loads(n: int) -> bool:
        return memory is not None and memory.of(Parallel(tp=n, attn_tp=n, moe_tp=n)).fits

    if memory is None or loads(before):
        return 1
    n = 1 << before.bit_length()
    while n < MAX_GPUS and not loads(n):
        n *= 2
    return n if loads(n) else 1


def _lightest(memory: MemoryModel, tp: int, pp: int, attn_tp: int) -> float:
    """The least weights a rank of any layout of these widths holds (GiB, the heaviest
    stage): dense layers and the LM head over all of `tp`, the experts over EP or over MoE
    TP, with or without DP attention, whichever is lightest. `tests/test_fix_memory.py` checks it
    is a lower bound on every enumerated layout of several models."""
    from meshsat.solver.memory import Parallel

    experts = [(1, tp), (tp, 1)] if memory.facts.is_moe else [(1, tp)]
    return min(
        memory.of(
            Parallel(
                tp=tp,
                pp=pp,
                attn_tp=attn_tp,
                attn_dp=tp // attn_tp,
                ep=ep,
                moe_tp=moe_tp,
                dp_attention=dpa,
            )
        ).weights_gib
        for ep, moe_tp in experts
        for dpa in (False, True)
    )


def _ceiling_gib(memory: MemoryModel, tp: int, pp: int) -> float:
    """The most a rank's weights may take and leave a KV pool, at the given
    `mem_fraction_static` or else the highest a default (or the raise, where the memory
    model raises it) reaches."""
    from meshsat.solver.memory.fraction import highest_default_fraction, highest_fraction

    f = memory.fraction
    if f is None:
        highest = highest_fraction if memory.raise_default_fraction else highest_default_fraction
        f = highest(memory.gpu.memory_mib, tp=tp, pp=pp, pack=memory.pack) + 1e-3
    return memory.pre_load_gib * f - memory.multimodal_reserve_gib


def _too_heavy_widths(
    memory: MemoryModel, universe: Universe, gpus: int | None
) -> list[tuple[int, int, int]]:
    """(tp, pp, attn_tp) among the sizes searched whose lightest layout leaves no KV pool.
    Without a GPU count the search multiplies sizes past the universe's bound (tp 8 x pp 8
    from the divisors of 8), so every pair of sizes is a candidate."""
    sizes = universe.divisors()
    return [
        (t, s, a)
        for t in sizes
        for s in sizes
        if gpus is None or t * s <= gpus
        for a in sizes
        if t % a == 0 and _lightest(memory, t, s, a) >= _ceiling_gib(memory, t, s)
    ]


def _memory(memory: MemoryModel, report: Any) -> Any:
    """The `Memory` of a validated layout, sized by its own resolved flags as validate
    sizes it (`MemoryModel.of_layout`): a fix that makes a server a PD decode engine runs
    it without the radix cache, whatever the input typed."""
    return memory.of_layout(report.resolved, report.derived, report.config.model_dump())


def _loads(memory: MemoryModel, report: Any) -> bool:
    return bool(_memory(memory, report).fits)


def _weights_alone_too_heavy(memory: MemoryModel, report: Any) -> bool:
    """Whether this layout's weights leave no KV pool at any `mem_fraction_static` SGLang
    could run it with (`_ceiling_gib`)."""
    from meshsat.solver.memory import Parallel

    p = Parallel.from_resolved(report.resolved, report.derived)
    return bool(_memory(memory, report).weights_gib >= _ceiling_gib(memory, p.tp, p.pp))


def _other_shape(
    report: Any, live: set[str], fields: tuple[str, ...], widths_read: tuple[str, ...]
) -> Expr:
    """A layout that differs from this report's in `fields` or `widths_read` (its memory
    shape, or what its weights read). Only fields fix can change take part: the others
    keep the input's value in every candidate, and the search leaves their variables
    free, so a condition on them would exclude nothing."""
    same: list[Expr] = []
    for name in (n for n in fields if n in live):
        value, ref = report.resolved[name], SPECS[name].ref
        same.append(Not(IsSet(ref)) if value is None else Cmp("==", ref, lift(value)))
    widths = {w.name: w for w in DERIVED}
    same += [Cmp("==", widths[n], lift(int(report.derived[n]))) for n in widths_read]
    return Not(And(*same))


def _no_fit(cfg: Config, pinned: tuple[str, ...], memory: MemoryModel | None) -> Conflict:
    where = f" on {memory.gpu.name} ({memory.gpu.memory_gib:.0f} GiB)" if memory else ""
    rule = RuleRef(
        "MEM-FIT",
        "weights + SGLang's reserve <= GPU memory",
        f"no layout that satisfies the rules{' and keeps the pins' if pinned else ''} loads "
        f"the model{where} within the sizes searched; pass --gpus N with more GPUs",
    )
    return Conflict(tuple((n, getattr(cfg, n)) for n in pinned), (rule,))


def _rewrites(report: Any, pins: Iterable[str]) -> tuple[RuleRef, ...]:
    """For pins that conflict through no rule at all: the input's own silent changes to them.
    Such pins hold as typed in the input, so SGLang rewrites one there (`--schedule-
    conservativeness` pinned beside `--enable-dp-attention`, which scales it)."""
    pinned = set(pins)
    return tuple(
        RuleRef(
            note.resolution,
            f"SGLang runs {note.field} {fmt_value(note.new)}, not {fmt_value(note.old)}",
            f"{note.because} (a pin holds the value SGLang runs with)",
        )
        for note in report.notes
        if note.field in pinned
    )


def _rule_ref(pack: Pack, rule_id: str, gpus: int | None, bound: int) -> RuleRef:
    """A catalogue rule, or one of fix's own constraints, for a conflict."""
    if rule_id in pack.by_id:
        rule = pack.by_id[rule_id]
        # The wording's {field} placeholders have no single value in a conflict.
        return RuleRef(rule_id, condition(rule), re.sub(r"\{\w+(?::\w+)?\}", "…", rule.message))
    if rule_id == "MEM-FIT":
        return RuleRef(
            rule_id,
            "weights + SGLang's reserve <= GPU memory",
            "the layout must load the model on the GPU (--gpu)",
        )
    if rule_id == "FIX-GPUS":
        return RuleRef(rule_id, f"gpus_used == {gpus}", f"the layout must use {gpus} GPUs (--gpus)")
    if rule_id == "FIX-GPUS-DIVIDE":
        if gpus is not None:
            return RuleRef(
                rule_id, f"every size divides {gpus}", f"a size on {gpus} GPUs divides {gpus}"
            )
        return RuleRef(
            rule_id,
            f"every size divides {bound}",
            f"sizes are searched among the divisors of {bound}, the least common multiple of "
            "the sizes given and the GPUs used; pass --gpus N to search others",
        )
    return RuleRef(
        rule_id,
        "SGLang's integer divisions of sizes are exact",
        "fix searches layouts whose size quotients (attn_tp, tp / attn_dp) are whole",
    )


def _replace(report: FixReport, **changes: Any) -> FixReport:
    from dataclasses import replace

    return replace(report, **changes)
