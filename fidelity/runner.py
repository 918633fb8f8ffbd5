"""Run one SGLang release's own argument handling on CPU; executed by that release's venv.

This file is deliberately standard-library only: it runs under the interpreter of the
per-release virtualenv (`fidelity/setup_venv.sh`), which has SGLang and its light
dependencies but not meshsat. The meshsat side (`fidelity/record.py`) talks to it over
JSON lines, so the same harness serves every release, old or new.

Two commands:
  python runner.py flags            -> the release's argparse flag table (one JSON object)
  python runner.py resolve < in.jsonl > out.jsonl
      each input line: {"id", "model", "args": {ServerArgs field: value}, "env": {VAR: value}},
      or "argv": [word, ...] in place of "args": a command line as typed after the launcher,
      read by the release's own parser (what `launch_server` does with a pasted command)
      each output line: {"id", "accepted", "error", "error_type", "step", "site",
                         "harness_error", "resolved": {field: value} | null,
                         "launch_error", "launch_site" (accepted configs only)}

How releases differ, and why the harness copes with both:
- 0.5.19 and later resolve in a pipeline (`ServerArgs.resolve_once()`, hooks in
  `sglang/srt/arg_groups/`); the step that raised is the first frame entered from
  `run_resolution_pipeline` that is not hook plumbing.
- Older releases resolve in `ServerArgs.__post_init__` (a sequence of `_handle_*`
  methods); the step is then the first frame entered from `__post_init__`.
Resolved fields are read through the release's `resolution_result` where it exists (the
pipeline records overrides instead of writing attributes), else from the attributes.

Three things make resolution run on a CPU-only machine without touching SGLang itself:
a torchvision stand-in (the only torchvision wheels are CUDA builds, and resolution
never calls it), a `torch.cuda.get_device_capability` answer for code that probes it
unconditionally, and restoring `os.environ` after every config (resolution writes it).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib.abc
import importlib.machinery
import io
import json
import logging
import os
import sys
import traceback
import types
import warnings
from collections.abc import Iterator
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS_DIR = os.path.join(HERE, "models")

# Resolved values recorded per config: the layout and the values SGLang derives from it.
RESOLVED_FIELDS = (
    "tp_size",
    "pp_size",
    "dp_size",
    "attn_dp_size",
    "attn_cp_size",
    "moe_dp_size",
    "ep_size",
    "dcp_size",
    "dwdp_size",
    "nnodes",
    "enable_dp_attention",
    "enable_dp_lm_head",
    "enable_prefill_cp",
    "cp_strategy",
    "moe_a2a_backend",
    "moe_dense_tp_size",
    "chunked_prefill_size",
    "page_size",
    "schedule_conservativeness",
    "enable_eplb",
    "eplb_algorithm",
    "ep_dispatch_algorithm",
    "expert_distribution_recorder_mode",
    "expert_distribution_recorder_buffer_size",
    "ep_join_mode",
    "elastic_ep_initial_size",
    "enable_dp_attention_local_control_broadcast",
    "disable_cuda_graph",
    "enable_deepep_moe",
    "enable_ep_moe",
    "enable_prefill_context_parallel",
    "prefill_cp_mode",
    "dcp_comm_backend",
    "dcp_replicate_q_proj",
    "load_balance_method",
    "elastic_ep_backend",
)

#: The machine a `"platform": "cuda"` record stands for: one Hopper (SM90) GPU per rank.
SM90_CUDA: dict[str, Any] = {
    "is_cuda": True,
    "is_cuda_alike": True,
    "is_hip": False,
    "is_npu": False,
    "is_xpu": False,
    "is_musa": False,
    "is_mps": False,
    "is_cpu": False,
    "is_sm90": True,
    "is_sm100": False,
    "is_sm100_or_sm110": False,
    "is_sm110": False,
    "is_sm120": False,
    "is_blackwell": False,
    "is_hopper_with_cuda_12_3": True,
    "has_amx": False,
    "has_flashinfer": False,
    "device_sm": 90,
    "device_capability": (9, 0),
}

# Frames that only forward to the step that did the work.
PLUMBING = {"run_hook", "run_post_process_pass", "wrapped", "_run", "__call__"}
DISPATCHERS = {
    "run_resolution_pipeline",
    "_run_resolution_pipeline",
    "__post_init__",
    "resolve_once",
}


class _Inert:
    """Stands in for any torchvision object; resolution imports but never uses them."""

    def __init__(self, *a: Any, **k: Any) -> None:
        pass

    def __call__(self, *a: Any, **k: Any) -> _Inert:
        return _Inert()

    def __getattr__(self, name: str) -> _Inert:
        return _Inert()

    def __iter__(self) -> Iterator[Any]:
        return iter(())


class _InertModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert()


class _TorchvisionFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves torchvision.* as inert modules, consulted only after the real import failed."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name == "torchvision" or name.startswith("torchvision."):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        mod = _InertModule(spec.name)
        mod.__path__ = []
        # transformers compares the version and takes its PIL paths below 0.27
        setattr(mod, "__version__", "0.0.0")  # noqa: B010
        return mod

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def _prepare() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore")
    try:
        import torchvision  # noqa: F401
    except Exception:
        for k in [k for k in sys.modules if k.split(".")[0] == "torchvision"]:
            del sys.modules[k]
        sys.meta_path.append(_TorchvisionFinder())
    import torch

    if not torch.cuda.is_available():

        def capability(device: Any = None) -> tuple[int, int]:
            return (9, 0)

        torch.cuda.get_device_capability = capability
    logging.disable(logging.WARNING)


def _server_args() -> Any:
    with contextlib.redirect_stdout(sys.stderr):
        from sglang.srt.server_args import ServerArgs

        # pipeline releases import their hooks lazily; pay it once, up front
        with contextlib.suppress(ImportError):
            from sglang.srt.arg_groups import pipeline  # noqa: F401
    return ServerArgs


def _field_names(server_args: Any) -> set[str]:
    """ServerArgs fields: a dataclass up to 0.5.22, a msgspec-style record in 0.5.23."""
    if dataclasses.is_dataclass(server_args):
        return {f.name for f in dataclasses.fields(server_args)}
    from sglang.srt.arg_groups.arg_utils import record_fields

    return {f.name for f in record_fields(server_args)}


def _parser(server_args: Any) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    with contextlib.redirect_stdout(sys.stderr):
        server_args.add_cli_args(parser)
    return parser


def _plain(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    value = getattr(v, "value", None)
    if isinstance(value, (str, int)):
        return value
    if callable(v):
        return getattr(v, "__name__", str(v))
    return str(v)


class _Refused(Exception):
    """What `parser.error` would have printed before exiting (argparse's own refusal)."""


def _raises_on_sight(act: argparse.Action) -> str | None:
    """SGLang's message when the option's own action refuses it as soon as it is given
    (0.4.6.post5's `DeprecatedAction` raises `ValueError(help)`; 0.5.18's calls
    `parser.error(error_message)` when it has one), else None. Only options that take no
    value and whose action is SGLang's own are tried: argparse's actions never raise on
    sight, and a value-taking action's refusal would depend on the value."""
    if act.nargs != 0 or type(act).__module__ == "argparse":
        return None

    def refuse(message: str) -> None:
        raise _Refused(message)

    probe = argparse.ArgumentParser(add_help=False)
    probe.error = refuse  # type: ignore[method-assign, assignment]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            act(probe, argparse.Namespace(), [], act.option_strings[0])
    except Exception as exc:  # the release's own refusal, whatever it raises
        return str(exc)
    return None


def dump_flags() -> dict[str, Any]:
    """Every option of the release's CLI, as argparse itself holds it."""
    sa = _server_args()
    parser = _parser(sa)
    fields = _field_names(sa)
    flags = []
    for act in parser._actions:
        if not act.option_strings:
            continue
        kind = type(act).__name__
        has_field = act.dest in fields
        help_text = act.help if isinstance(act.help, str) else None
        if help_text is not None and len(help_text) > 240:
            help_text = help_text[:237] + "..."
        flags.append(
            {
                "flags": list(act.option_strings),
                "dest": act.dest,
                "action": kind,
                "type": getattr(act.type, "__name__", None) if act.type else None,
                "choices": _plain(list(act.choices)) if act.choices is not None else None,
                "default": _plain(act.default),
                "nargs": act.nargs,
                "const": _plain(act.const),
                "deprecated": bool(getattr(act, "deprecated", False))
                or "deprecat" in (help_text or "").lower()
                or "deprecat" in kind.lower(),
                "field": has_field,
                "help": help_text,
                "raises": _raises_on_sight(act),
            }
        )
    no_cli = sorted(set(fields) - {a.dest for a in parser._actions})
    import importlib.metadata as md

    return {
        "sglang": md.version("sglang"),
        "resolution": "pipeline" if hasattr(sa, "resolve_once") else "post_init",
        "flags": flags,
        "fields_without_flag": no_cli,
        "fields": sorted(fields),
        "steps": resolution_steps(sa),
    }


def resolution_steps(sa: Any) -> list[str]:
    """The order SGLang's resolution steps run in, measured on one default config.

    A profiler records the first call of every step function (`handle_*` hooks, or
    `_handle_*` methods in releases that resolve in `__post_init__`), so the order comes
    from running the release, not from reading its source.
    """
    order: list[str] = []

    def prof(frame: Any, event: str, arg: Any) -> None:
        if event != "call":
            return
        name = frame.f_code.co_name
        path = frame.f_code.co_filename.replace("\\", "/")
        step = "/sglang/srt/" in path and name.lstrip("_").startswith("handle_")
        if step and name not in order:
            order.append(name)

    kw = {"model_path": os.path.join(MODELS_DIR, "llama"), "skip_tokenizer_init": True}
    kw["device"] = "cpu"
    env = dict(os.environ)
    sys.setprofile(prof)
    try:
        with contextlib.redirect_stdout(sys.stderr):
            obj = sa(**kw)
            if hasattr(obj, "resolve_once"):
                obj.resolve_once()
    finally:
        sys.setprofile(None)
        os.environ.clear()
        os.environ.update(env)
    return order


def _blame(tb: Any) -> tuple[str | None, str | None]:
    frames = traceback.extract_tb(tb)
    step = None
    after_dispatch = False
    for fr in frames:
        path = fr.filename.replace("\\", "/")
        if fr.name in DISPATCHERS and "/sglang/" in path:
            after_dispatch, step = True, None
            continue
        if not after_dispatch or step is not None:
            continue
        if fr.name in PLUMBING or path.endswith("resolution_hooks.py"):
            continue
        step = fr.name
    sg = [fr for fr in frames if "/sglang/" in fr.filename.replace("\\", "/")]
    site = None
    if sg:
        path = sg[-1].filename.replace("\\", "/")
        site = f"{path[path.rfind('/sglang/') + 1 :]}:{sg[-1].lineno}:{sg[-1].name}"
        step = step or sg[-1].name
    return step, site


#: What the harness sets on every config (`Resolver.resolve`): a typed command's defaults for
#: these would undo it (no model download, no device probe on a CPU-only machine).
_HARNESS = ("model_path", "device", "skip_tokenizer_init")


class Resolver:
    """One imported release, resolving many configs in one process."""

    def __init__(self) -> None:
        self.sa = _server_args()
        self.fields = _field_names(self.sa)
        self.actions = {a.dest: a for a in _parser(self.sa)._actions if a.option_strings}
        try:
            from sglang.srt.arg_groups.overrides import resolution_result

            self.result: Any = resolution_result
        except ImportError:
            self.result = None
        # Releases that read the machine through one platform context (0.5.23) can be told
        # they run on an H100-class CUDA box (SM90), so CUDA-only defaults and checks run.
        self.platform: Any = None
        self.cuda_facts: dict[str, Any] = {}
        try:
            from sglang.srt import runtime_context as rc

            known = set(getattr(rc, "_PLATFORM_PROBES", {})) | set(
                getattr(rc, "_PLATFORM_VALUES", {})
            )
            self.platform = rc.override_platform
            self.cuda_facts = {k: v for k, v in SM90_CUDA.items() if k in known}
        except (ImportError, AttributeError):
            pass

    def _argparse_error(self, args: dict[str, Any]) -> str | None:
        """What `launch_server`'s parser would reject; the constructor checks none of it."""
        for name, val in args.items():
            act = self.actions.get(name)
            if act is None or val is None or isinstance(val, bool):
                continue
            # A list flag (nargs "*", `--lora-target-modules q_proj v_proj`): argparse
            # checks each word.
            for one in val if isinstance(val, list) else [val]:
                if act.choices is not None and one not in act.choices:
                    return f"argument {act.option_strings[0]}: invalid choice: {one!r}"
                if act.type is int and not isinstance(one, int):
                    return f"argument {act.option_strings[0]}: invalid int value: {one!r}"
        return None

    def resolve(self, item: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {"id": item.get("id")}
        out.update(accepted=False, error=None, error_type=None, step=None, site=None)
        out.update(harness_error=False, resolved=None)
        if "argv" in item:
            model_dir = os.path.join(MODELS_DIR, item.get("model") or "llama")
            parsed = self._parse_argv(item["argv"], model_dir)
            if isinstance(parsed, str):
                out.update(error=parsed, error_type="ArgparseError", step="argparse")
                return out
            item = {**item, "args": parsed}
        args = dict(item.get("args", {}))
        unknown = sorted(set(args) - self.fields)
        if unknown:
            # launch_server's parser exits on a flag the release does not have.
            flags = " ".join("--" + name.replace("_", "-") for name in unknown)
            out.update(error=f"unrecognized arguments: {flags}", error_type="ArgparseError")
            out.update(step="argparse")
            return out
        bad = self._argparse_error(args)
        if bad is not None:
            out.update(error=bad, error_type="ArgparseError", step="argparse")
            return out
        kw: dict[str, Any] = {"model_path": os.path.join(MODELS_DIR, item.get("model") or "llama")}
        cuda = item.get("platform") == "cuda"
        if cuda and self.platform is None:
            out.update(harness_error=True, error="this release cannot be told it runs on CUDA")
            return out
        kw.update(skip_tokenizer_init=True, device="cuda" if cuda else "cpu")
        kw.update(args)
        env = dict(os.environ)
        os.environ.update({k: str(v) for k, v in (item.get("env") or {}).items()})
        obj = None
        override = self.platform(**self.cuda_facts) if cuda and self.platform else None
        try:
            with contextlib.redirect_stdout(sys.stderr):
                if override is not None:
                    override.install()
                obj = self.sa(**kw)
                if hasattr(obj, "resolve_once"):
                    obj.resolve_once()
            out["accepted"] = True
        except Exception as exc:
            out["error"] = (str(exc) or type(exc).__name__)[:300]
            out["error_type"] = type(exc).__name__
            out["step"], out["site"] = _blame(exc.__traceback__)
        finally:
            if override is not None and not out["accepted"]:
                override.restore()
            if os.environ != env:
                os.environ.clear()
                os.environ.update(env)
        try:
            return self._accepted(out, obj, item) if out["accepted"] else out
        finally:
            if override is not None and out["accepted"]:
                override.restore()

    def _accepted(self, out: dict[str, Any], obj: Any, item: dict[str, Any]) -> dict[str, Any]:
        if out["accepted"]:
            resolved = {}
            for f in RESOLVED_FIELDS:
                if f not in self.fields:
                    continue
                try:
                    v = self.result(obj, f) if self.result else getattr(obj, f)
                except Exception:
                    v = getattr(obj, f, None)
                resolved[f] = _plain(v)
            out["resolved"] = resolved
            out["launch_error"], out["launch_site"] = self._launch_check(obj, item)
        return out

    def _parse_argv(self, argv: list[str], model_path: str) -> dict[str, Any] | str:
        """The ServerArgs fields a typed command sets, as `launch_server` reads them (every
        field from the namespace, defaults included, as `ServerArgs.from_cli_args` does; the
        model path is the harness's own); or the parser's error."""
        parser = _parser(self.sa)
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):
                ns, rest = parser.parse_known_args([*argv, "--model-path", model_path])
        except SystemExit:
            return "argparse: " + said.getvalue().strip().splitlines()[-1]
        except ValueError as exc:  # 0.4.6.post5's DeprecatedAction raises, not exits
            return f"ValueError: {exc}"
        if rest:
            return f"unrecognized arguments: {' '.join(rest)}"
        return {k: v for k, v in vars(ns).items() if k in self.fields and k not in _HARNESS}

    def _launch_check(self, obj: Any, item: dict[str, Any]) -> tuple[str | None, str | None]:
        """`ServerArgs.check_server_args()`, which the engine runs at launch before any
        process starts (topology: nodes, multi-node DP, dense-MoE TP): CPU-only, so
        recorded too. Releases without it record None."""
        check = getattr(obj, "check_server_args", None)
        if check is None:
            return None, None
        env = dict(os.environ)
        os.environ.update({k: str(v) for k, v in (item.get("env") or {}).items()})
        try:
            with contextlib.redirect_stdout(sys.stderr):
                check()
        except Exception as exc:
            _, site = _blame(exc.__traceback__)
            return (str(exc) or type(exc).__name__)[:160], site
        finally:
            if os.environ != env:
                os.environ.clear()
                os.environ.update(env)
        return None, None


def main() -> int:
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    _prepare()
    if cmd == "flags":
        print(json.dumps(dump_flags()))
        return 0
    if cmd not in ("resolve", "parse"):
        print("usage: runner.py flags | resolve | parse", file=sys.stderr)
        return 2
    r = Resolver()
    for line in sys.stdin:
        if line.strip():
            item = json.loads(line)
            if cmd == "parse":  # the namespace launch_server's parser makes of typed words
                parsed = r._parse_argv(item["argv"], "MODEL")
                done = {"id": item.get("id")}
                if isinstance(parsed, str):
                    done["error"] = parsed
                else:
                    done["args"] = {k: _plain(v) for k, v in parsed.items()}
            else:
                done = r.resolve(item)
            sys.stdout.write(json.dumps(done) + "\n")
            sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
