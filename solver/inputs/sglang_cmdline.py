"""SGLang launch commands: the layout fields their flags set, with SGLang's spellings.

The shell is read by `meshsat.solver.inputs.launch`; this module gives the flags their meaning. Only
layout flags become fields; deprecated spellings that change the layout are read with what
they meant (`--enable-ep-moe` is `ep_size = tp_size`, `--enable-deepep-moe` is the DeepEP
all-to-all backend; `--cuda-graph-backend-decode disabled` is read as its field, which
resolves to disabled decode CUDA graphs). The flags that size memory without being layout
fields (`memory_flags.MEMORY_FLAGS`) are kept apart for the memory verdict. Other
flags are sorted into "known to SGLang, not about the layout" and "no SGLang release has it"
(from the releases' own flag tables, `sglang_flags.json`, exported by `fidelity/`).
"""

from __future__ import annotations

import bisect
import gc
import json
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from meshsat.solver.errors import InputError
from meshsat.solver.inputs.accelerator import (
    DEVICE_PLATFORMS,
    VISIBLE_DEVICES_ENV,
    ascend_signs,
    node_devices_from_env,
)
from meshsat.solver.inputs.bench_flags import BENCH_FLAGS
from meshsat.solver.inputs.convert import accepted, coerce
from meshsat.solver.inputs.launch import LaunchCommand, Word, read_launch_commands
from meshsat.solver.inputs.memory_flags import MEMORY_FLAGS, memory_value
from meshsat.solver.lang.fields import CONFIG_SPECS
from meshsat.solver.lang.limits import MAX_ITEMS_SHOWN, clipped, listed

#: flag -> field, from the Config declaration (long names, aliases).
FLAGS: dict[str, str] = {flag: name for name, spec in CONFIG_SPECS.items() for flag in spec.flags}
ENV_FACTS = {
    "SGLANG_ENABLE_CP_V2": "env_enable_cp_v2",
    "SGLANG_ENABLE_EPLB_BALANCEDNESS_METRIC": "env_enable_eplb_balancedness_metric",
    "SGLANG_PPLX_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "env_pplx_max_dispatch_tokens_per_rank",
    "SGLANG_MORI_NUM_MAX_DISPATCH_TOKENS_PER_RANK": "env_mori_max_dispatch_tokens_per_rank",
    "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "env_allow_overwrite_longer_context_len",
}
#: Removed or renamed spellings that still say something about the layout:
#: flag -> (field, value); a value of None means "the value the flag is given".
DEPRECATED: dict[str, tuple[str, Any]] = {
    "--enable-deepep-moe": ("moe_a2a_backend", "deepep"),
    "--enable-ep-moe": ("ep_size", "tp_size"),  # ep_size = tp_size, read after every flag
}
#: SGLang flags that take a list (nargs *) of which meshsat reads only whether it names
#: anything: flag -> its boolean field (`--lora-paths a=/x b=/y`: SGLang turns LoRA on).
LIST_FACTS: dict[str, str] = {
    "--lora-paths": "lora_paths",
    "--lora-target-modules": "lora_target_modules",
}
#: SGLang flags of one value of which meshsat reads only whether it is given: flag -> its
#: boolean field (`--uno-lora-path /x`: SGLang asks `is not None`).
GIVEN_FACTS: dict[str, str] = {"--uno-lora-path": "uno_lora_path"}
#: Where a node's own schedulers sit: each node's process reads its own (SGLang's
#: `gpu_id = base_gpu_id + … + (tp_rank % tp_per_node)·gpu_id_step` in
#: `launch_tensor_parallel_group`, 0.4.6.post5 to 0.5.23; no other code reads them across
#: nodes), so the nodes of one job may differ in them. Each node's are checked on its own
#: (`NodePlacement`).
NODE_PLACEMENT = ("base_gpu_id", "gpu_id_step")
#: Facts of one node, not of the job's layout: the nodes of one job may differ in them
#: (`gpus_per_node` is meshsat's, of the machine; the job is sized by its smallest node).
PER_NODE_FIELDS = ("node_rank", "gpus_per_node", *NODE_PLACEMENT)


@dataclass(frozen=True)
class JobIssue:
    """A way the nodes of one multi-node job disagree: a violation of the job, not of SGLang's
    argument rules (each node's SGLang would start; the job would hang or mis-shard)."""

    rule: str
    message: str
    line: int


@dataclass(frozen=True)
class NodePlacement:
    """A node of a multi-node job whose GPU ids differ from the first node's
    (`NODE_PLACEMENT`): the layout read is the first node's, so this node's ids are
    checked with its own values (`validation.job_checks.node_violations`); `values` holds
    those the node gives (a field it does not give is SGLang's default)."""

    line: int
    values: tuple[tuple[str, int], ...]


