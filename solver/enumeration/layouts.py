"""`meshsat.solver.enumerate` (`enumerate_layouts` here) and `count`: every legal layout for N GPUs,
at the speed of the output.

Design (from the measurements in docs/encodings.md): Z3 enumerating whole layouts with
blocking clauses manages hundreds per second, while a Python generator over divisor
lists that prunes with compiled rules produces millions. So the catalogue is
specialised to the base config and model (`layout_problem`), flags that change the
arithmetic (DP attention changes `attn_dp` and the GPU count) are fixed one
combination at a time, the numeric fields are bound in generated loops
(`layout_codegen`), and the remaining flags are completed per numeric signature from
a table that Z3 fills once per signature (`completions`).

What is listed:
- only layouts where every error rule holds and the GPUs used (`gpus_used`: tp·pp
  with DP attention, dp·tp·pp without) equal N, or lie in 1..N with `up_to`;
- only fixed points of SGLang's silent resolution *on the varied fields*, so no
  launch appears twice: dp_size 1 with DP attention is not listed (SGLang turns DP
  attention off, which is the other listed layout), and with a base
  `moe_a2a_backend: deepep` only ep_size == tp_size is. Fields that are not varied
  may still be resolved; `Layout.config` shows the resolved values.
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ParamSpec

from meshsat.solver.backends.partial import atoms, conjuncts, is_const, replace_atoms, specialise
from meshsat.solver.backends.z3lock import Z3_LOCK
from meshsat.solver.enumeration.codegen import Spec, generate
from meshsat.solver.enumeration.completions import Table, make, placeholder
from meshsat.solver.enumeration.node_locality import within_nodes
from meshsat.solver.enumeration.problem import GPUS, EnumerationProblem, build_problem
from meshsat.solver.enumeration.space import DEFAULT_VARY, Dim, dims_of, divisors, varied_fields
from meshsat.solver.enumeration.where import parse
from meshsat.solver.errors import InputError
from meshsat.solver.inputs import as_config, as_model
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.derived import DERIVED
from meshsat.solver.lang.expr import Const, Expr, fields_of
from meshsat.solver.lang.fields import SPECS
from meshsat.solver.lang.limits import MAX_GPUS, flag_of, items_of, shown
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import NEWEST, Pack, get_pack

#: Derived widths every output format shows, after the varied and resolved fields.
KEY_DERIVED: tuple[str, ...] = ("attn_dp", "attn_tp", "moe_tp", "gpus_used")
_DERIVED_NAMES = tuple(d.name for d in DERIVED)


@dataclass(frozen=True, eq=False)
class Shape:
    """What the rows of one enumerator mean: shared by all its layouts (compared by
    identity, so a `Layout` is hashable and equal only within one enumeration)."""

    vary: tuple[str, ...]
    #: Config field -> position in the row (varied and layout-dependent fields).
    config_index: Mapping[str, int]
    #: Resolved values of the other config fields, the same for every layout.
    constant: Mapping[str, Any]
    #: Derived width -> position in the row.
    derived_index: Mapping[str, int]
    #: Every config field, in declaration order.
    fields: tuple[str, ...]
    #: The model's facts (None where unknown): what a later stage's filter reads when it
    #: names a derived width that depends on them (`shared_tp`, `mlp_tp`).
    facts: Mapping[str, Any]


class _RowMapping(Mapping[str, Any]):
    """A read-only dict view of one row: building real dicts for millions of layouts
    would cost more than generating them."""

    __slots__ = ("_constant", "_index", "_keys", "_row")

    def __init__(
        self,
        row: tuple[Any, ...],
        index: Mapping[str, int],
        constant: Mapping[str, Any],
        keys: tuple[str, ...],
    ) -> None:
        self._row, self._index, self._constant, self._keys = row, index, constant, keys

    def __getitem__(self, key: str) -> Any:
        i = self._index.get(key)
        if i is not None:
            return self._row[i]
        return self._constant[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return repr(dict(self))


@dataclass(frozen=True)
class Layout:
    """One legal layout: every config field after SGLang's resolution, and the widths.

    `config` maps every config field to its resolved value and `derived` every derived
    width to its value (read-only mappings). `vary` names the enumerated fields, whose
    values are what SGLang is launched with: resolution leaves them unchanged.
    """

    row: tuple[Any, ...]
    shape: Shape = field(repr=False)

    @property
    def config(self) -> Mapping[str, Any]:
        s = self.shape
        return _RowMapping(self.row, s.config_index, s.constant, s.fields)

    @property
    def derived(self) -> Mapping[str, Any]:
        s = self.shape
        return _RowMapping(self.row, s.derived_index, {}, _DERIVED_NAMES)

    @property
    def vary(self) -> tuple[str, ...]:
        return self.shape.vary

    @property
    def values(self) -> dict[str, Any]:
        index = self.shape.config_index
        return {n: self.row[index[n]] for n in self.shape.vary}

    def as_config(self) -> Config:
        """The layout as launched (`values`), what `solver.validate` and `groups` take back.
        Not the resolved `config`: every field of it counts as typed, so a release without
        a resolved legacy field's flag (0.5.23's `enable_prefill_context_parallel`) refused
        the layout it had just listed (FLAG-ABSENT-*)."""
        return Config.model_validate(self.values)

    def __repr__(self) -> str:
        return f"Layout({self.values!r})"


@dataclass
class _Combo:
    """One combination of the flags fixed outside the loops, and its compiled code."""

    spec: Spec
    table: Table
    #: The flag constraints the table solves, numeric atoms replaced by stand-ins.
    flag_constraints: tuple[Expr, ...] = ()
    _rows: Callable[..., Any] | None = None
    _count: Callable[..., Any] | None = None

    def args(self, gpus: int, ctx: _Domain) -> tuple[Any, ...]:
        return (
            gpus,
            ctx.values,
            ctx.members,
            ctx.divs,
            ctx.merge,
            self.table.memo,
            self.table.solve,
        )

    def rows(self, gpus: int, ctx: _Domain) -> Iterator[tuple[Any, ...]]:
        if self._rows is None:
            self._rows = generate(self.spec, "rows")
        it: Iterator[tuple[Any, ...]] = self._rows(*self.args(gpus, ctx))
        return it

    def count(self, gpus: int, ctx: _Domain) -> int:
        if self._count is None:
            self._count = generate(self.spec, "count")
        return int(self._count(*self.args(gpus, ctx)))


def _no_flags(sig: tuple[bool, ...]) -> tuple[tuple[Any, ...], ...]:
    return ((),)


class _Domain:
    """The divisors of one N, with the memoised helpers the generated loops call."""

    def __init__(self, gpus: int) -> None:
        self.values = divisors(gpus)
        self.members = frozenset(self.values)
        self._divs: dict[int, tuple[int, ...]] = {}
        self._merged: dict[tuple[tuple[int, ...], tuple[int, ...]], tuple[int, ...]] = {}

    def divs(self, m: int) -> tuple[int, ...]:
        hit = self._divs.get(m)
        if hit is None:
            members = self.members
            hit = self._divs[m] = tuple(d for d in divisors(m) if d in members)
        return hit

    def merge(self, extra: tuple[int, ...], cands: tuple[int, ...]) -> tuple[int, ...]:
        key = (extra, cands)
        hit = self._merged.get(key)
        if hit is None:
            hit = self._merged[key] = tuple(sorted(set(extra) | set(cands)))
        return hit


class Enumerator:
    """The catalogue compiled for one base, model, space and filters; runs for any N.

    Building one costs milliseconds (specialisation and code generation); `rows` and
    `count` then run at generator speed. `columns` names the values of each row.
    """

    def __init__(self, query: EnumerationQuery) -> None:
        self.query = query
        self.base, self.model, self.dims = query.base, query.model, query.dims
        self.problem: EnumerationProblem = build_problem(
            query.base, query.model, query.dims, query.where, query.intra_node, query.pack
        )
        self.columns = self.problem.columns
        self.vary = varied_fields(query.dims)
        self.combos: list[_Combo] = []
        if not self.problem.infeasible:
            self._split(query.completions)
        n_config = len(self.vary) + len(self.problem.dependent)
        self.shape = Shape(
            vary=self.vary,
            # Read-only views: the shape is shared by every layout this cached
            # enumerator yields, so a caller writing to one must not change the others.
            config_index=MappingProxyType({c: i for i, c in enumerate(self.columns[:n_config])}),
            constant=MappingProxyType(dict(self.problem.constant)),
            derived_index=MappingProxyType({c: i + n_config for i, c in enumerate(_DERIVED_NAMES)}),
            fields=tuple(n for n in SPECS if not SPECS[n].model_fact),
            facts=MappingProxyType(dict(self.problem.facts)),
        )

    @property
    def output_columns(self) -> tuple[str, ...]:
        """What the command line prints: varied fields, fields SGLang changes that
        depend on the layout, then the key derived widths."""
        return (*self.vary, *self.problem.shown_dependent, *KEY_DERIVED)

    def _split(self, backend: str) -> None:
        """Fix outside the loops the flags that change the arithmetic; complete the
        others per signature.

        A flag read by an atom that also reads a size (DP attention, inside `attn_dp`
        and the GPU count) is *outer*: each of its values gets its own specialised
        loops, where for instance the GPU count becomes `tp·pp == N` and pins pp. The
        other flags are *inner*: they meet the numbers only through whole atoms
        (`ep_size == tp_size`), whose truth values key the completion table.
        """
        by_field = {f: d for d in self.dims for f in d.fields}
        numeric_fields = {d.name for d in self.dims if d.size} | {GPUS.name}
        outer_names: set[str] = set()
        for con in self.problem.constraints:
            for atom in atoms(con):
                reads = set(fields_of(atom))
                flags = {by_field[f].name for f in reads - numeric_fields}
                if flags and reads & numeric_fields:
                    outer_names |= flags
        finite = [d for d in self.dims if not d.size]
        outer = [d for d in finite if d.name in outer_names]
        inner = tuple(d for d in finite if d.name not in outer_names)
        inner_fields = set(varied_fields(inner))
        numeric = tuple(d.name for d in self.dims if d.size)
        for combo in itertools.product(*(d.values for d in outer)):
            sub: dict[str, Expr] = {
                f: Const(v, SPECS[f].kind)
                for d, vals in zip(outer, combo, strict=True)
                for f, v in zip(d.fields, vals, strict=True)
            }
            cons = [p for c in self.problem.constraints for p in conjuncts(specialise(c, sub))]
            if any(is_const(c, False) for c in cons):
                continue
            flag_cons = [c for c in cons if set(fields_of(c)) & inner_fields]
            num_cons = tuple(c for c in cons if not set(fields_of(c)) & inner_fields)
            sig: dict[tuple[object, ...], Expr] = {}
            for con in flag_cons:
                for atom in atoms(con):
                    reads = set(fields_of(atom))
                    if reads & inner_fields:
                        if reads - inner_fields:  # pragma: no cover - guards _split itself
                            raise RuntimeError(f"mixed atom left after specialisation: {atom}")
                        continue
                    sig.setdefault(atom.key(), atom)
            stand_in = {k: placeholder(i) for i, k in enumerate(sig)}
            flag_only = [replace_atoms(c, stand_in) for c in flag_cons]
            # Without flags to complete the loops never consult the table.
            table = Table(make(backend, inner, flag_only, len(sig)) if inner else _no_flags)
            columns = tuple(specialise(e, sub) for e in self.problem.exprs)
            spec = Spec(numeric, inner, num_cons, tuple(sig.values()), columns)
            self.combos.append(_Combo(spec, table, tuple(flag_only)))

    # --- running ------------------------------------------------------------------------
    def _sizes(self, gpus: int, up_to: bool) -> Iterable[int]:
        return range(1, gpus + 1) if up_to else (gpus,)

    def rows(self, gpus: int, up_to: bool = False) -> Iterator[tuple[Any, ...]]:
        """Row tuples in `columns` order: the fast path the command line formats. The
        generated loops' rows are chained in C (`yield from` would resume a Python frame
        per row); each GPU count's domain and each loop start only when reached."""
        return itertools.chain.from_iterable(
            combo.rows(n, ctx)
            for n, ctx in ((n, _Domain(n)) for n in self._sizes(gpus, up_to))
            for combo in self.combos
        )

    def count(self, gpus: int, up_to: bool = False) -> int:
        """How many rows `rows` yields, without producing them: per numeric tuple the
        size of its signature's completion set."""
        total = 0
        for n in self._sizes(gpus, up_to):
            ctx = _Domain(n)
            total += sum(combo.count(n, ctx) for combo in self.combos)
        return total

    def layout(self, row: tuple[Any, ...]) -> Layout:
        return Layout(row, self.shape)


