"""Launches in the forms a sweep of 58 published SGLang launches found refused (exit 2) or
misread: Markdown code fences and whole doc sections, bash arrays (`ARGS=(...)`,
`"${ARGS[@]}"`), `[[ ... ]]` tests, `for ((...))` loops, `python -u -m`, a compose
service's `entrypoint:` + `command:`, a page that shows a two-node job and then a one-node
alternative. Array expansions are checked against bash itself (the launcher swapped for
`printf`, as in test_shell_vars)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.errors import InputError
from meshsat.solver.inputs.launch import read_launch_commands
from meshsat.solver.inputs.markdown import fenced_code
from meshsat.solver.inputs.shell_masks import (
    mask_arrays,
    mask_for_arith,
    mask_substitutions,
    mask_tests,
)
from tests.bash_oracle import needs_bash, words_bash_passes
from tests.cli_helpers import run_cli

LAUNCH = "python3 -m sglang.launch_server"
MODEL = "--model-path deepseek-ai/DeepSeek-V3"

#: A docs section as people copy it: a heading, prose with parentheses, two fenced blocks.
PAGE = f"""## Llama 3.1 405B

**Run 405B (fp16) on two nodes**

```bash
# node 0
{LAUNCH} {MODEL} --tp 16 --dist-init-addr 10.0.0.1:5000 --nnodes 2 --node-rank 0
```

Then (on the second node):

~~~shell
{LAUNCH} {MODEL} --tp 16 --dist-init-addr 10.0.0.1:5000 --nnodes 2 --node-rank 1
~~~
"""


def _tp(script: str) -> list[str | None]:
    out: list[str | None] = []
    for command in read_launch_commands(script):
        texts = [w.text for w in command.words]
        at = texts.index("--tp-size") if "--tp-size" in texts else texts.index("--tp")
        value = command.words[at + 1]
        out.append(None if value.expansion is not None else value.text)
    return out


def test_a_docs_section_is_read_by_its_code_blocks(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """bash read the fence's backticks as a command substitution around the launch ("one
    quoted word") and the prose as a syntax error: exit 2. Now the blocks are read, and
    --rewrite edits the page in place, prose and fences kept."""
    assert _tp(PAGE) == ["16", "16"]
    path = tmp_path / "page.md"
    path.write_text(PAGE)
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--json")
    assert run.code == 0 and json.loads(run.out)["derived"]["gpus_used"] == 16, run.err
    assert "only the Markdown page's shell code is read (2 of its 2 code blocks)" in run.err
    path.write_text(PAGE.replace("--tp 16", "--tp 3"))
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--rewrite")
    lines, page = run.out.splitlines(), PAGE.splitlines()
    assert len(lines) == len(page) and run.out != PAGE.replace("--tp 16", "--tp 3"), run.out
    for line, was in zip(lines, page, strict=True):
        assert line == was or line.startswith(LAUNCH), line


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("```\nsglang A\n```\n", "\nsglang A\n\n"),  # a bare block
        ("```bash\nA\n```", "\nA\n"),  # a shell block, whatever it holds
        ("prose (x)\n```sh\nA\n```\nmore\n", "\n\nA\n\n\n"),  # prose outside is not read
        ("```\nA\n", "\nA\n"),  # an opener whose block was not copied to its end
        ("A\n```\n", "A\n\n"),
        ("```A --tp 8\n```\n", "A --tp 8\n\n"),  # a fence glued to the command
        ("````\n```\nsglang A\n````\n", "\n\nsglang A\n\n"),  # a shorter fence inside is text
        ("```sh\nA\n```\n```python\nsglang(x)\n```\n", "\nA\n\n\n\n\n"),  # not shell
        ("```sh\nA\n```\n```\nTraceback (x)\n```\n", "\nA\n\n\n\n\n"),  # no SGLang in it
        ("> ```bash\n> A --tp 8\n> ```\n", "\n  A --tp 8\n\n"),  # a quoted reply
        ("```bash Prefill node\nA\n```\n", "\nA\n\n"),  # an MDX title
        ('```sh title="run.sh"\nA\n```\n', "\nA\n\n"),
        # No block launches, the prose does (an issue's bare command over its traceback).
        ("sglang.launch_server --tp 8\n```\nerr\n```\n", "sglang.launch_server --tp 8\n\n\n\n"),
        ("A\n", "A\n"),
    ],
)
def test_fenced_code(text: str, kept: str) -> None:
    code, _ = fenced_code(text)
    assert len(code) == len(text) and code.count("\n") == text.count("\n")
    assert " ".join(code.split()) == " ".join(kept.split())


def test_a_one_node_alternative_is_a_server_of_its_own(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A page shows a two-node job, then `--tp 8` on one node: read as three nodes of one
    job, it "disagreed on tp_size and nnodes" (JOB-ONE-LAYOUT). A one-node launch is never
    a node of another's job: two servers."""
    path = tmp_path / "page.md"
    path.write_text(PAGE + f"\nOn one node:\n\n```bash\n{LAUNCH} {MODEL} --tp 8\n```\n")
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--json")
    roles = json.loads(run.out)["roles"]
    assert run.code == 0 and [r["resolved"]["tp_size"] for r in roles] == [16, 8], run.out