@dataclass
class ParsedCommandLine:
    values: dict[str, Any] = field(default_factory=dict)
    #: Every flag as written (before any `=value`), in order, for the release's flag table.
    flags: list[str] = field(default_factory=list)
    #: `--model-path` (or `--model`) as written: where the model facts can come from.
    model_path: str | None = None
    #: Disagreements between the nodes of a multi-node job.
    job: list[JobIssue] = field(default_factory=list)
    #: The nodes after the first whose own GPU ids differ from the first node's.
    nodes: list[NodePlacement] = field(default_factory=list)
    #: Where in the text each field is set: field -> (start, end) of its flag and value.
    spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    #: SGLang flags that do not concern the layout.
    ignored: list[str] = field(default_factory=list)
    #: The flags that size the memory pools without being layout fields, as the memory
    #: model's keywords (`memory_flags.MEMORY_FLAGS`): `{"mem_fraction_static": 0.9}`.
    memory: dict[str, Any] = field(default_factory=dict)
    #: Flags no SGLang release has (SGLang's own parser would refuse them).
    unknown_flags: list[str] = field(default_factory=list)
    #: (flag, value) as written, for every flag given one literal value: checked against
    #: the chosen release's choices.
    given: list[tuple[str, str]] = field(default_factory=list)
    #: (flag, value) as written for a layout field's value outside every choice meshsat
    #: knows (`--quantization bogus`): the field is left unset and the value said as the
    #: release's parser refuses it (`outside_choices`), never an error that ends the report.
    outside: list[tuple[str, str]] = field(default_factory=list)
    #: (flag, value) for every `--flag=value` word: argparse refuses a value glued to a
    #: flag that takes none (`--enable-dp-attention=true`: "ignored explicit argument").
    inline: list[tuple[str, str]] = field(default_factory=list)
    #: Fields whose value is a shell expansion: field -> the expansion as written.
    unknown_values: dict[str, str] = field(default_factory=dict)
    #: Bare shell expansions in the command line (`${EXTRA_ARGS}`, `"$@"`), as written:
    #: they may hold flags, which are not read here.
    opaque: list[str] = field(default_factory=list)
    #: `--dist-init-addr` as written, for checking a multi-node job.
    dist_init_addr: str | None = None
    #: SGLang's own `--config FILE` as written (its YAML holds more flags).
    config_file: str | None = None
    #: That file's keys as SGLang's merger reads them (`-` as `_`): a release's merger
    #: refuses some its command line takes (`refused_in_config`).
    config_keys: list[str] = field(default_factory=list)
    #: Ascend-only values and variables of launches that name no `--device`, as written:
    #: what `accelerator.infer_platform` reads the platform from.
    ascend_signs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: The first launch's `LaunchCommand.replicas` and `.owner`: the copies a manifest's
    #: object (a compose service's `deploy.replicas`) runs of this job.
    replicas: int = 1
    owner: str = ""
    #: The (first node's) launch read, for the command `fix` prints in the user's words.
    launch: LaunchCommand | None = None


@cache
def _flag_table() -> dict[str, Any]:
    """`sglang_flags.json`, read and parsed once: every accessor below reads its part."""
    table: dict[str, Any] = json.loads(
        resources.files("meshsat.solver.inputs").joinpath("sglang_flags.json").read_text("utf-8")
    )
    return table


@cache
def known_sglang_flags() -> dict[str, int]:
    """Every option string of every recorded SGLang release -> how many values it takes
    (0, 1, or 2 for "any number", as `--cuda-graph-bs 1 2 4`)."""
    data = _flag_table()
    merged: dict[str, int] = {}
    for flags in data["releases"].values():
        merged.update(flags)
    return merged


@cache
def release_flags(version: str) -> dict[str, int] | None:
    """One recorded release's option strings (None when that release was not recorded)."""
    data = _flag_table()
    flags: dict[str, int] | None = data["releases"].get(version)
    return flags


class _Options:
    """One release's option strings, sorted, so that "which options start with this" is two
    binary searches rather than a scan of several hundred options per flag: a pasted
    command may hold tens of thousands of flags within the 1 MiB bound."""

    def __init__(self, table: dict[str, int]) -> None:
        self.table = table
        self.sorted = sorted(table)

    def starting_with(self, prefix: str, most: int) -> list[str]:
        """Up to `most` options that start with `prefix`, in order."""
        i = bisect.bisect_left(self.sorted, prefix)
        found = self.sorted[i : i + most]
        return [option for option in found if option.startswith(prefix)]

    def expanded(self, flag: str) -> str | None:
        """The option `flag` is, or the one option it abbreviates (argparse allows a unique
        prefix, `--tp` for `--tp-size`); None when it is neither."""
        if flag in self.table:
            return flag
        fits = self.starting_with(flag, 2)
        return fits[0] if len(fits) == 1 else None


@cache
def _options(version: str) -> _Options | None:
    table = release_flags(version)
    return None if table is None else _Options(table)


@cache
def _every_release() -> _Options:
    """Every recorded release's option strings as one index: what no release lists, nor
    abbreviates, no release takes."""
    return _Options(known_sglang_flags())


#: Refused flags given a "did you mean" (a fuzzy search over the release's options, about
#: a millisecond each); the message shows no more than these (`limits.listed`).
MAX_HINTED = MAX_ITEMS_SHOWN
#: Longer flags get no "did you mean": no option is that long.
_MAX_HINTED_LENGTH = 64


