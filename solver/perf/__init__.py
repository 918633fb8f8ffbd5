"""Performance estimates per validated layout: TTFT, TPOT, tokens/s per GPU and per user.

Beside the memory model (which says whether a layout loads and how much KV cache it has),
this subsystem says how fast it serves a workload, and from where the numbers come:
- `engine_args.py`: the one mapping of a resolved layout onto AIConfigurator's vocabulary;
- `aic.py`: AIConfigurator's step latencies (optional `perf` extra, imported lazily);
- `roofline.py`: meshsat's own roofline where the engine has no data or cannot express
  the layout;
- `ep_comm.py`: the engine's steps plus the roofline's EP all-to-all (`engine="auto"` with
  expert parallelism, labelled so);
- `schedule.py`: step latencies -> TTFT, TPOT and throughput under continuous batching;
- `estimator.py`: `PerfModel` (one model, GPU, release and workload; the SLA search);
- `ranking.py`: `rank_layouts`, what `meshsat plan` and autotuners call;
- `disagg.py`: `plan_disagg`, prefill/decode deployments and their P:D ratio
  (`meshsat plan --disagg`);
- `measured.py`: AIConfigurator's measured runs in meshsat's terms (for the scoring).

Python API for autotuners (docs/perf.md):

    from meshsat import solver
    from meshsat.solver.lang.model_spec import ModelSpec
    from meshsat.solver.memory.models import model_config
    from meshsat.solver.perf import PerfModel, rank_layouts
    from meshsat.solver.perf.workload import cli_workload
    # `plan --tpot 50`'s SLA; a bare Workload(1024, 1024, tpot_ms=50) has no TTFT limit.
    pm = PerfModel("deepseek-ai/DeepSeek-V3", "H200", cli_workload(1024, 1024, None, 50))
    spec = ModelSpec.from_hf_config(model_config("deepseek-ai/DeepSeek-V3"))
    rows = rank_layouts(solver.enumerate(16, model=spec), pm, top=5)

Importing this package does not import `aiconfigurator_core`.
"""

from __future__ import annotations

from meshsat.solver.perf.estimator import ENGINES, Estimate, PerfModel
from meshsat.solver.perf.ranking import Ranked, rank_layouts
from meshsat.solver.perf.schedule import Calibration
from meshsat.solver.perf.workload import Workload

__all__ = [
    "ENGINES",
    "Calibration",
    "Estimate",
    "PerfModel",
    "Ranked",
    "Workload",
    "rank_layouts",
]
