"""Loaded by Python at start-up when this folder is on PYTHONPATH: lets a real
`python -m sglang.launch_server` get through argument resolution on a CPU-only machine.

Only what `fidelity/runner.py` already does for resolution, and only when needed: the
torchvision stand-in (PyPI serves CUDA torchvision builds only; resolution imports it and
never calls it) and an answer for `torch.cuda.get_device_capability`, which DSA model code
probes on any platform. SGLang itself is not touched, and logging is left as it is, so that
SGLang's own messages show. Used by `fidelity/plugin_launch.py`.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any


def _install() -> None:
    try:
        import torchvision  # noqa: F401
    except Exception:
        for name in [k for k in sys.modules if k.split(".")[0] == "torchvision"]:
            del sys.modules[name]
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        try:
            from runner import _TorchvisionFinder  # type: ignore[import-not-found]
        finally:
            sys.path.pop(0)
        sys.meta_path.append(_TorchvisionFinder())
    try:
        import torch
    except Exception:
        return
    if not torch.cuda.is_available():

        def capability(device: Any = None) -> tuple[int, int]:
            return (9, 0)

        torch.cuda.get_device_capability = capability


_install()