def missing_from_release(
    flags: list[str], version: str, *, hinted: int = MAX_HINTED
) -> list[tuple[str, str | None]]:
    """The flags `version`'s own parser would refuse, each with a hint (the closest flag it
    has, or what a removed spelling meant); empty when that release was not recorded.

    SGLang's parser is argparse with abbreviations allowed, so a unique prefix of one of the
    release's options (`--tp` for `--tp-size`) is accepted, as it is by SGLang. Only the
    first `hinted` refused flags are looked up for a close match: the rest are counted,
    not shown, and the search would otherwise cost seconds on a pasted megabyte."""
    import difflib

    options = _options(version)
    if options is None:
        return []
    raising = release_raises(version)
    out: list[tuple[str, str | None]] = []
    for flag in dict.fromkeys(flags):
        # One search answers both: a unique prefix is accepted, several are ambiguous.
        prefixed = [flag] if flag in options.table else options.starting_with(flag, 3)
        if len(prefixed) == 1:
            if prefixed[0] in raising:  # listed, but its own action stops the launch
                out.append((flag, f"refused on sight: {raising[prefixed[0]]}"))
            continue
        if flag in DEPRECATED:
            target, meaning = DEPRECATED[flag]
            out.append((flag, f"removed; it meant {target} = {meaning}"))
            continue
        if prefixed:  # argparse refuses an abbreviation that fits several options
            out.append((flag, "ambiguous: it abbreviates " + ", ".join(prefixed)))
            continue
        close: list[str] = []
        if len(out) < hinted and len(flag) <= _MAX_HINTED_LENGTH:
            close = difflib.get_close_matches(flag, options.sorted, n=1, cutoff=0.75)
        out.append((flag, f"did you mean {close[0]}?" if close else None))
    return out


@cache
def release_raises(version: str) -> dict[str, str]:
    """One recorded release's options whose own action refuses them as soon as they are
    given -> SGLang's message, which names what to use instead (0.4.6.post5's
    `--enable-flashmla`: "Please use '--attention-backend flashmla' instead."). The parser
    lists them, so they are no unknown flags, yet the launch never starts with one."""
    data = _flag_table()
    table: dict[str, str] = data.get("raises", {}).get(version, {})
    return table


@cache
def release_choices(version: str) -> dict[str, tuple[str, ...]]:
    """One recorded release's one-value options that list their choices -> the choices."""
    data = _flag_table()
    table: dict[str, list[str]] = data.get("choices", {}).get(version, {})
    return {option: tuple(values) for option, values in table.items()}


@cache
def release_defaults(version: str) -> dict[str, Any]:
    """One recorded release's default for each layout field's option (what leaving the flag
    out gives); empty when that release was not recorded."""
    data = _flag_table()
    table: dict[str, Any] = data.get("defaults", {}).get(version, {})
    return table


@cache
def release_dests(version: str) -> dict[str, str]:
    """One recorded release's options that set a layout field -> the field (its argparse
    dest: deprecated spellings too, `--disable-piecewise-cuda-graph` in 0.5.19)."""
    data = _flag_table()
    table: dict[str, str] = data.get("dests", {}).get(version, {})
    return table


def refused_values(given: list[tuple[str, str]], version: str) -> list[tuple[str, str | None]]:
    """The `--flag value` pairs `version`'s parser refuses as an invalid choice, each with
    the values it accepts (argparse exits before SGLang reads the layout)."""
    table, options = release_choices(version), _options(version)
    out: list[tuple[str, str | None]] = []
    if options is None:
        return out
    for flag, value in dict.fromkeys(given):
        accepted = table.get(options.expanded(flag) or "")
        if accepted is None or value in accepted or _same_integer(value, accepted):
            continue
        out.append((f"{flag} {value}", "invalid choice: it accepts " + ", ".join(accepted)))
    return out


def refused_inline(inline: list[tuple[str, str]], version: str) -> list[tuple[str, str | None]]:
    """The `--flag=value` words `version`'s parser refuses because the flag takes no value
    (argparse: "ignored explicit argument"), though meshsat reads the value as meant."""
    options = _options(version)
    if options is None:
        return []
    out: list[tuple[str, str | None]] = []
    for flag, value in dict.fromkeys(inline):
        option = options.expanded(flag)
        if option is not None and options.table[option] == 0:
            out.append((f"{flag}={value}", "takes no value"))
    return out


def refused_in_config(keys: list[str], version: str) -> list[tuple[str, str | None]]:
    """The `--config` YAML keys `version`'s merger refuses at start-up ("Unsupported config
    option 'enable_dp_attention' with action 'DeprecatedStoreTrueAction'", 0.5.23), though
    its command line takes the same flag: recorded from each release's own merger
    (fidelity/config_refused.py)."""
    data = _flag_table()
    refused: dict[str, str] = data.get("config_refused", {}).get(version, {})
    return [
        (f"{key} (--config)", f"its --config merger refuses a {refused[key]} key")
        for key in dict.fromkeys(keys)
        if key in refused
    ]


def release_refusals(parsed: ParsedCommandLine, version: str) -> list[tuple[str, str | None]]:
    """Everything in a launch `version` refuses before it reads the layout, each with its
    hint: flags its parser lacks (`missing_from_release`), invalid choices
    (`refused_values`), values glued to flags that take none (`refused_inline`) and
    `--config` keys its merger refuses (`refused_in_config`). Empty when `version` was not
    recorded."""
    return [
        *missing_from_release(parsed.flags, version),
        *refused_values(parsed.given, version),
        *refused_inline(parsed.inline, version),
        *refused_in_config(parsed.config_keys, version),
    ]


def recorded_releases() -> tuple[str, ...]:
    """The releases whose flag tables were recorded, oldest first."""
    return tuple(_flag_table()["releases"])


