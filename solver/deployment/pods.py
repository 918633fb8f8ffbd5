"""Fitting a layout to the pods its manifest object starts (JOB-GROUP-SIZE), and a launch
to what it runs on before `fix` searches (`fit_launch`: the pods, then the visible-devices
list, `visible.fit_to_list`), for `meshsat fix` on one server and on each server of a
deployment alike.

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

from meshsat.solver.deployment.visible import RULE as VISIBLE_RULE
from meshsat.solver.deployment.visible import ShortList, fit_to_list
from meshsat.solver.inputs.launch import LaunchCommand
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


@dataclass(frozen=True)
class LaunchFit:
    """What `fix` searches from for one launch: the layout and GPU count (None: the
    search's own), the pods it was moved onto (None: not moved) and the list it was fitted
    to (None: none)."""

    config: Config
    gpus: int | None
    pods: int | None = None
    listed: ShortList | None = None

    @property
    def pins(self) -> tuple[str, ...]:
        """The fields the fitting holds: the nodes, where the object's pods decide them."""
        return ("nnodes",) if self.pods is not None else ()

    @property
    def rules(self) -> tuple[str, ...]:
        """The launch rules the fitting repairs: the search only sees the fitted layout, so
        its fixes name them through these."""
        moved = (GROUP_SIZE_RULE,) if self.pods is not None else ()
        return (*moved, *((VISIBLE_RULE,) if self.listed is not None else ()))


def fit_launch(
    config: Config,
    job: Sequence[JobIssue],
    pods: int | None,
    commands: Sequence[LaunchCommand],
    model: ModelSpec | None,
    pack: Pack,
    *,
    gpus: int | None = None,
) -> LaunchFit:
    """The launch's layout on the `pods` its object starts (`fit_to_pods`), then, without a
    GPU count (`gpus`, or one the pods gave), on its visible-devices list (`fit_to_list`)."""
    moved = fit_to_pods(config, job, pods, model, pack)
    if moved is not None:
        config, gpus = moved.config, gpus if gpus is not None else moved.gpus
    found = fit_to_list(config, commands, pack.version) if gpus is None and commands else None
    if found is not None:
        config, gpus, short = found
    return LaunchFit(
        config, gpus, pods if moved is not None else None, None if found is None else short
    )
