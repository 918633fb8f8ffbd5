"""`--emit lws` for `plan` and `fix`: the chosen layout as a Kubernetes LeaderWorkerSet
(solver/inputs/k8s.py writes it), declared once for both commands."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated

import typer

from meshsat.solver.errors import InputError
from meshsat.solver.inputs.k8s import launch_words, lws_manifest


class Emit(str, Enum):
    lws = "lws"


EmitOpt = Annotated[
    Emit | None,
    typer.Option(
        "--emit",
        help="lws: print the chosen layout as a Kubernetes LeaderWorkerSet (leader and worker "
        "templates with the SGLang command, size = nodes, GPUs per pod; the leader's address "
        "and the worker index become --dist-init-addr, --nnodes, --node-rank) instead of the "
        "report. Read it back with `meshsat validate --sglang-file`.",
        show_default=False,
    ),
]
ImageOpt = Annotated[
    str, typer.Option("--image", metavar="IMAGE", help="Container image of the emitted pods.")
]
NameOpt = Annotated[
    str, typer.Option("--name", metavar="NAME", help="Name of the emitted LeaderWorkerSet.")
]


def print_lws(
    command_line: str,
    gpus: int,
    gpus_per_node: int,
    *,
    model_path: str | None,
    name: str,
    image: str,
) -> None:
    """The manifest for one rendered launch command on `gpus` GPUs, on stdout."""
    sys.stdout.write(
        lws_for(command_line, gpus, gpus_per_node, model_path=model_path, name=name, image=image)
    )


def lws_for(
    command_line: str,
    gpus: int,
    gpus_per_node: int,
    *,
    model_path: str | None,
    name: str = "sglang",
    image: str = "lmsysorg/sglang:latest",
) -> str:
    """The LeaderWorkerSet for one rendered launch command (`plan`'s or `fix`'s) on
    `gpus` GPUs in nodes of `gpus_per_node`."""
    per_node = min(gpus_per_node, gpus)
    if gpus % per_node:
        raise InputError(f"{gpus} GPUs do not fill whole nodes of {per_node}; give --gpus-per-node")
    words, env = launch_words(command_line)
    if model_path is not None and "--model-path" not in words and "--model" not in words:
        words[3:3] = ["--model-path", model_path]  # after `python -m sglang.launch_server`
    return lws_manifest(
        words, nodes=gpus // per_node, gpus_per_node=per_node, env=env, name=name, image=image
    )