def taken_elsewhere(
    parsed: ParsedCommandLine, refused: list[tuple[str, str | None]], version: str
) -> dict[str, tuple[str, ...]]:
    """Each of `refused` (`release_refusals(parsed, version)`) that another recorded
    release takes -> those releases, oldest first; one no recorded release takes is left
    out. A pasted command often carries a flag of the release it was written for (removed
    in the newest, `version`'s default), which starts on that release; one no release
    takes (a typo: `--moe-a2a-backend deepepp`) starts on none.

    Only the refused items are judged again, by each release's own refusals: a flag is
    taken where that release's parser takes it (unique prefixes too); a value where the
    flag is taken and the value is one of its choices (or it lists none); `--flag=value`
    where the flag is taken and takes a value. A `--config` key, or a flag read from one,
    needs `--config` and the key's flag taken, and the key taken by that release's
    merger."""
    # A flag no recorded release lists or abbreviates is refused by each: most of a pasted
    # megabyte of flags, left out before the search release by release.
    every, written = _every_release(), set(parsed.flags)
    items = {item for item, _ in refused if item not in written or every.starting_with(item, 1)}
    given = [(f, v) for f, v in dict.fromkeys(parsed.given) if f"{f} {v}" in items]
    inline = [(f, v) for f, v in dict.fromkeys(parsed.inline) if f"{f}={v}" in items]
    from_config = {"--" + k.replace("_", "-"): k for k in parsed.config_keys}
    # What each refused item needs its release not to refuse: itself and its flag; what
    # a --config file gives, --config and its key too.
    needs: dict[str, set[str]] = {item: {item} for item in items}
    for f, v in given:
        needs[f"{f} {v}"].add(f)
    for f, v in inline:
        needs[f"{f}={v}"].add(f)
    for flag, key in from_config.items():
        if f"{key} (--config)" in needs:
            needs[f"{key} (--config)"].add(flag)
    for wanted in needs.values():
        for flag in [n for n in wanted if n in from_config]:
            wanted |= {"--config", f"{from_config[flag]} (--config)"}
    flags = sorted(
        {
            n
            for wanted in needs.values()
            for n in wanted
            if _is_flag(n) and " " not in n and "=" not in n
        }
    )
    keys = sorted({k for flag, k in from_config.items() if flag in flags})
    out: dict[str, list[str]] = {}
    for release in recorded_releases():
        if release == version:
            continue
        turned = {
            item
            for item, _ in [
                *missing_from_release(flags, release, hinted=0),  # whether, not why
                *refused_values(given, release),
                *refused_inline(inline, release),
                *refused_in_config(keys, release),
            ]
        }
        for item in items:
            if not turned.intersection(needs[item]):
                out.setdefault(item, []).append(release)
    return {item: tuple(releases) for item, releases in out.items()}


def _same_integer(value: str, accepted: tuple[str, ...]) -> bool:
    """argparse converts before it checks: `--log-requests-level 01` is the choice 1."""
    try:
        return str(int(value)) in accepted
    except ValueError:
        return False


def _outside_choices(name: str, text: str) -> bool:
    """Whether a layout field with a list of choices is given a value none of them is
    (`coerce` would refuse it): meshsat's choices hold every recorded release's, so such
    a value is one SGLang's parser refuses too, a finding of the launch, not bad input."""
    spec = CONFIG_SPECS[name]
    if not spec.choices or spec.kind in ("int", "float", "bool") or _on_off(name):
        return False
    try:
        coerce(name, text)
    except InputError:
        return True
    return False


def unmodelled_values(
    outside: list[tuple[str, str]], refused: list[tuple[str, str | None]]
) -> list[str]:
    """Notes for the values of `outside` that `refused` (the release's own refusals,
    `refused_values`) does not hold: the release's flag lists no choices (0.4.6.post5's
    `--ep-dispatch-algorithm` takes any string) or no release was recorded, so its parser
    takes the value, but meshsat has no meaning for it and leaves the field unset."""
    said = {item for item, _ in refused}
    notes: list[str] = []
    for flag, value in dict.fromkeys(outside):
        if f"{flag} {value}" in said:
            continue
        name = FLAGS[flag]
        notes.append(
            f"{flag} {clipped(value)}: not a value meshsat knows for {name} "
            f"({accepted(CONFIG_SPECS[name])}); left unset"
        )
    return notes


def _on_off(name: str) -> bool:
    """A flag that takes no value: a boolean field, also one that may be unset
    (`--dcp-replicate-q-proj` / `--no-dcp-replicate-q-proj`, SGLang's BooleanOptionalAction)."""
    spec = CONFIG_SPECS[name]
    return spec.kind == "bool" or (bool(spec.choices) and set(spec.choices) <= {None, True, False})


def _is_flag(text: str) -> bool:
    return text.startswith("--") and len(text) > 2


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


#: Why a CR in a launch's words breaks it, and what to run.
_CRLF_CAUSE = (
    "the text has Windows line endings (CR LF), and bash reads each CR as part of a word, "
    "so SGLang would get it as an argument (an unknown flag, a path or a value with a CR in "
    "it); convert the file (dos2unix)"
)


