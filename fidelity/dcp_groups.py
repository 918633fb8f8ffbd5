"""Record each release's decode-CP groups, or the error it raises, from its own
`initialize_model_parallel`.

    python -m fidelity.dcp_groups [0.5.23 ...]     # default: every 0.5 release in the cache

The function runs in the release's venv on a stand-in `torch.distributed` (world size tp·pp,
`init_model_parallel_group` records the rank lists instead of building communicators), over
a grid of (tp, pp, attention DP, dcp). The answers go to
`tests/fixtures/dcp_groups/<version>.json`; `tests/test_dcp_groups.py` replays them: SGLang's
`tensor_model_parallel_size (..) must be divisible by decode_context_parallel_size (..)`
is meshsat's DCP-TP-DIV, and every accepted layout's TP, attention-TP and decode-CP groups
are meshsat's rank plan.
"""

from __future__ import annotations

import itertools
import json
import subprocess
from typing import Any

from fidelity.record import ROOT, asked_versions, venv_python

FIXTURES = ROOT / "tests" / "fixtures" / "dcp_groups"

#: (tp, pp, attention DP, dcp): the decode-CP widths around every tp, with and without
#: attention DP (attention TP below tp), two stages.
GRID: tuple[tuple[int, int, int, int], ...] = tuple(
    (tp, pp, adp, dcp)
    for tp, pp, adp, dcp in itertools.product((1, 2, 3, 4, 6, 8), (1, 2), (1, 2, 4), (2, 3, 4, 8))
    if tp % adp == 0
)

#: Run inside the release's venv: argv[1] is the JSON grid, stdout the JSON answers.
_PROBE = r"""
import importlib.machinery, inspect, json, sys, types

class _Any(types.ModuleType):  # torchvision is not installed in the recorder's venvs
    def __getattr__(self, n):
        if n.startswith("__"):
            raise AttributeError(n)
        return _Any(self.__name__ + "." + n)
    def __call__(self, *a, **k):
        return None
for m in ("torchvision", "torchvision.io", "torchvision.transforms",
          "torchvision.transforms.functional", "torchvision.transforms.v2",
          "torchvision.transforms.InterpolationMode"):
    mod = _Any(m); mod.__spec__ = importlib.machinery.ModuleSpec(m, None); mod.__path__ = []
    sys.modules[m] = mod

import sglang.srt.distributed.parallel_state as ps

# Imported at the end of the set-up; its module pulls the model layers in.
sampler = types.ModuleType("sglang.srt.layers.sampler")
sampler.SYNC_TOKEN_IDS_ACROSS_TP = False
sys.modules.setdefault("sglang.srt.layers.sampler", sampler)

made = {}
class Group:
    def __init__(self, ranks):
        self.ranks = ranks; self.pynccl_comm = None; self.rank_in_group = 0
def fake_init(group_ranks, local_rank, backend, *a, group_name=None, **k):
    made[group_name] = [list(r) for r in group_ranks]
    return Group(group_ranks)
ps.init_model_parallel_group = fake_init
ps.get_world_group = lambda: types.SimpleNamespace(local_rank=0, device_group=None)
td = ps.torch.distributed
td.is_initialized = lambda: True
td.get_backend = lambda g=None: "gloo"
for n in ("is_cuda", "is_hip"):
    if hasattr(ps, n):
        setattr(ps, n, lambda: True)
GLOBALS = [n for n in dir(ps) if n.startswith("_") and n[1:].isupper()]
NAMES = {"tp": "_TP", "attn_tp": "_ATTN_TP", "dcp": "_DCP"}
keyword = "tensor_model_parallel_size" in inspect.signature(ps.initialize_model_parallel).parameters
out = []
for tp, pp, adp, dcp in json.loads(sys.argv[1]):
    made.clear()
    for n in GLOBALS:
        if isinstance(getattr(ps, n), Group):
            setattr(ps, n, None)
    td.get_world_size = lambda: tp * pp
    try:
        if keyword:
            ps.initialize_model_parallel(
                tensor_model_parallel_size=tp, expert_model_parallel_size=1,
                pipeline_model_parallel_size=pp, attention_data_parallel_size=adp,
                attention_context_model_parallel_size=1, moe_data_model_parallel_size=1,
                decode_context_parallel_size=dcp)
        else:
            par = types.SimpleNamespace(
                tp_size=tp, moe_ep_size=1, pp_size=pp, attn_dp_size=adp, attn_cp_size=1,
                moe_dp_size=1, attn_dcp_size=dcp, shared_experts_tp_size=None,
                override_permanently=lambda **k: None)
            ps.get_parallel = lambda: par
            ps.initialize_model_parallel()
        groups = {k: [list(r) for r in getattr(ps, v).ranks] for k, v in NAMES.items()}
        out.append({"widths": [tp, pp, adp, dcp], "groups": groups})
    except RuntimeError as e:
        out.append({"widths": [tp, pp, adp, dcp], "error": str(e)})
print(json.dumps(out))
"""


def record(version: str) -> dict[str, Any]:
    run = subprocess.run(
        [str(venv_python(version)), "-c", _PROBE, json.dumps(GRID)],
        check=True,
        capture_output=True,
        text=True,
    )
    return {
        "sglang": version,
        "source": "sglang/srt/distributed/parallel_state.py: initialize_model_parallel",
        "records": json.loads(run.stdout),
    }


def main(argv: list[str] | None = None) -> int:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    for version in asked_versions(__doc__ or "", argv):
        if version.startswith("0.4"):  # no decode CP in 0.4.x
            continue
        path = FIXTURES / f"{version}.json"
        path.write_text(json.dumps(record(version), indent=None) + "\n")
        print(f"{version}: {len(GRID)} layouts -> {path.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
