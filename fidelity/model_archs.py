"""Record the model architectures each release's model registry serves
(fidelity/model_archs.json; the compact table ships as solver/packs/model_archs.json).

Why: SGLang resolves `config.json`'s `architectures` when the model loads
(`ModelRegistry.resolve_model_cls`, sglang/srt/models/registry.py). The registry's keys are
the `__name__` of each `sglang/srt/models/*.py` module's `EntryClass` (one class or a list;
subpackages are skipped), with no aliases added (0.5.23's `register` only merges packages).
A release without the class refuses the model ("Model architectures [...] are not supported
for now"), or, from 0.5.18 on, hands it to the Transformers backend
(`resolve_transformers_arch`), which refuses it unless the installed transformers has a
compatible class.

How: **statically, with `ast`** — the registry imports every module, and on CPU most of
them fail to import (0.4.6.post5: vllm, einops; 0.5.23: torchvision, einops), which the
registry only logs, so importing would record a fraction of what a GPU install serves. Each
`EntryClass = X` / `[X, Y]` names classes defined in the module or imported into it; an
imported name is resolved to the class's own name (`from m import A as B` gives `A`,
followed into the imported module when it is SGLang's). Standard library only; it reads the
release venvs' files ($HOME/.cache/meshsat-fidelity/<version>), from the repository root:

    python fidelity/model_archs.py                  # every venv present
    python fidelity/model_archs.py 0.5.23 0.4.6.post5
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fidelity" / "model_archs.json"
SHIPPED = ROOT / "solver" / "packs" / "model_archs.json"
VENVS = Path.home() / ".cache" / "meshsat-fidelity"
RELEASES = ("0.4.6.post5", "0.5.18", "0.5.19", "0.5.23")
#: What the registry raises when no architecture resolves (every release's wording).
UNSUPPORTED = "are not supported for now"


def models_dir(version: str, venvs: Path = VENVS) -> Path | None:
    """The release's sglang/srt/models folder, or None when its venv is absent."""
    found = sorted((venvs / version).glob("lib/python*/site-packages/sglang/srt/models"))
    return found[0] if found else None


def _module_file(models: Path, module: str) -> Path | None:
    """The file of an `sglang.srt.models...` module (None outside the models package)."""
    prefix = "sglang.srt.models."
    if not module.startswith(prefix):
        return None
    rel = Path(*module[len(prefix) :].split("."))
    for cand in (models / rel.with_suffix(".py"), models / rel / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _class_name(models: Path, tree: ast.Module, name: str, depth: int = 0) -> str:
    """The `__name__` of the class bound to `name` at the module's top level."""
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return name
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Name)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        ):
            return _class_name(models, tree, node.value.id, depth + 1)
        if isinstance(node, ast.ImportFrom) and node.module and depth < 4:
            for alias in node.names:
                if (alias.asname or alias.name) == name:
                    f = _module_file(models, node.module)
                    if f is None:
                        return alias.name
                    return _class_name(
                        models, ast.parse(f.read_text("utf-8-sig")), alias.name, depth + 1
                    )
    raise ValueError(f"cannot resolve {name!r}")


def entry_classes(models: Path, path: Path) -> list[str]:
    """The registry keys one module contributes (its EntryClass's `__name__`s)."""
    tree = ast.parse(path.read_text("utf-8-sig"))
    names: list[str] = []
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        if not any(isinstance(t, ast.Name) and t.id == "EntryClass" for t in node.targets):
            continue
        value = node.value
        elts = value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
        names = []
        for e in elts:
            if not isinstance(e, ast.Name):
                raise ValueError(f"{path.name}: EntryClass entry {ast.dump(e)}")
            names.append(_class_name(models, tree, e.id))
    return names


def record(models: Path) -> dict[str, object]:
    """One release: architecture -> module, and whether unknown ones go to Transformers."""
    archs: dict[str, str] = {}
    for path in sorted(models.glob("*.py")):
        for name in entry_classes(models, path):
            if name in archs:
                raise ValueError(f"duplicate {name}: {archs[name]} and {path.stem}")
            archs[name] = path.stem
    registry = (models / "registry.py").read_text()
    if UNSUPPORTED not in registry:
        raise ValueError("the registry's wording changed")
    return {
        "modules": len(list(models.glob("*.py"))),
        "transformers_fallback": '"TransformersForCausalLM"' in registry,
        "architectures": dict(sorted(archs.items())),
    }


def main(argv: list[str]) -> int:
    versions = argv or [v for v in RELEASES if models_dir(v) is not None]
    data = json.loads(OUT.read_text()) if OUT.exists() else {}
    for v in versions:
        models = models_dir(v)
        if models is None:
            print(f"{v}: no venv at {VENVS / v}", file=sys.stderr)
            return 1
        data[v] = record(models)
        n = len(data[v]["architectures"])
        print(f"{v}: {n} architectures from {data[v]['modules']} modules")
    data = {v: data[v] for v in RELEASES if v in data}
    OUT.write_text(json.dumps(data, indent=1) + "\n")
    shipped = {
        v: {
            "transformers_fallback": d["transformers_fallback"],
            "architectures": sorted(d["architectures"]),
        }
        for v, d in data.items()
    }
    SHIPPED.write_text(json.dumps(shipped, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