def parse_launch(command: LaunchCommand) -> ParsedCommandLine:
    """The layout fields one launch command sets."""
    out = ParsedCommandLine()
    for var, text in command.env:
        if var in ENV_FACTS:
            fact = ENV_FACTS[var]
            out.values[fact] = True if fact.endswith("metric") else coerce(fact, text)
        elif var == VISIBLE_DEVICES_ENV:
            devices, said = node_devices_from_env(text)
            if devices is not None:
                out.values["gpus_per_node"] = devices
            out.notes.append(said)
        else:
            out.ignored.append(var)
    words = command.words
    if not words:
        raise InputError(f"the SGLang command line has no --flags (line {command.line})")
    # bash keeps each line's CR on its last word; only a number survives it (SGLang's
    # int and float types strip white space), a flag, path or name does not.
    carried = next((w for w in words if w.text.endswith("\r") and not _number(w.text)), None)
    if carried is not None:
        raise InputError(
            f"{carried.text!r} on line {command.line} ends in a carriage return: {_CRLF_CAUSE}"
        )
    out.notes += command.notes
    own = BENCH_FLAGS.get(command.program.removeprefix("python -m "), {})
    i = 0
    ep_follows_tp = False
    while i < len(words):
        word = words[i]
        if not _is_flag(word.text):
            if word.expansion is not None or word.text == "-":
                # `${ARGS}` holds flags no one can read here; a lone `-` is a broken
                # continuation. Neither sets a field; both are said.
                what = "a stray '-'" if word.text == "-" else f"{word.text!r} (a shell expansion)"
                out.notes.append(f"{what} in the command line is not read")
                if word.text != "-":
                    out.opaque.append(word.text)
                i += 1
                continue
            if word.text == "--":
                raise InputError(_end_of_options(words[i:], command.line, word.pos))
            crlf = f": {_CRLF_CAUSE}" if "\r" in word.text else ""
            raise InputError(
                f"unexpected word {word.text!r} in the SGLang command line (line "
                f"{command.line}, character {word.pos + 1}){crlf}"
            )
        flag, eq, inline = word.text.partition("=")
        out.flags.append(flag)
        if eq:
            out.inline.append((flag, inline))
        i += 1
        negated = flag.startswith("--no-") and flag not in FLAGS and "--" + flag[5:] in FLAGS
        name = FLAGS.get("--" + flag[5:] if negated else flag)
        if name is not None and _on_off(name):
            out.values[name] = coerce(name, inline) if eq else not negated
            out.spans.setdefault(name, []).append((word.pos, word.end))
        elif name is not None:
            given, i = _value(words, i, word if eq else None, flag, command.line)
            if given.expansion is not None:
                out.unknown_values[name] = given.expansion
            else:
                text = given.text.partition("=")[2] if eq else given.text
                out.given.append((flag, text))
                if _outside_choices(name, text):  # argparse's refusal: the field stays unset
                    out.outside.append((flag, text))
                else:
                    out.values[name] = coerce(name, text)
                    if flag in MEMORY_FLAGS:  # a field that sizes memory too (--context-length)
                        keyword, number = memory_value(flag, text)
                        out.memory[keyword] = number
            out.spans.setdefault(name, []).append((word.pos, given.end))
        elif flag in DEPRECATED:
            target, meaning = DEPRECATED[flag]
            ep_follows_tp |= meaning == "tp_size"
            if meaning != "tp_size":
                out.values[target] = meaning
            out.notes.append(f"{flag} is a deprecated spelling; read as {target} = {meaning}")
            out.spans.setdefault(target, []).append((word.pos, word.end))
        elif flag in ("--model-path", "--model"):
            given, i = _value(words, i, word if eq else None, flag, command.line)
            text = given.text.partition("=")[2] if eq else given.text
            out.model_path = None if given.expansion is not None else text
        elif flag in LIST_FACTS:
            i = _list_fact(words, i, word if eq else None, LIST_FACTS[flag], out)
        elif flag in GIVEN_FACTS:  # any value, an expansion's too, is one given
            _, i = _value(words, i, word if eq else None, flag, command.line)
            out.values[GIVEN_FACTS[flag]] = True
        elif flag == "--dist-init-addr":
            given, i = _value(words, i, word if eq else None, flag, command.line)
            out.dist_init_addr = given.text.partition("=")[2] if eq else given.text
        elif flag == "--config" and flag not in own:
            given, i = _value(words, i, word if eq else None, flag, command.line)
            text = given.text.partition("=")[2] if eq else given.text
            if given.expansion is not None:
                out.notes.append(f"--config {given.expansion}: a shell expansion; not read")
            else:
                out.config_file = text
        elif flag in own:
            arity = 0 if eq else own[flag]
            while arity and i < len(words) and not _is_flag(words[i].text):
                i += 1
                arity -= arity == 1
        elif flag in known_sglang_flags():
            arity = 0 if eq else known_sglang_flags()[flag]  # 0 none, 1 one, 2 any number
            value = inline if eq else None
            if not eq and arity == 1 and i < len(words) and not _is_flag(words[i].text):
                value = words[i].text
                if words[i].expansion is not None:
                    value = None
                    out.notes.append(
                        f"{flag} {words[i].expansion}: value unknown here (a shell "
                        "expansion), left unset"
                    )
            elif eq and word.expansion is not None:
                value = None
                out.notes.append(f"{word.text}: value unknown here (a shell expansion)")
            if value is not None:
                out.given.append((flag, value))
            if flag == "--device" and value in DEVICE_PLATFORMS:
                out.values["platform"] = DEVICE_PLATFORMS[value]
            elif flag in MEMORY_FLAGS:  # read for the memory verdict (`--gpu`)
                if value is not None:
                    keyword, number = memory_value(flag, value)
                    out.memory[keyword] = number
            else:
                out.ignored.append(flag)
            while arity and i < len(words) and not _is_flag(words[i].text):
                i += 1
                arity -= arity == 1
        else:
            out.unknown_flags.append(flag)
            while i < len(words) and not _is_flag(words[i].text):
                i += 1
    if ep_follows_tp and "tp_size" in out.values:
        out.values.setdefault("ep_size", out.values["tp_size"])
    if "--device" not in out.flags:  # a named device, whatever it is, is not overruled
        out.ascend_signs = ascend_signs(out.given, [var for var, _ in command.env])
    return out