#: Largest product of the varied flags' and enums' choices: each combination may be
#: compiled and solved, so a `--vary` of every field would take gigabytes.
MAX_FLAG_COMBINATIONS = 4096

_CACHE: dict[tuple[object, ...], Enumerator] = {}
#: `count` shares `enumerate_layouts` arguments (`_same_arguments_as`).
P = ParamSpec("P")
_CACHE_SIZE = 64


@dataclass(frozen=True)
class EnumerationQuery:
    """What to enumerate, validated once: the one value the API, the CLI and the cache share.

    `of` is the boundary (types, filters parsed, group kinds known); an `Enumerator` is
    compiled per distinct query and cached, since compiling costs milliseconds and the
    same query is asked for many GPU counts.
    """

    base: Config
    model: ModelSpec | None
    dims: tuple[Dim, ...]
    where: tuple[Expr, ...] = ()
    intra_node: tuple[str, ...] = ()
    completions: str = "z3"
    pack: Pack = NEWEST

    @classmethod
    def of(
        cls,
        base: Config | Mapping[str, Any] | None = None,
        model: ModelSpec | Mapping[str, Any] | None = None,
        vary: Iterable[str] = DEFAULT_VARY,
        where: Iterable[str | Expr] = (),
        gpus_per_node: int | None = None,
        intra_node: Iterable[str] = (),
        completions: str = "z3",
        sglang_version: str | Pack | None = None,
    ) -> EnumerationQuery:
        vary = items_of(vary, "vary")
        where = items_of(where, "where", (str, Expr))
        intra_node = items_of(intra_node, "intra_node")
        if gpus_per_node is not None and (
            isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int)
        ):
            raise TypeError(f"gpus_per_node must be an integer, got {shown(gpus_per_node)}")
        cfg = as_config(base if base is not None else {})
        if gpus_per_node is not None:
            cfg = as_config({**cfg.__dict__, "gpus_per_node": gpus_per_node})
        dims = dims_of(vary)
        combinations = math.prod(len(d.values) for d in dims if not d.size)
        if combinations > MAX_FLAG_COMBINATIONS:
            raise InputError(
                f"the varied flags and enums span {combinations} combinations; the limit is "
                f"{MAX_FLAG_COMBINATIONS}: vary fewer of them"
            )
        pack = get_pack(sglang_version)
        filters = tuple(
            parse(w, widths=pack.named_widths) if isinstance(w, str) else w for w in where
        )
        for f in filters:
            if f.kind != "bool":
                raise InputError("a where filter must be a condition")
        kinds = tuple(dict.fromkeys(intra_node))
        for kind in kinds:
            within_nodes(kind)  # raises InputError for an unknown kind
        return cls(cfg, as_model(model), dims, filters, kinds, completions, pack)

    def key(self) -> tuple[object, ...]:
        """Identity for the cache (rule trees compare by `key()`, not `==`)."""
        return (
            self.base,
            self.model,
            tuple(d.fields for d in self.dims),
            tuple(f.key() for f in self.where),
            self.intra_node,
            self.completions,
            self.pack.version,
        )

    def enumerator(self) -> Enumerator:
        """The compiled enumerator for this query, from the process-wide cache (shared
        between threads; building may use Z3 for completion tables)."""
        key = self.key()
        with Z3_LOCK:
            return self._cached(key)

    def _cached(self, key: tuple[object, ...]) -> Enumerator:
        hit = _CACHE.get(key)
        if hit is None:
            if len(_CACHE) >= _CACHE_SIZE:
                _CACHE.pop(next(iter(_CACHE)))
            hit = _CACHE[key] = Enumerator(self)
        return hit


