"""Kubeflow Trainer v2's registry record: a replica-set engine, run locally as it is planned,
whose runtimes an install adds when asked (``--runtimes``).

The operator resolves a TrainJob's runtime as upstream's controller does, from the
cluster's TrainingRuntimes (the TrainJob's namespace) and ClusterTrainingRuntimes, which it
lists and watches (read only: nothing else), before the defaults of their names; a TrainJob
is reconciled again when a runtime changes. It may create the ConfigMap and Secret of a
TrainJob of the mpi policy (its hostfile and key pair); locally such a TrainJob reaches its
hosts through the exec agent (:mod:`.local`)."""

from kubemill.engines.base import Engine, InstallExtra, LocalSupport, OperatorGrant
from kubemill.engines.trainer.api import runtimes
from kubemill.engines.trainer.api.kind import TRAINJOB
from kubemill.engines.trainer.api.runtime import GROUP
from kubemill.engines.trainer.api.runtime_crds import (
    RUNTIME_PLURALS,
    default_runtime_objects,
    runtime_crds,
)
from kubemill.engines.trainer.framework import Trainer
from kubemill.engines.trainer.local import LOCAL_ENV, refusals, run_locally

RUNTIMES = InstallExtra(
    "runtimes",
    "Also install Kubeflow Trainer's runtime CRDs and its default ClusterTrainingRuntimes.",
    runtime_crds,
    default_runtime_objects,
    {kind: (plural, kind != "ClusterTrainingRuntime") for kind, plural in RUNTIME_PLURALS.items()},
    known=lambda doc, source: runtimes.add(doc, source=source),
    forget=runtimes.forget,
)
"""``kubemill install --runtimes``: the runtimes' CRDs, then the default runtimes; without a
cluster, a runtime manifest given to a run (``--runtime``, the config file's ``runtimes:``)
joins the registry the TrainJobs resolve against, before the default of its name."""

ENGINE = Engine(
    TRAINJOB,
    Trainer(),
    "Kubeflow Trainer v2: a training runtime's steps; torch (PET_*), xgboost, jax or mpi nodes",
    # No TrainJob field says ttlSecondsAfterFinished (JobSet's is refused): none expires.
    expires=False,
    extras=(RUNTIMES,),
    grants=(
        OperatorGrant(
            (GROUP,),
            tuple(RUNTIME_PLURALS.values()),
            ("list", "watch"),
            "TrainJobs resolve their runtime from the cluster's (read only)",
        ),
        # As an MPI job's (the same grants): the mpi policy's hostfile and key pair.
        OperatorGrant(
            ("",),
            ("configmaps",),
            ("list", "watch", "create", "update"),
            "TrainJobs of the mpi policy get their hostfile in a ConfigMap",
        ),
        OperatorGrant(
            ("",),
            ("secrets",),
            ("list", "watch", "create", "delete"),
            "TrainJobs of the mpi policy get a key pair of their own in a Secret",
        ),
    ),
    local=LocalSupport(env=LOCAL_ENV, replan=run_locally, refusals=refusals),
)

__all__ = ["ENGINE", "RUNTIMES"]