def _list_fact(
    words: tuple[Word, ...], i: int, inline: Word | None, name: str, out: ParsedCommandLine
) -> int:
    """Read a list flag's words (`--lora-paths a=/x b=/y`, or `--lora-paths=a=/x`) into
    whether it names anything: SGLang tests the list's truth, so a bare `--lora-paths` is
    False. Words that only a shell expansion gives leave the field unset, with a note.
    Returns the index of the next flag."""
    items: list[Word] = [inline] if inline is not None else []
    while inline is None and i < len(words) and not _is_flag(words[i].text):
        items.append(words[i])
        i += 1
    if any(w.expansion is None for w in items) or not items:
        out.values[name] = bool(items)
    else:
        out.unknown_values[name] = " ".join(w.expansion or w.text for w in items)
    return i


def _end_of_options(rest: Sequence[Word], line: int, pos: int) -> str:
    """Why a `--` stops the launch, in SGLang's words. argparse reads every word after
    `--` as a positional argument, and SGLang's parser (`prepare_server_args`, a plain
    `parse_args`, behind `sglang serve` too) declares none: `--tp 8 --` exits 2 with
    "unrecognized arguments: --" on every Python checked (3.9 to 3.13, and CPython's current
    source), a trailing `--` alone
    included, and so do the flags after one (`-- --dp 2`), which are never read as
    flags."""
    said = listed([w.text for w in rest])
    return (
        f"'--' in the SGLang command line (line {line}, character {pos + 1}): SGLang's parser "
        f"takes no positional arguments, so argparse exits on it and on every word after it "
        f"(error: unrecognized arguments: {said}); remove it"
    )


def _value(
    words: tuple[Word, ...], i: int, inline: Word | None, flag: str, line: int
) -> tuple[Word, int]:
    """A flag's value: `--flag=value` (the word itself) or the next word."""
    if inline is not None:
        return inline, i
    if i < len(words) and not _is_flag(words[i].text):
        return words[i], i + 1
    raise InputError(f"{flag} expects a value (line {line})")


#: Texts longer than this are read with the cyclic garbage collector paused.
_PAUSE_GC_ABOVE = 1 << 16


@contextmanager
def _collector_paused(pause: bool) -> Iterator[None]:
    """A megabyte of flags makes a million small tuples and strings, none of them in a
    cycle, and the collector's passes over them were half the time of reading it (0.75 s
    of 1.6 s for half a million words). Left as it was found: a caller (or another
    thread) that turned it off keeps it off."""
    if not pause or not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def parse_sglang_command(text: str, search: tuple[Path, ...] = ()) -> ParsedCommandLine:
    """Read the layout out of launch text: one command, or one per node of one job.

    Several launches must be the nodes of one job: the same layout flags, `--node-rank`
    covering 0..nnodes-1 once each, the same `--dist-init-addr`; each disagreement is a
    `JobIssue` naming the node's line (the layout read is the first node's).
    A command's `--config FILE` is read where FILE exists (as written, else relative to a
    folder of `search`, as the script's own); a note says when it does not.
    """
    with _collector_paused(len(text) > _PAUSE_GC_ABOVE):
        return parse_job(read_launch_commands(text), search)


def parse_job(
    commands: tuple[LaunchCommand, ...], search: tuple[Path, ...] = ()
) -> ParsedCommandLine:
    """The layout of the launches of one job (one server, one or more nodes), checked as
    one job: `parse_sglang_command` for a whole text, and the deployment reader
    (`meshsat.solver.deployment`) for each server of a deployment."""
    parsed = [_with_config_file(c, parse_launch(c), search) for c in commands]
    first = parsed[0]
    first.replicas, first.owner = commands[0].replicas, commands[0].owner
    first.launch = commands[0]
    if len(parsed) > 1:
        first.job = _check_job(commands, parsed)
        first.nodes = _node_placements(commands, parsed)
        first.values.pop("node_rank", None)
        sizes = [p.values["gpus_per_node"] for p in parsed if "gpus_per_node" in p.values]
        if sizes:  # every node must hold its ranks: the smallest node decides
            first.values["gpus_per_node"] = min(sizes)
    head = commands[0]
    pods = (
        None
        if head.group_size is None
        else group_size_issue(head.owner, head.group_size, first, head.line)
    )
    first.job += [pods] if pods is not None else []
    for p in parsed[1:]:
        first.flags += p.flags
        first.given += p.given
        first.outside += p.outside
        first.inline += p.inline
        first.ignored += p.ignored
        first.unknown_flags += p.unknown_flags
        first.ascend_signs += p.ascend_signs
    first.ignored = list(dict.fromkeys(first.ignored))
    first.unknown_flags = list(dict.fromkeys(first.unknown_flags))
    if first.unknown_values:
        first.notes.append(
            "value unknown here (a shell expansion or placeholder), field left unset: "
            + ", ".join(f"{name} = {text}" for name, text in first.unknown_values.items())
        )
    for c, p in zip(commands[1:], parsed[1:], strict=True):
        other = {k: v for k, v in p.unknown_values.items() if k not in PER_NODE_FIELDS}
        if other:  # not compared with the first node's (JOB-ONE-LAYOUT)
            first.notes.append(
                f"value unknown here on the node launched on line {c.line}, not compared: "
                + ", ".join(f"{name} = {text}" for name, text in other.items())
            )
    return first


