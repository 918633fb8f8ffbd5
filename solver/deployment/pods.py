"""Fitting a layout to the pods its manifest object starts (JOB-GROUP-SIZE).

A LeaderWorkerSet starts `spec.leaderWorkerTemplate.size` pods per group, and a StatefulSet
whose pods are one server's nodes starts `spec.replicas` (`k8s.pods_are_nodes`), whatever
the launch's `--nnodes` says. `fix` takes the object's count as the fact and the launch as
what is wrong: the layout is searched on that many nodes, held there (a pin). Its GPU count
stays where the pods share it evenly; otherwise each pod gives it the GPUs a node gives it
now (`fix`'s first tier keeps the GPU count, and on a count the pods cannot share it would
buy that with a feature, such as an elastic-EP join). Changing the object instead (its
size or replicas to the launch's `--nnodes`) is the other way out, which the notes name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from meshsat.solver.inputs.sglang_cmdline import GROUP_SIZE_RULE, JobIssue
from meshsat.solver.lang.config import Config
from meshsat.solver.lang.model_spec import ModelSpec
from meshsat.solver.packs import Pack
from meshsat.solver.validation.validate import validate


@dataclass(frozen=True)
class PodFit:
    """The layout on the object's pods, and the GPU count to search (None: the search's
    own, where the layout's GPUs per node are not known)."""

    config: Config
    gpus: int | None


def fit_to_pods(
    config: Config,
    job: Sequence[JobIssue],
    pods: int | None,
    model: ModelSpec | None,
    pack: Pack,
) -> PodFit | None:
    """The layout moved onto `pods` nodes where JOB-GROUP-SIZE holds (None otherwise)."""
    if pods is None or config.nnodes == pods or all(i.rule != GROUP_SIZE_RULE for i in job):
        return None
    fitted = config.model_copy(update={"nnodes": pods})
    used = validate(config, model, explain=False, sglang_version=pack).derived.get("gpus_used")
    if not isinstance(used, int) or used < 1 or used % pods == 0:
        return PodFit(fitted, None)
    return PodFit(fitted, used // config.nnodes * pods)
