"""Kubeflow Trainer v2's registry record: a replica-set engine, run locally as it is planned,
whose runtimes an install adds when asked (``--runtimes``).

The operator resolves a TrainJob's runtime from the defaults it knows; it does not read
runtimes from the cluster yet, so it is granted nothing on them (least privilege: a grant
no code uses fails tests/substrates/kubernetes/operator/test_rbac.py). It may create the
ConfigMap and Secret of a TrainJob of the mpi policy (its hostfile and key pair); locally
such a TrainJob reaches its hosts through the exec agent (:mod:`.local`)."""

from kubemill.engines.base import Engine, InstallExtra, LocalSupport, OperatorGrant
from kubemill.engines.trainer.api import runtimes
from kubemill.engines.trainer.api.kind import TRAINJOB
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