#: The rule holding a LeaderWorkerSet's `--nnodes` to its pods per group (`group_size_issue`).
GROUP_SIZE_RULE = "JOB-GROUP-SIZE"
#: The rule of a node whose layout differs from its job's first node's (`_check_job`):
#: `--rewrite` and a deployment's `fix` give every node the fixed layout.
ONE_LAYOUT_RULE = "JOB-ONE-LAYOUT"


def group_size_issue(
    owner: str, size: int, parsed: ParsedCommandLine, line: int
) -> JobIssue | None:
    """JOB-GROUP-SIZE: a LeaderWorkerSet starts `size` pods per group, every one of them a
    node of the group's job, so the launch's literal `--nnodes` must be `size`. None when it
    is (or is a shell expansion, `$(LWS_GROUP_SIZE)` being the usual one: it follows the
    size), or when the launch gives no `--nnodes` (a one-node launch in a group of one pod,
    or pods that each run a server of their own: not this rule). Any other `owner` is a
    StatefulSet whose `spec.replicas` pods are the nodes of one job, ranked by pod ordinal
    (`k8s.pods_are_nodes`)."""
    nnodes = parsed.values.get("nnodes")
    if not isinstance(nnodes, int) or nnodes == size:
        return None
    lws = owner.startswith("LeaderWorkerSet/")
    what = " per group" if lws else ", the nodes of one job"
    group = f"{owner} starts {size} pod(s){what} ({size_field(owner)})"
    index = "LWS_WORKER_INDEX" if lws else "pod ordinal"
    if nnodes > size:
        why = (
            f"SGLang waits at the --dist-init-addr rendezvous for {nnodes} nodes and only "
            f"{size} ever start: the job hangs at start-up"
        )
    else:
        why = (
            f"the pods of {index} {_span(nnodes, size - 1)} launch with a --node-rank "
            f"past {nnodes - 1}, whose ranks lie outside the job's world (torch refuses a rank "
            "at or past the world size), so they fail and hold their GPUs"
            + (
                "; under RecreateGroupOnPodRestart each failure restarts the whole group"
                if lws
                else ""
            )
        )
    return JobIssue(GROUP_SIZE_RULE, f"{group} but its launch says --nnodes {nnodes}: {why}", line)


def size_field(owner: str) -> str:
    """Where `owner`'s pods per job are written: a LeaderWorkerSet's group size, else a
    StatefulSet's replicas (`k8s.pods_are_nodes`)."""
    lws = owner.startswith("LeaderWorkerSet/")
    return "spec.leaderWorkerTemplate.size" if lws else "spec.replicas"


def standing(job: Sequence[JobIssue], nnodes: int, pods: int | None) -> list[JobIssue]:
    """A job's issues once its layout runs on `nnodes` nodes: JOB-GROUP-SIZE, found on the
    launch's own `--nnodes`, is gone once the layout's nodes are the `pods` its object
    starts per group (what `fix` sets)."""
    return [i for i in job if i.rule != GROUP_SIZE_RULE or nnodes != pods]


def _span(first: int, last: int) -> str:
    return str(first) if first == last else f"{first}..{last}"


def _check_job(
    commands: tuple[LaunchCommand, ...], parsed: list[ParsedCommandLine]
) -> list[JobIssue]:
    issues: list[JobIssue] = []
    layout = [{k: v for k, v in p.values.items() if k not in PER_NODE_FIELDS} for p in parsed]
    for c, p, values in zip(commands[1:], parsed[1:], layout[1:], strict=True):
        # A field unknown here on either node (a shell expansion) cannot be said to differ.
        unknown = {*parsed[0].unknown_values, *p.unknown_values}
        diff = sorted({k for k, _ in set(values.items()) ^ set(layout[0].items())} - unknown)
        if diff:
            issues.append(
                JobIssue(
                    ONE_LAYOUT_RULE,
                    f"the node launched on line {c.line} disagrees with the first node (line "
                    f"{commands[0].line}) on {', '.join(diff)}: one job needs one layout",
                    c.line,
                )
            )
    addrs = [(c.line, p.dist_init_addr) for c, p in zip(commands, parsed, strict=True)]
    for line, addr in addrs[1:]:
        if _one_spelling(addr) != _one_spelling(addrs[0][1]):
            issues.append(
                JobIssue(
                    "JOB-DIST-INIT",
                    f"the node launched on line {line} names --dist-init-addr {addr} and the "
                    f"first node {addrs[0][1]}: every node must rendezvous at one address",
                    line,
                )
            )
    nnodes = int(parsed[0].values.get("nnodes", 1))
    ranks = [p.values.get("node_rank", p.unknown_values.get("node_rank")) for p in parsed]
    literal = [r for r in ranks if isinstance(r, int)]
    if len(literal) == len(ranks) and sorted(literal) != list(range(nnodes)):
        seen: dict[int, int] = {}
        line = commands[-1].line
        for c, r in zip(commands, literal, strict=True):
            if r in seen or not 0 <= r < nnodes:
                line = c.line
                break
            seen[r] = c.line
        issues.append(
            JobIssue(
                "JOB-NODE-RANKS",
                f"--node-rank values [{listed([str(r) for r in literal], ', ')}] do not cover "
                f"0..{nnodes - 1} once each "
                f"(--nnodes {nnodes}); first wrong at line {line}",
                line,
            )
        )
    return _bounded(issues)