def _check_gpus(gpus: int) -> None:
    if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 1:
        raise InputError(f"the GPU count must be a positive integer, got {shown(gpus)}")
    if gpus > MAX_GPUS:
        raise InputError(f"the GPU count {shown(gpus)} is above the limit of {MAX_GPUS}")


def enumerate_layouts(
    gpus: int,
    base: Config | Mapping[str, Any] | None = None,
    model: ModelSpec | Mapping[str, Any] | None = None,
    vary: Iterable[str] = DEFAULT_VARY,
    where: Iterable[str | Expr] = (),
    gpus_per_node: int | None = None,
    intra_node: Iterable[str] = (),
    *,
    up_to: bool = False,
    sglang_version: str | Pack | None = None,
) -> Iterator[Layout]:
    """Every legal layout on exactly `gpus` GPUs (1..gpus with `up_to`), streamed.

    `vary` lists the fields to enumerate (default: tp, pp, dp, attn_cp, moe_dp, ep and
    dcp sizes, DP attention, and prefill CP with its strategy as one dimension);
    sizes range over the divisors of the GPU count, flags and enums over their
    choices; every other field comes from `base` (or the defaults). `model` facts
    prune (heads, KV heads, experts, layers) and bring model-specific resolution.
    `where` filters are conditions over fields and derived widths, as strings
    (`"attn_tp <= 8"`) or rule trees. `intra_node` keeps layouts whose groups of those
    kinds (attn_tp, attn_cp, ep, moe_tp, dcp, ...) stay inside one node of
    `gpus_per_node` GPUs (default: the base's, 8) under SGLang's rank layout.

    No duplicates: only layouts that SGLang's silent resolution leaves unchanged on
    the varied fields are listed (dp_size 1 with DP attention is SGLang's dp_size 1
    without it, listed once; with a base `moe_a2a_backend: deepep` only
    ep_size == tp_size). Non-varied fields may be resolved: `Layout.config` holds the
    resolved values.
    """
    _check_gpus(gpus)
    flag_of(up_to, "up_to")
    # Checked and compiled here, so bad arguments raise at the call, not at first `next`.
    e = EnumerationQuery.of(
        base, model, vary, where, gpus_per_node, intra_node, sglang_version=sglang_version
    ).enumerator()
    return _layouts(e, gpus, up_to)


