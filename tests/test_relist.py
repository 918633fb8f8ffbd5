"""HOST-GPU-OVERLAP repaired by a new visible-devices list (`apart.moved_apart`, `fix`'s
`relisted`), written where the user wrote the list (`set_env_values`).

The oracles: `validate` on the rewritten script (the deployment rules, which the fix does
not consult for its choice), and the devices each server runs on read back from the
rewritten text itself: a one-node `--tp k` server without `--base-gpu-id`/`--gpu-id-step`
takes local GPUs 0..k-1 (SGLang's placement; tests/test_host_gpus.py holds meshsat's to
SGLang's recorded one), so the first k ids its list names.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from meshsat.solver.cli.deployment_cmd import in_user_words, rewritten_deployment
from meshsat.solver.deployment.fix import fix_deployment
from meshsat.solver.deployment.validate import load_server, read, validate_deployment
from meshsat.solver.packs import get_pack

RELEASE = "0.5.23"
L = "python -m sglang.launch_server --model-path m"
_LIST = re.compile(r"(?:^|\s)(?:export\s+)?CUDA_VISIBLE_DEVICES=\"?([\d,]+)\"?")
_TP = re.compile(r"--tp (\d+)")
_BASE = re.compile(r" --base-gpu-id (\d+)")


def rewritten(text: str) -> tuple[str, list[str]]:
    deployment = read(text, load_server(None, RELEASE))
    out, notes = rewritten_deployment(deployment, get_pack(RELEASE))
    assert out is not None
    return out, notes


def overlaps(text: str) -> list[str]:
    report = validate_deployment(text, sglang_version=RELEASE)
    return [f.message for f in report.findings if f.rule == "HOST-GPU-OVERLAP"]


def devices_read_back(text: str) -> list[set[int]]:
    """Each launch line's GPUs, from the text alone: its own list, else the last exported
    one, `--tp` ids of it from its `--base-gpu-id` (the fix moves a server within its list
    that way where it can)."""
    exported: list[int] | None = None
    out = []
    for line in text.splitlines():
        match = _LIST.search(line)
        listed = None if match is None else [int(g) for g in match.group(1).split(",")]
        if line.startswith("export"):
            exported = listed
            continue
        tp = _TP.search(line)
        if tp is None:
            continue
        ids = listed if listed is not None else exported
        assert ids is not None, line
        base = _BASE.search(line)
        first = 0 if base is None else int(base.group(1))
        out.append(set(ids[first : first + int(tp.group(1))]))
    return out


def disjoint_on_the_machine(groups: list[set[int]], gpus: int = 8) -> bool:
    seen: set[int] = set()
    for g in groups:
        if g & seen or max(g) >= gpus:
            return False
        seen |= g
    return True


COPIED = (
    f"CUDA_VISIBLE_DEVICES=2,3 {L} --tp 2 --port 30000 &\n"
    f"CUDA_VISIBLE_DEVICES=2,3 {L} --tp 2 --port 30001 &\n"
)


def test_a_copied_list_moves_the_later_server_to_the_lowest_free_gpus() -> None:
    result = fix_deployment(COPIED, sglang_version=RELEASE)
    assert result.ok
    first, later = result.servers
    assert first.relisted is None
    assert later.relisted is not None and later.relisted.new == (0, 1)
    assert later.report.best.changes[-1] == ("CUDA_VISIBLE_DEVICES", "2,3", "0,1")
    assert "HOST-GPU-OVERLAP" in later.report.best.repairs
    as_json = later.to_dict()
    assert as_json["visible_devices"] == {
        "variable": "CUDA_VISIBLE_DEVICES",
        "old": [2, 3],
        "new": [0, 1],
    }
    deployment = read(COPIED, load_server(None, RELEASE))
    words = in_user_words(result, deployment, get_pack(RELEASE))
    printed = [s.report.best.command_line for s in words.servers]
    assert printed[0].startswith("CUDA_VISIBLE_DEVICES=2,3 python")
    assert printed[1].startswith("CUDA_VISIBLE_DEVICES=0,1 python")

    text, notes = rewritten(COPIED)
    assert text == COPIED.replace("=2,3", "=0,1", 2).replace("=0,1", "=2,3", 1)
    assert "aggregated@2: CUDA_VISIBLE_DEVICES: 2,3 -> 0,1" in notes
    assert overlaps(COPIED) and not overlaps(text)
    assert devices_read_back(text) == [{2, 3}, {0, 1}]


def test_an_export_line_is_edited_where_no_other_server_runs_with_it() -> None:
    own = f'export CUDA_VISIBLE_DEVICES="0,1"\n{L} --tp 2 --port 30000 &\n'
    text = f"CUDA_VISIBLE_DEVICES=0,1 {L} --tp 2 --port 30001 &\n" + own
    out, _ = rewritten(text)
    assert out == text.replace('"0,1"', '"2,3"')
    assert not overlaps(out) and disjoint_on_the_machine(devices_read_back(out))

    shared = f"export CUDA_VISIBLE_DEVICES=0,1,2,3\n{L} --tp 4 --port 30000 &\n"
    shared += f"{L} --tp 4 --port 30001 &\n"
    out, _ = rewritten(shared)
    # The export stays the first server's; the second sets its own list before its launch
    # (no base id frees it: 4 ranks on a list of 4).
    assert out.splitlines()[0] == "export CUDA_VISIBLE_DEVICES=0,1,2,3"
    assert out.splitlines()[2] == f"CUDA_VISIBLE_DEVICES=4,5,6,7 {L} --tp 4 --port 30001 &"
    assert not overlaps(out) and devices_read_back(out) == [{0, 1, 2, 3}, {4, 5, 6, 7}]


def test_ascend_lists_move_the_same_way() -> None:
    text = "".join(
        f"ASCEND_RT_VISIBLE_DEVICES=0,1 {L} --tp 2 --device npu --port {p} &\n"
        for p in (30000, 30001)
    )
    out, _ = rewritten(text)
    assert out.splitlines()[1].startswith("ASCEND_RT_VISIBLE_DEVICES=2,3 ")
    assert overlaps(text) and not overlaps(out)


def test_too_few_free_gpus_is_said_and_left() -> None:
    text = "".join(f"CUDA_VISIBLE_DEVICES=0,1,2,3 {L} --tp 4 --port {p} &\n" for p in (1, 2, 3))
    result = fix_deployment(text, sglang_version=RELEASE)
    assert not result.ok
    third = result.servers[2]
    assert third.relisted is None
    assert third.notes and "0 of the machine's 8 are free" in third.notes[0]
    out, notes = rewritten(text)
    assert out.splitlines()[2] == text.splitlines()[2]
    assert any("HOST-GPU-OVERLAP not repaired" in n for n in notes)
    assert any(n.startswith("still broken after the rewrite") for n in notes)


def test_a_value_not_written_as_read_is_left_with_a_note() -> None:
    text = f"CUDA_VISIBLE_DEVICES=0,1 {L} --tp 2 --port 1 &\n"
    text += f"CUDA_VISIBLE_DEVICES=0\\,1 {L} --tp 2 --port 2 &\n"
    out, notes = rewritten(text)
    assert out == text
    assert any("set CUDA_VISIBLE_DEVICES=2,3 by hand" in n for n in notes)


@st.composite
def scripts(draw: st.DrawFn) -> str:
    """2-3 one-node servers of one machine, each with a list of distinct GPUs at least as
    long as its TP size; drawn from few ids, so that lists often overlap."""
    lines = []
    for port in range(30000, 30000 + draw(st.integers(2, 3))):
        tp = draw(st.sampled_from((1, 2, 4, 4)))  # 3 x 4 ranks: too few GPUs
        ids = draw(st.lists(st.integers(0, 7), min_size=tp, max_size=tp + 1, unique=True))
        listed = ",".join(map(str, ids))
        lines.append(f"CUDA_VISIBLE_DEVICES={listed} {L} --tp {tp} --port {port} &")
    return "\n".join(lines) + "\n"


@settings(max_examples=15, deadline=None)
@given(scripts())
def test_fix_either_separates_the_servers_or_says_why_not(text: str) -> None:
    out, notes = rewritten(text)
    left = overlaps(out)
    said = [n for n in notes if "HOST-GPU-OVERLAP not repaired" in n]
    if left:
        assert said, (text, out, notes)  # never a silent half-fix
        return
    assert not said
    assert disjoint_on_the_machine(devices_read_back(out))
    # The first server keeps its list; the others change in their list or base id at most.
    assert out.splitlines()[0] == text.splitlines()[0]
    unlisted = [_BASE.sub("", _LIST.sub(" LIST", line)) for line in out.splitlines()]
    assert unlisted == [_LIST.sub(" LIST", line) for line in text.splitlines()]