def _node_placements(
    commands: tuple[LaunchCommand, ...], parsed: list[ParsedCommandLine]
) -> list[NodePlacement]:
    """One `NodePlacement` per distinct placement that differs from the first node's (the
    first node of each): thousands of nodes of a few bases are a few checks."""

    def placement(p: ParsedCommandLine) -> tuple[tuple[str, int], ...]:
        return tuple((k, p.values[k]) for k in NODE_PLACEMENT if k in p.values)

    seen = {placement(parsed[0])}
    out = []
    for c, p in zip(commands[1:], parsed[1:], strict=True):
        own = placement(p)
        if own not in seen:
            seen.add(own)
            out.append(NodePlacement(c.line, own))
    return out


def _bounded(issues: list[JobIssue]) -> list[JobIssue]:
    """At most `MAX_ITEMS_SHOWN` issues of each rule, then one that counts the rest: a
    script of thousands of launches is a report of a few lines."""
    by_rule: dict[str, list[JobIssue]] = {}
    for issue in issues:
        by_rule.setdefault(issue.rule, []).append(issue)
    out: list[JobIssue] = []
    for rule, found in by_rule.items():
        out += found[:MAX_ITEMS_SHOWN]
        rest = found[MAX_ITEMS_SHOWN:]
        if rest:
            lines = listed([str(i.line) for i in rest], ", ")
            message = f"{len(rest)} more node(s) disagree the same way (lines {lines})"
            out.append(JobIssue(rule, message, rest[0].line))
    return out


def _with_config_file(
    command: LaunchCommand, parsed: ParsedCommandLine, search: tuple[Path, ...]
) -> ParsedCommandLine:
    """`parsed` with the flags of its `--config FILE` under it, as SGLang merges them: the
    YAML's keys become flags placed before the command's own, so the command wins
    (`ConfigArgumentMerger`, 0.5.23). Positions stay the command's: a rewrite edits the
    command line, whose flags override the file."""
    if parsed.config_file is None:
        return parsed
    from meshsat.solver.inputs.files import load_config_file

    name = parsed.config_file
    path = next(
        (c for c in (Path(name), *(d / name for d in search)) if c.is_file()),
        None,
    )
    if path is None:
        parsed.notes.append(
            f"--config {name}: no such file here, so the flags it holds are not read "
            "(give its contents with --config, or run where the file is)"
        )
        return parsed
    if path.suffix.lower() not in (".yaml", ".yml"):
        parsed.notes.append(f"--config {name}: SGLang reads only YAML config files")
        return parsed
    data = load_config_file(path)
    words = tuple(Word(w, -1, None, -1) for w in _config_words(data))
    from_file = parse_launch(LaunchCommand(command.line, command.program, (), words))
    merged = ParsedCommandLine(
        values={**from_file.values, **parsed.values},
        flags=[*from_file.flags, *parsed.flags],
        model_path=parsed.model_path or from_file.model_path,
        spans=parsed.spans,
        ignored=[*from_file.ignored, *(f for f in parsed.ignored if f not in from_file.ignored)],
        memory={**from_file.memory, **parsed.memory},
        unknown_flags=[*from_file.unknown_flags, *parsed.unknown_flags],
        given=[*from_file.given, *parsed.given],
        outside=[*from_file.outside, *parsed.outside],
        inline=parsed.inline,
        unknown_values={
            k: v
            for k, v in {**from_file.unknown_values, **parsed.unknown_values}.items()
            if k not in parsed.values
        },
        dist_init_addr=parsed.dist_init_addr or from_file.dist_init_addr,
        config_file=name,
        config_keys=[str(k).replace("-", "_") for k in data],
        ascend_signs=[]
        if "--device" in from_file.flags or "--device" in parsed.flags
        else [*from_file.ascend_signs, *parsed.ascend_signs],
        notes=[
            *parsed.notes,
            f"--config {name}: read {len(from_file.flags)} flag(s) from it; the "
            "command's own flags override them",
        ],
    )
    return merged


def _config_words(data: dict[str, Any]) -> list[str]:
    """A config mapping as the words SGLang's merger makes of it: `true` on an on/off flag
    is the bare flag and `false` leaves it out; a list is one flag with several values."""
    out: list[str] = []
    for key, value in data.items():
        flag = "--" + str(key).replace("_", "-")
        name = FLAGS.get(flag)
        if isinstance(value, bool) and (name is None or CONFIG_SPECS[name].kind == "bool"):
            out += [flag] if value else []
        elif isinstance(value, list):
            out += [flag, *(str(v) for v in value)] if value else []
        elif isinstance(value, dict):
            out += [flag, json.dumps(value)]
        else:
            out += [flag, str(value).lower() if isinstance(value, bool) else str(value)]
    return out


#: A variable's expansion in the spellings that expand alike: `$X`, `${X}`, and `${X?msg}`
#: / `${X:?msg}` (which only add an error when X is unset).
_EXPANSION = re.compile(r"\$\{([A-Za-z_]\w*)(?::?\?[^}]*)?\}|\$([A-Za-z_]\w*)")


def _one_spelling(address: str | None) -> str | None:
    """An address as written, each expansion in one spelling: `${LEADER_IP?}:5000` on one
    node and `${LEADER_IP}:5000` on the next name one rendezvous."""
    if address is None:
        return None
    return _EXPANSION.sub(lambda m: "$" + (m.group(1) or m.group(2)), address)
