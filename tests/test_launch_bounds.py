"""Pasted launch commands up to the 1 MiB bound (issue 28, items 6 and 7): the linear
reader of plain text agrees with the shell parser, the release's option index agrees with a
scan of the table, and what a megabyte of flags costs and prints is bounded by counts
(the work done), not by a clock. benchmarks/bench_launch_bounds.py measures the time."""

from __future__ import annotations

import difflib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.inputs import launch
from meshsat.solver.inputs.launch import (
    MAX_SHELL_CHARS,
    _plain,
    _shell_parse,
    normalised,
)
from meshsat.solver.inputs.sglang_cmdline import (
    MAX_HINTED,
    _options,
    missing_from_release,
    parse_sglang_command,
    release_flags,
)
from meshsat.solver.inputs.shell_vars import ordered_commands
from meshsat.solver.lang.limits import MAX_ITEMS_SHOWN
from meshsat.solver.packs import NEWEST
from tests.cli_helpers import run_cli

RELEASE = NEWEST.version

_WORDS = (
    "python",
    "python3",
    "-m",
    "sglang.launch_server",
    "sglang",
    "serve",
    "--tp",
    "8",
    "--tp-size=4",
    "--dp",
    "2",
    "A=1",
    "CUDA_VISIBLE_DEVICES=0,1",
    "x:y@h%p+1",
    "é",
    "if",
    "done",
    "time",
    "in",
    "--model-path",
    "deepseek-ai/DeepSeek-V3",
    "export",
    "NCCL_X=1",
)
_GAPS = (" ", "  ", "\t", "\n", " \\\n", "\\\n  ", "\n\n")


@st.composite
def plain_texts(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.sampled_from(_WORDS), min_size=1, max_size=14))
    gaps = draw(st.lists(st.sampled_from(_GAPS), min_size=len(words), max_size=len(words)))
    lead = draw(st.sampled_from(("", " ", "\n")))
    return lead + "".join(w + g for w, g in zip(words, gaps, strict=True))


def _shape(nodes: list[Any]) -> list[tuple[Any, ...]]:
    commands = [c for c, _ in ordered_commands(nodes)]
    return [(c.pos, [(p.kind, tuple(p.pos), p.word) for p in c.parts]) for c in commands]


@settings(max_examples=150, deadline=None)
@given(plain_texts())
def test_plain_text_reads_as_the_shell_parser_reads_it(text: str) -> None:
    """The oracle is bashlex on the same text: same commands, words, kinds and positions;
    text the fast path declines (a reserved word first on a line) is bashlex's alone."""
    text = normalised(text)
    fast = _plain(text)
    if fast is None:
        return
    try:
        shell = _shape(_shell_parse(text))
    except Exception:  # the shell parser refused text the fast path read
        pytest.fail(f"the plain reader accepted what bashlex refuses: {text!r}")
    assert _shape(fast) == shell, text


@pytest.mark.parametrize(
    "text", ["--x 'a b'", "--x $Y", "a; b", "a | b", "--x\x1b[2J", "a # c", "a\\b", "a\r\nb"]
)
def test_shell_syntax_goes_to_the_shell_parser(text: str) -> None:
    assert _plain("python -m sglang.launch_server " + text) is None


