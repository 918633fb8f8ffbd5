"""Stand-ins for the GPU-only packages a release's layer modules import, so that SGLang's own
layer constructors run on CPU on the meta device.

Runs inside a release venv (never imported by meshsat). Only packages that are *absent* from
the venv are stood in for (and the few installed ones whose import fails on CPU); any
attribute of a stand-in is a class that absorbs calls, subclassing and decorators. Import
this module before anything from `sglang`.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

_CANDIDATES = (
    "aiter", "blobfile", "cuda", "cutlass", "decord", "deep_ep", "deep_gemm", "einops",
    "flash_attn", "flashinfer", "kernels", "llguidance", "mooncake", "msgspec", "numba",
    "nvshmem", "openai", "orjson", "outlines", "partial_json_parser", "petit_kernel",
    "pybase64", "pynvml", "quark", "setproctitle", "sgl_kernel", "soundfile", "tiktoken",
    "tilelang", "timm", "torch_memory_saver", "torchvision", "triton", "uvloop", "vllm",
    "xgrammar", "zmq",
)  # fmt: skip
#: Decided before the finder is installed, so `find_spec` sees the venv as it is.
ABSENT = {m for m in _CANDIDATES if importlib.util.find_spec(m) is None}
# Installed but broken on CPU in some venvs (tvm_ffi needs a CUDA runtime; 0.4.6's
# compressed_tensors wants a newer transformers): stood in for there only.
for _name in ("tvm_ffi", "compressed_tensors"):
    try:
        importlib.import_module(_name)
    except Exception:
        ABSENT.add(_name)
        for _k in [k for k in sys.modules if k.split(".")[0] == _name]:
            del sys.modules[_k]


class _Meta(type):
    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _make(name)

    def __getitem__(cls, key: Any) -> Any:
        return cls

    def __or__(cls, other: Any) -> Any:
        return cls

    __ror__ = __or__


class Absorb(metaclass=_Meta):
    """Anything a stand-in module hands out."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __init_subclass__(cls, **kwargs: Any) -> None:
        pass

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.any_schema()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _make(name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]  # used as a decorator
        return Absorb()

    def __getitem__(self, key: Any) -> Any:
        return Absorb()

    def __bool__(self) -> bool:
        return False

    def __iter__(self) -> Any:
        return iter(())


def _make(name: str) -> Any:
    return _Meta(name, (Absorb,), {})


class _StandIn(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _make(name)


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name.split(".")[0] in ABSENT:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> Any:
        module = _StandIn(spec.name)
        module.__path__ = []
        # transformers compares torchvision's version (and takes its PIL paths below 0.27)
        setattr(module, "__version__", "0.0.0")  # noqa: B010
        return module

    def exec_module(self, module: Any) -> None:
        pass


def _cuda_capability(device: Any = None) -> tuple[int, int]:
    return (9, 0)  # what model code that probes it unconditionally expects of a Hopper


import torch  # noqa: E402

if not torch.cuda.is_available():
    torch.cuda.get_device_capability = _cuda_capability
sys.meta_path.insert(0, _Finder())

if "torchvision" in ABSENT:
    # transformers 5.12 (0.5.18/0.5.19 venvs) asks the package metadata, not the import
    # system, whether torchvision is there, and sglang's Janus config registers an image
    # processor at import time: say it is, for that registration only.
    _iu: Any = importlib.import_module("transformers.utils.import_utils")
    if "torchvision" in getattr(_iu, "BACKENDS_MAPPING", {}):
        _iu.BACKENDS_MAPPING["torchvision"] = (lambda: True, "")