@pytest.mark.parametrize(
    "script",
    [
        'if [[ -z "$RANK" && $# -lt 2 ]]; then echo usage; exit 1; fi\n{L} --tp 8\n',
        "while [[ $i -lt 3 ]]; do i=1; done\n{L} --tp 8\n",
        "for ((i = 0; i < 2; i++)); do echo $i; done\n{L} --tp 8\n",
        'if [[ "$NODE_RANK" == 0 ]]; then\n  {L} --tp 8\nfi\n',
    ],
)
def test_bash_tests_and_c_style_loops_are_read(script: str) -> None:
    """bashlex cannot parse `[[ ... ]]` or `for ((...))` ("unexpected token"): such
    scripts exited 2. Masked at the same width, what meshsat reads of them is unchanged."""
    text = script.format(L=LAUNCH)
    assert _tp(text) == ["8"]
    masked = mask_for_arith(mask_tests(text))
    assert len(masked) == len(text) and masked.count("\n") == text.count("\n")


ARRAY = f"""TP=8
ARGS=(
    --tp-size $TP   # the width
    --nnodes "2"
    --enable-dp-attention --dp 3
)
{LAUNCH} {MODEL} "${{ARGS[@]}}" --port 30000
"""


def test_an_array_of_flags_is_read_and_rewritten_where_it_is(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`ARGS=(...)` then `"${ARGS[@]}"`: bashlex refused the array ("unexpected token
    '('"), exit 2. Its words are read, and --rewrite edits them inside the array."""
    assert _tp(ARRAY) == ["8"]
    path = tmp_path / "launch.sh"
    path.write_text(ARRAY)
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--json")
    report = json.loads(run.out)
    # 0.5.23 resolves the deprecated --enable-dp-attention --dp 3 to --attn-dp-size 3.
    resolved = report["resolved"]
    assert run.code == 1 and (resolved["attn_dp_size"], resolved["dp_size"]) == (3, 1), run.out
    assert '"${ARGS[@]}" = its 7 word(s) (set on line 2)' in run.err
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--rewrite")
    assert run.out.splitlines()[-1] == ARRAY.splitlines()[-1]  # the launch line unchanged
    assert "--dp 3" not in run.out and "--tp-size $TP   # the width" in run.out, run.out


@pytest.mark.parametrize(
    "script",
    [
        "ARGS=(--tp 8)\nif true; then ARGS+=(--dp 2); fi\n{L} ${{ARGS[@]}}\n",  # a branch adds
        "if true; then ARGS=(--tp 8); fi\n{L} ${{ARGS[@]}}\n",  # set in a branch
        "ARGS+=(--tp 8)\n{L} ${{ARGS[@]}}\n",  # appended to what the caller's shell has
        "ARGS=(--tp 8)\nARGS=x\n{L} ${{ARGS[@]}}\n",  # no longer this array
        "{L} ${{ARGS[@]}}\n",  # never set here
        'ARGS=(--tp 8)\n{L} "${{ARGS[*]}}"\n',  # one word of them all
    ],
)
def test_an_array_not_known_for_certain_is_not_read(script: str) -> None:
    (command,) = read_launch_commands(script.format(L=LAUNCH))
    (word,) = command.words
    assert word.expansion is not None and "ARGS" in word.expansion


@pytest.mark.parametrize(
    ("script", "read"),
    [
        ("ARGS=(--tp 8)\nARGS+=(--dp 2)\n{L} ${{ARGS[@]}}\n", ["--tp", "8", "--dp", "2"]),
        ("ARGS=(--tp 8)\nARGS=(--tp 4)\n{L} ${{ARGS[@]}}\n", ["--tp", "4"]),
        ("ARGS=(--tp 8)\n{L} ${{ARGS[@]}}\nARGS+=(--dp 2)\n", ["--tp", "8"]),
    ],
)
def test_arrays_in_the_shells_order(script: str, read: list[str]) -> None:
    """An array set, then appended to (or set again) for certain, is read as bash has it
    where the launch runs."""
    script = script.format(L=LAUNCH)
    (command,) = read_launch_commands(script)
    assert [w.text for w in command.words] == read == words_bash_passes(script, LAUNCH)


ELEMENTS = st.sampled_from(
    ["--tp", "8", "$N", '"$N"', "'a b'", "--dp=2", "${N:-3}", "# note\n", "\n", "x$N"]
)


@needs_bash
@settings(max_examples=40, deadline=None)
@given(
    st.lists(ELEMENTS, min_size=1, max_size=8),
    st.sampled_from(['"${A[@]}"', "${A[@]}", "${A[*]}"]),
    st.sampled_from(["A=( {} )", "A=({})", "declare -a A=(\n{}\n)"]),
)
def test_arrays_against_bash(elements: list[str], use: str, form: str) -> None:
    """The words meshsat reads from `A=(...)` ... `"${A[@]}"` are the words bash passes
    (unquoted, each element split where it holds blanks)."""
    body = " ".join(elements)
    script = f"N=4\n{form.format(body)}\n{LAUNCH} {use} --end\n"
    words = read_launch_commands(script)[0].words
    _, arrays = mask_arrays(script)
    assert [a.name for a in arrays.values()] == ["A"]
    ran = words_bash_passes(script, LAUNCH)
    assert [w.text for w in words] == ran, script


def test_compose_entrypoint_and_command_are_one_launch(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """SGLang's own compose file puts the launcher in `entrypoint:` and the flags in
    `command:`; only `command:` was read ("launch no SGLang server", exit 2)."""
    compose = (
        "services:\n  sglang:\n    image: lmsysorg/sglang:latest\n"
        "    entrypoint: python3 -m sglang.launch_server\n"
        "    command:\n      --model-path deepseek-ai/DeepSeek-V3\n      --tp 8\n"
    )
    path = tmp_path / "compose.yaml"
    path.write_text(compose)
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--json")
    assert run.code == 0 and json.loads(run.out)["resolved"]["tp_size"] == 8, run.err


@pytest.mark.parametrize("options", ["-u", "-u -B", "-X faulthandler", "-Wignore", "-OO"])
def test_interpreter_options_before_the_module(options: str) -> None:
    """`python -u -m sglang.launch_server` was "not an SGLang launch command"."""
    assert _tp(f"python {options} -m sglang.launch_server --tp 4\n") == ["4"]


def test_a_prefill_script_whose_router_names_decode_servers_elsewhere(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Published PD recipes keep each role's launch in its own script; the prefill one with
    the router that names the decode nodes was refused (PD-BOTH-ROLES: "prefill servers
    but no decode server"). A decode server the router names and this script does not
    launch runs elsewhere; with no such name the finding stands."""
    prefill = f"{LAUNCH} {MODEL} --tp 8 --disaggregation-mode prefill --port 30000 &\n"
    router = (
        "python3 -m sglang_router.launch_router --port 8000 --pd-disaggregation "
        "--prefill http://127.0.0.1:30000 --decode http://10.0.0.2:30000\n"
    )
    path = tmp_path / "prefill.sh"
    path.write_text(prefill + router)
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--json")
    rules = [f["rule"] for f in json.loads(run.out)["deployment"]["findings"]]
    assert run.code == 0 and "PD-BOTH-ROLES" not in rules, run.out
    path.write_text(prefill + router.replace(" --decode http://10.0.0.2:30000", ""))
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--json")
    rules = [f["rule"] for f in json.loads(run.out)["deployment"]["findings"]]
    assert run.code == 1 and "PD-BOTH-ROLES" in rules, run.out


def test_a_flattened_page_is_read_as_continued_lines() -> None:
    """A page whose newlines were lost keeps its ` \\ `: bash reads `\\ ` as an escaped
    blank, a word " --tp" SGLang's parser refuses; it is read as the continuation it was."""
    assert _tp(f"{LAUNCH} \\   {MODEL} \\ --tp 8 \\ --dp 2\n") == ["8"]


@pytest.mark.parametrize("entry", ["--entrypoint=python3", "--entrypoint python3"])
def test_a_container_whose_entry_point_is_python(entry: str) -> None:
    """`docker run --entrypoint=python3 IMAGE -m sglang.launch_server ...` (InferenceMAX's
    scripts) was "not an SGLang launch command"."""
    script = f"docker run --rm {entry} $IMAGE \\\n  -m sglang.launch_server {MODEL} --tp 4\n"
    assert _tp(script) == ["4"]


def test_one_variable_spelled_two_ways_is_one_address(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """`${LEADER_IP?}:5000` on node 0 and `${LEADER_IP}:5000` on node 1 (an issue's
    launch) were "two rendezvous addresses" (JOB-DIST-INIT); another variable still is."""
    node = f"{LAUNCH} {MODEL} --tp 16 --nnodes 2 --node-rank {{}} --dist-init-addr {{}}:5000\n"
    path = tmp_path / "launch.sh"
    path.write_text(node.format(0, "${LEADER_IP?}") + node.format(1, "${LEADER_IP}"))
    assert run_cli(capsys, "validate", "--sglang-file", str(path)).code == 0
    path.write_text(node.format(0, "${LEADER_IP?}") + node.format(1, "$HEAD_IP"))
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--json")
    assert run.code == 1 and json.loads(run.out)["first"] == "JOB-DIST-INIT", run.out


VALUES = st.sampled_from(["--tp 8", "--dp  2", "--ep=4", "x", "--enable-dp-attention", "$N"])


@needs_bash
@settings(max_examples=30, deadline=None)
@given(st.lists(VALUES, min_size=1, max_size=4), st.sampled_from(["$ARGS", "${ARGS}", '"$ARGS"']))
def test_flags_in_a_variable_are_split_as_bash_splits_them(values: list[str], use: str) -> None:
    """`ARGS="--tp 8 --dp 2"` then `$ARGS`: bash passes each flag as a word; meshsat read
    one word "--tp 8 --dp 2", no flag, and judged tp 1. Quoted, it stays one word."""
    script = f'N=4\nARGS="{" ".join(values)}"\n{LAUNCH} {use} --end\n'
    words = [w.text for w in read_launch_commands(script)[0].words]
    ran = words_bash_passes(script, LAUNCH)
    assert words == ran, script


def test_a_flag_inside_a_variable_is_overridden_not_overwritten(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """--rewrite must not write a value over `$ARGS` (the other flags in it would go): the
    new flag follows the command's last word, where SGLang's parser takes it."""
    path = tmp_path / "launch.sh"
    path.write_text(f'ARGS="--tp 3 --nnodes 2"\n{LAUNCH} {MODEL} $ARGS --port 1\n')
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--rewrite")
    last = run.out.splitlines()[-1]
    assert last.startswith(f"{LAUNCH} {MODEL} $ARGS --port 1 --"), run.out
    assert "added after $ARGS, which sets it too" in run.err
    path.write_text(run.out)
    assert run_cli(capsys, "validate", "--sglang-file", str(path)).code == 0, run.out


def test_a_role_that_may_be_in_unread_flags_is_not_judged(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A launch line shared by both roles, its `--disaggregation-mode` in `$ROLE_ARGS`
    (set per role where meshsat cannot follow), read as an aggregated server: the router's
    "prefill work sent to an aggregated server" (ROUTER-ROLE) was an error. It is a warning
    that says why it was not checked; with nothing unread the error stands."""
    server = f"{LAUNCH} {MODEL} --tp 8 --port 30000 {{}}&\n"
    router = (
        "python3 -m sglang_router.launch_router --port 8000 --pd-disaggregation "
        "--prefill http://127.0.0.1:30000 --decode http://10.0.0.2:30000\n"
    )
    path = tmp_path / "launch.sh"
    for extra, code in (("$ROLE_ARGS ", 0), ("", 1)):
        path.write_text(server.format(extra) + router)
        run = run_cli(capsys, "validate", "--sglang-file", str(path), "--json")
        (role,) = [
            f for f in json.loads(run.out)["deployment"]["findings"] if f["rule"] == "ROUTER-ROLE"
        ]
        assert run.code == code and role["severity"] == ("warning" if extra else "error"), run.out
        assert role["message"].startswith("not checked: ") == bool(extra)


@pytest.mark.parametrize(
    "line",
    [
        'DIR=$(cd "$(dirname "$0")" && pwd)',  # the first line of many scripts
        'HEAD=$(scontrol show hostnames "$NODES" | head -n 1 || echo localhost)',
        'if [ "$(git -C "$DIR" rev-parse HEAD)" != "x" ]; then echo "no ($DIR)"; fi',
        "IP=$(hostname -I | awk '{print $1}') # (a comment)",
        "OUT=$(\n  cd /tmp &&\n  ls\n)",
    ],
)
def test_command_substitutions_with_lists_are_read(line: str) -> None:
    """bashlex cannot parse `&&` or `||` inside `$(...)` ("unexpected token ')'"): a
    script opening with `DIR=$(cd "$(dirname "$0")" && pwd)` exited 2. The substitution's
    value stays unknown; the launch after it is read, and an address built from one is
    said as written."""
    script = f"{line}\n{LAUNCH} {MODEL} --tp 8 --host $(hostname -i && true)\n"
    masked = mask_substitutions(script)
    assert len(masked) == len(script) and masked.count("\n") == script.count("\n")
    (command,) = read_launch_commands(script)
    assert _tp(script) == ["8"]
    assert command.words[-1].expansion == "$(hostname -i && true)"


def test_a_continuation_followed_by_a_comment_is_read_and_said(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """SGLang's XPU docs write `--flag \\   # comment`: exit 2 ("unexpected word ' '"). It
    is read as the continuation meant, and a note says bash would end the command there."""
    path = tmp_path / "launch.sh"
    path.write_text(f"{LAUNCH} {MODEL} \\\n  --tp 8 \\   # width\n  --dp 2 \\\n  --port 1\n")
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--json")
    resolved = json.loads(run.out)["resolved"]
    assert run.code == 0 and (resolved["tp_size"], resolved["dp_size"]) == (8, 2), run.err
    assert "followed by a comment is read as a line continuation (line 2)" in run.err


DOCKERFILE = """FROM lmsysorg/sglang:latest
ENV SGLANG_ENABLE_CP_V2=1
RUN pip install foo && (echo built)
EXPOSE 30000
ENTRYPOINT ["python3", "-m", "sglang.launch_server"]
CMD ["--model-path", "Qwen/Qwen3-8B", \\
     "--tp-size", "4", "--attn-cp-size", "2"]
"""
UNIT = f"""[Unit]
Description=SGLang server (tp 8)

[Service]
Environment="CUDA_VISIBLE_DEVICES=0,1,2,3"
ExecStart=/usr/bin/python3 -m sglang.launch_server \\
    {MODEL} --tp 4 --port 30000
Restart=always
"""


@pytest.mark.parametrize(
    ("text", "tp", "env"),
    [
        (DOCKERFILE, "4", ("SGLANG_ENABLE_CP_V2", "1")),
        ("FROM x\nCMD python3 -m sglang.launch_server --tp 2\n", "2", None),
        (UNIT, "4", ("CUDA_VISIBLE_DEVICES", "0,1,2,3")),
        ("ExecStart=python3 -m sglang.launch_server --tp 8\n", "8", None),
    ],
)
def test_dockerfiles_and_systemd_units(text: str, tp: str, env: tuple[str, str] | None) -> None:
    """A Dockerfile's CMD/ENTRYPOINT (exec form: a JSON list) and a unit's ExecStart= were
    "not an SGLang launch command" or a parse error (`Description=... (tp 8)`). The
    command is read, ENTRYPOINT followed by CMD as one, ENV and Environment= as its
    environment; RUN (the image's build) is not a launch."""
    (command,) = read_launch_commands(text)
    assert _tp(text) == [tp]
    if env is not None:
        assert env in command.exported or env in command.env, command


def test_a_dockerfiles_json_words_are_not_rewritten(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text(DOCKERFILE.replace('"4"', '"3"'))
    run = run_cli(capsys, "validate", "--sglang-file", str(path), "--rewrite")
    assert run.code == 2 and "a Dockerfile's JSON list of words" in run.err, run.err


@needs_bash
@pytest.mark.parametrize(
    "script",
    [
        'TP=8\nCMD="{L} --tp $TP --dp 2"\neval "$CMD"\n',
        "TP=8\nCMD='{L} --tp $TP --dp 2'\neval $CMD\n",  # expanded again by eval
        'ARGS="--tp 4"\neval {L} "$ARGS" --dp 2\n',
        'eval "{L} --tp 2"\n',
    ],
)
def test_a_launch_run_by_eval_is_read_as_bash_runs_it(script: str) -> None:
    """`CMD="python -m sglang.launch_server ..."` then `eval "$CMD"` (benchmark scripts):
    no launch was found. The string eval runs is read as bash reads it, where this shell
    knows every value in it; its words are not edited in place (form "eval")."""
    script = script.format(L=LAUNCH)
    (command,) = read_launch_commands(script)
    assert [w.text for w in command.words] == words_bash_passes(script, LAUNCH)
    assert command.form == "eval"


def test_an_eval_of_an_unknown_string_is_no_launch() -> None:
    with pytest.raises(InputError, match="not an SGLang launch command"):
        read_launch_commands('eval "$SERVER_COMMAND"\n')


def test_an_eval_of_a_string_with_unknown_flags_is_read_as_written() -> None:
    """`eval "python3 -m sglang.launch_server $ENGINE_ARGS"` (ENGINE_ARGS built in branches):
    not known whole, it is read as the quoted launch it is, the expansion unread."""
    (command,) = read_launch_commands(f'eval "{LAUNCH} --tp 2 $ENGINE_ARGS"\n')
    assert [w.text for w in command.words][:2] == ["--tp", "2"]
    assert command.words[-1].expansion == "$ENGINE_ARGS"
