"""MPI's registry record: workers, then a launcher whose ``mpirun`` reaches them, with the
ConfigMap, Secret and per-job access that takes (the operator's grants), run locally in
exec mode with OpenMPI's local settings."""

from kubemill.engines.base import Engine, LocalSupport, OperatorGrant
from kubemill.engines.mpi.api import MPIJOB
from kubemill.engines.mpi.framework import MPI
from kubemill.engines.mpi.local import LOCAL_ENV, run_locally

ENGINE = Engine(
    MPIJOB,
    MPI(),
    "MPI: Worker hosts, then a Launcher whose mpirun reaches them (OpenMPI, Intel, MPICH)",
    grants=(
        # No delete: an MPI job keeps its ConfigMap for life; it goes with the job.
        OperatorGrant(
            ("",),
            ("configmaps",),
            ("list", "watch", "create", "update"),
            "MPI jobs get their hostfile, discover_hosts.sh and exec agent in a ConfigMap",
        ),
        OperatorGrant(
            ("",),
            ("secrets",),
            ("list", "watch", "create", "delete"),
            "MPI jobs in ssh mode get a key pair of their own in a Secret",
        ),
        OperatorGrant(
            ("",),
            ("serviceaccounts",),
            ("list", "watch", "create", "delete"),
            "an MPI launcher in exec mode runs as an account of its own",
        ),
        OperatorGrant(
            ("rbac.authorization.k8s.io",),
            ("roles", "rolebindings"),
            ("list", "watch", "create", "delete"),
            "an MPI launcher's Role lets it exec into its own workers",
        ),
        # RBAC lets the operator grant only what it holds itself.
        OperatorGrant(
            ("",),
            ("pods",),
            ("get",),
            "an MPI launcher's Role lets it read pods",
            delegated=True,
        ),
        OperatorGrant(
            ("",),
            ("pods/exec",),
            ("get", "create"),
            "an MPI launcher's Role lets it exec into its own workers",
            delegated=True,
        ),
    ),
    local=LocalSupport(env=LOCAL_ENV, adapt=run_locally),
)

__all__ = ["ENGINE"]