def test_shell_syntax_beyond_its_bound_is_refused_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = "python -m sglang.launch_server --tp 8 " + "--x 'a' " * (MAX_SHELL_CHARS // 8)
    run = run_cli(capsys, "validate", "--sglang", text)
    assert run.code == 2 and run.err.count("\n") == 1 and "shell syntax" in run.err
    # The same number of plain words is read.
    plain = "python -m sglang.launch_server --tp 8 " + "--x a " * (MAX_SHELL_CHARS // 6)
    read = run_cli(capsys, "validate", "--sglang", plain)  # judged: no release takes --x
    assert read.code == 1 and "CMD-UNKNOWN-FLAG" in read.out


_OPTIONS = sorted(release_flags(RELEASE) or ())


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(_OPTIONS), st.integers(0, 30), st.sampled_from(("", "x", "-", "zz")))
def test_option_index_agrees_with_a_scan(option: str, cut: int, tail: str) -> None:
    """argparse's rule, by brute force over the table: an option itself, or a prefix of
    exactly one option, is accepted; a prefix of several is ambiguous."""
    flag = option[: max(2, len(option) - cut)] + tail
    index = _options(RELEASE)
    assert index is not None
    fits = [o for o in _OPTIONS if o.startswith(flag)]
    expected = flag if flag in _OPTIONS else (fits[0] if len(fits) == 1 else None)
    assert index.expanded(flag) == expected
    assert index.starting_with(flag, 3) == fits[:3]


def _megabyte_of_flags() -> tuple[str, int]:
    head = "python -m sglang.launch_server --tp 8 "
    n = ((1 << 20) - len(head)) // 16
    return head + " ".join(f"--xflag-{i:07d}" for i in range(n)), n


def test_a_megabyte_of_unknown_flags_is_bounded_work_and_output(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text, n = _megabyte_of_flags()
    calls: list[str] = []
    real = difflib.get_close_matches

    def counted(word: str, *args: Any, **kwargs: Any) -> list[str]:
        calls.append(word)
        return real(word, *args, **kwargs)

    monkeypatch.setattr(difflib, "get_close_matches", counted)
    monkeypatch.setattr(launch, "_shell_parse", lambda s: pytest.fail("plain text went to bashlex"))
    run = run_cli(capsys, "validate", "--sglang", text, "--format", "csv")
    assert run.code == 1  # no recorded release takes them: an error
    assert len(calls) <= MAX_HINTED  # the fuzzy search ran for the flags shown only
    assert "error,CMD-UNKNOWN-FLAG,\"SGLang's parser refuses --xflag-0000000" in run.out
    assert f"and {n - MAX_ITEMS_SHOWN} more" in run.out
    assert len(run.out) < 2000 and len(run.err) < 500


def test_hints_for_the_flags_shown_are_the_unbounded_search_s() -> None:
    """The first flags keep the "did you mean" a search over the whole table gives."""
    flags = ["--tp-sise", "--ep-szie", "--moe-dp-sizee", "--nodes", "--dist-init-adr"]
    flags += [f"--zz{i}" for i in range(20)]
    got = dict(missing_from_release(flags, RELEASE))
    for flag in flags[:MAX_HINTED]:
        close = difflib.get_close_matches(flag, _OPTIONS, n=1, cutoff=0.75)
        assert got[flag] == (f"did you mean {close[0]}?" if close else None)
    assert all(got[f] is None for f in flags[MAX_HINTED:])


def test_many_nodes_are_a_few_lines(capsys: pytest.CaptureFixture[str]) -> None:
    nodes = 500
    text = "".join(
        f"python -m sglang.launch_server --tp 8 --nnodes 2 --node-rank {i % 2} --dp {1 + i % 2}\n"
        for i in range(nodes)
    )
    parsed = parse_sglang_command(text)
    rules = [issue.rule for issue in parsed.job]
    # Every other node disagrees on dp_size: the first few are listed, the rest counted.
    assert rules.count("JOB-ONE-LAYOUT") == MAX_ITEMS_SHOWN + 1
    assert f"{nodes // 2 - MAX_ITEMS_SHOWN} more node(s)" in parsed.job[MAX_ITEMS_SHOWN].message
    run = run_cli(capsys, "validate", "--sglang", text)
    assert run.code == 1 and len(run.out) < 8000


def test_a_model_path_too_long_for_the_file_system_is_a_note(
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = "python -m sglang.launch_server --tp 8 --model-path " + "a" * 100_000
    run = run_cli(capsys, "validate", "--sglang", text)
    assert run.code == 0 and "Traceback" not in run.err and len(run.err) < 300


def test_the_parse_leaves_the_collector_as_it_found_it() -> None:
    import gc

    text, _ = _megabyte_of_flags()
    assert gc.isenabled()
    parse_sglang_command(text[:200_000])
    assert gc.isenabled()
    gc.disable()
    try:
        parse_sglang_command(text[:200_000])
        assert not gc.isenabled()
    finally:
        gc.enable()