def _layouts(e: Enumerator, gpus: int, up_to: bool) -> Iterator[Layout]:
    shape = e.shape
    for row in e.rows(gpus, up_to):
        yield Layout(row, shape)


def _same_arguments_as(
    listing: Callable[P, Iterator[Layout]],
) -> Callable[[Callable[..., int]], Callable[P, int]]:
    """`count` takes exactly `enumerate_layouts`' arguments: one declaration (so the two cannot
    drift), shown to type checkers, `help()` and IDEs as `count`'s own signature."""

    def adopt(counter: Callable[..., int]) -> Callable[P, int]:
        signature = inspect.signature(listing)
        counter.__signature__ = signature.replace(return_annotation=int)  # type: ignore[attr-defined]
        return counter

    return adopt


@_same_arguments_as(enumerate_layouts)
def count(*args: Any, **kwargs: Any) -> int:
    """How many layouts `enumerate` would yield for the same arguments, without
    producing them (per numeric tuple, the size of its completion set)."""
    bound = inspect.signature(count).bind(*args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    gpus, up_to = a["gpus"], a["up_to"]
    _check_gpus(gpus)
    flag_of(up_to, "up_to")
    query = EnumerationQuery.of(
        a["base"],
        a["model"],
        a["vary"],
        a["where"],
        a["gpus_per_node"],
        a["intra_node"],
        sglang_version=a["sglang_version"],
    )
    return query.enumerator().count(gpus, up_to)
