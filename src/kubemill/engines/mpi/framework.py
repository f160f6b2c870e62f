"""MPI: an MPIJob becomes worker hosts, then a launcher whose ``mpirun`` reaches them.

Semantics of Kubeflow's mpi-operator (the seed's ``v1alpha2`` controller, which execs into
the workers, and ``v2beta1``, which uses SSH):

- **Files.** ConfigMap ``<job>-config``, mounted at ``/etc/mpi`` in the launcher (and in
  exec mode in the workers too, where ``orted`` looks for the agent's path):
  ``hostfile`` lists every worker (the launcher first with ``runLauncherAsWorker``) as
  ``<host> slots=N`` for OpenMPI or ``<host>:N`` for Intel MPI and MPICH;
  ``discover_hosts.sh`` prints the *running* workers, one ``<host>:N`` per line, rewritten
  as workers come and go (elastic Horovod's ``--host-discovery-script``). A host is the
  replica's DNS name through the job's headless service ``<job>``
  (``<job>-worker-0.<job>.<ns>.svc``; :meth:`Network.host_name`).
- **Remote shell**, per job (``spec.remoteShell``):
  - ``exec`` (the seed's design): the ConfigMap also holds ``kubexec``, kubemill's exec
    agent (:mod:`kubemill.engines.mpi.agent`), which ``mpirun`` runs as its remote shell to
    start ``orted`` in a worker through the Kubernetes exec API. The launcher runs as its
    own ServiceAccount, whose Role allows ``pods/exec`` on the job's own workers only
    (``resourceNames``) and reading pods. A worker container without a command only hosts
    what the launcher execs into it (:attr:`ReplicaPlan.host_only`).
  - ``ssh`` (v2beta1's default): a per-job key pair in Secret ``<job>-ssh`` (type
    ``kubernetes.io/ssh-auth``) at ``sshAuthMountPath`` in every replica, as ``id_rsa``,
    ``id_rsa.pub`` and ``authorized_keys``; the workers' images run sshd.
- **Launcher env**, per implementation: the hostfile (``OMPI_MCA_orte_default_hostfile``,
  ``I_MPI_HYDRA_HOST_FILE``, ``HYDRA_HOST_FILE``), the remote shell
  (``OMPI_MCA_plm_rsh_agent``, ``I_MPI_HYDRA_BOOTSTRAP[_EXEC]``, ``HYDRA_LAUNCHER[_EXEC]``
  in exec mode; SSH's connection retries in ssh mode), OpenMPI's default slots and FQDN
  host names, and ``K_MPI_JOB_ROLE`` (``launcher``/``worker``) on every replica.
- **Start order.** Workers first (stage 0), the launcher once they run, or, under
  ``launcherCreationPolicy: WaitForWorkersReady``, once every worker is Ready.
- **Outcome.** The launcher decides (:func:`decided_by`); a worker that fails for good
  (its restart policy exhausted, evicted) fails the job like any replica, by name.
"""

from __future__ import annotations

from dataclasses import replace

from kubemill.api import Container, EnvVar, Job
from kubemill.engines.mpi.api import MPIJob, RemoteShell
from kubemill.frameworks import mpi_launch
from kubemill.frameworks._common import PlanError, ReplicaSlot, build_replicas, env
from kubemill.frameworks.mpi_launch import (
    EXEC_AGENT,
    EXEC_AGENT_PROGRAM,
    EXEC_CONTAINER_VAR,
    HOSTFILE,
)
from kubemill.frameworks.plan import (
    AccessPlan,
    AccessRule,
    ExposedService,
    FilePlan,
    FileSet,
    HostListing,
    Network,
    Plan,
    ReplicaPlan,
    decided_by,
    replica_name,
)

LAUNCHER = "Launcher"
WORKER = "Worker"
CONFIG_MOUNT_PATH = "/etc/mpi"
DISCOVER_HOSTS = "discover_hosts.sh"


def config_name(job: MPIJob) -> str:
    """The ConfigMap with the hostfile, the discovery script and the exec agent."""
    return f"{job.name}-config"


def ssh_secret_name(job: MPIJob) -> str:
    """The Secret with the job's SSH key pair (ssh mode)."""
    return f"{job.name}-ssh"


def launcher_account_name(job: MPIJob) -> str:
    """The launcher's ServiceAccount, Role and RoleBinding (exec mode)."""
    return f"{job.name}-launcher"


def main_container(job: MPIJob, replica_type: str) -> Container:
    """The container MPI runs in: ``spec.mainContainer``, else the template's first."""
    container = job.main_container(replica_type)
    if container is None:
        raise PlanError(
            f"MPIJob {job.name}: replica type {replica_type} has no container "
            f"{job.main_container_name(replica_type)!r}; run `kubemill validate` on the manifest"
        )
    return container


def mpi_hosts(job: MPIJob) -> list[ReplicaSlot]:
    """The replicas mpirun places ranks on: the launcher first when it runs ranks too,
    then the workers (the hostfile's order, and what the launcher may exec into)."""
    hosts = [ReplicaSlot(LAUNCHER, 0)] if job.spec.run_launcher_as_worker else []
    return hosts + [ReplicaSlot(WORKER, index) for index in range(job.worker_count)]


def hostfile(job: MPIJob, network: Network) -> str:
    """Every host mpirun may use, one line each, by DNS name."""
    names = [network.host_name(h.replica_type, h.index, subdomain=job.name) for h in mpi_hosts(job)]
    return mpi_launch.hostfile(job.spec.mpi_implementation.value, names, job.spec.slots_per_worker)


def config_files(job: MPIJob) -> FileSet:
    """ConfigMap ``<job>-config``: the hostfile, the discovery script, the exec agent."""
    files = [
        # The hostfile's content is rendered with the Plan (see plan()); the discovery
        # script follows the running workers, so the core renders it.
        FilePlan(
            DISCOVER_HOSTS,
            mode=0o755,
            listing=HostListing(
                WORKER, line=f"echo {{host}}:{job.spec.slots_per_worker}", header="#!/bin/sh"
            ),
        ),
    ]
    mounted_in: tuple[str, ...] = (LAUNCHER,)
    if job.remote_shell is RemoteShell.EXEC:
        files.append(mpi_launch.exec_agent_file())
        # mpirun hands its plm_rsh_agent to every orted it starts, and OpenMPI 4's orted
        # stops at once ("plm_rsh_agent ... could not be found") when that path does not
        # exist where it runs: the workers need the agent's path too (never run there).
        mounted_in = (LAUNCHER, WORKER)
    return FileSet(
        config_name(job), tuple(files), mount_path=CONFIG_MOUNT_PATH, replica_types=mounted_in
    )


def ssh_keys(job: MPIJob) -> FileSet:
    """Secret ``<job>-ssh``: one key pair per job, authorised on every replica."""
    return mpi_launch.ssh_key_files(ssh_secret_name(job), job.spec.ssh_auth_mount_path)


def launcher_access(job: MPIJob) -> AccessPlan:
    """The launcher may read pods, and exec into its own workers (and itself, as a worker).

    Exec needs ``get`` and ``create`` on ``pods/exec``: a WebSocket exec (kubexec's, and
    kubectl's since 1.30) is a GET, authorized as ``get``, and since 1.35 the API server also
    checks ``create`` for it; SPDY (a POST) is ``create`` alone."""
    targets = [replica_name(job.name, h.replica_type, h.index) for h in mpi_hosts(job)]
    rules = [AccessRule(("",), ("pods",), ("get", "list", "watch"))]
    if targets:
        rules.append(
            AccessRule(("",), ("pods/exec",), ("get", "create"), resource_names=tuple(targets))
        )
    return AccessPlan(launcher_account_name(job), tuple(rules), replica_types=(LAUNCHER,))


def launcher_env(job: MPIJob, network: Network) -> list[EnvVar]:
    """Where the hostfile is and how to reach the hosts, for the job's MPI implementation."""
    files = network.files_path(config_name(job), CONFIG_MOUNT_PATH)
    hostfile_path = f"{files}/{HOSTFILE}"
    agent = f"{files}/{EXEC_AGENT}"
    exec_mode = job.remote_shell is RemoteShell.EXEC
    out = [env("K_MPI_JOB_ROLE", "launcher")]
    out += mpi_launch.launcher_env(
        job.spec.mpi_implementation.value,
        hostfile_path,
        job.spec.slots_per_worker,
        agent=agent if exec_mode else None,
    )
    if exec_mode and WORKER in job.replica_specs:
        out.append(env(EXEC_CONTAINER_VAR, main_container(job, WORKER).name))
    return out


def mpi_env(job: MPIJob, network: Network, slot: ReplicaSlot) -> list[EnvVar]:
    """The environment contract of one replica."""
    if slot.replica_type == LAUNCHER:
        return launcher_env(job, network)
    return [env("K_MPI_JOB_ROLE", "worker")]


class MPI:
    """The MPIJob framework."""

    kind = MPIJob.KIND

    def plan(self, job: Job, network: Network) -> Plan:
        """The Plan of an MPIJob: worker hosts first, then the launcher; see the module doc."""
        if not isinstance(job, MPIJob):
            raise PlanError(f"the MPI framework plans MPIJobs, not {job.KIND}")
        if LAUNCHER not in job.replica_specs:
            raise PlanError(f"MPIJob {job.name}: no Launcher; run `kubemill validate`")
        exec_mode = job.remote_shell is RemoteShell.EXEC
        replicas = build_replicas(
            job,
            network,
            env_for=lambda slot: mpi_env(job, network, slot),
            is_master=lambda slot: slot.replica_type == LAUNCHER,
            container_for=lambda replica_type: main_container(job, replica_type),
            host_for=lambda slot: network.host_name(
                slot.replica_type, slot.index, subdomain=job.name
            ),
        )
        replicas = tuple(self._staged(job, rep, exec_mode=exec_mode) for rep in replicas)
        config = config_files(job)
        config = replace(config, files=(FilePlan(HOSTFILE, hostfile(job, network)), *config.files))
        files = (config, ssh_keys(job)) if not exec_mode else (config,)
        return Plan(
            kind=job.KIND,
            name=job.name,
            namespace=job.namespace,
            replicas=replicas,
            outcome=decided_by(LAUNCHER),
            files=files,
            services=False,
            exposed=(ExposedService(job.name, replica_type="", type="Headless"),),
            subdomain=job.name,
            access=launcher_access(job) if exec_mode else None,
            start_gate="ready" if job.launcher_waits_for_workers else "running",
        )

    @staticmethod
    def _staged(job: MPIJob, rep: ReplicaPlan, *, exec_mode: bool) -> ReplicaPlan:
        if rep.replica_type == LAUNCHER:
            return replace(rep, stage=1)
        host_only = exec_mode and not main_container(job, rep.replica_type).has_command
        return replace(rep, host_only=host_only)


__all__ = [
    "CONFIG_MOUNT_PATH",
    "DISCOVER_HOSTS",
    "EXEC_AGENT",
    "EXEC_AGENT_PROGRAM",
    "EXEC_CONTAINER_VAR",
    "HOSTFILE",
    "LAUNCHER",
    "MPI",
    "WORKER",
    "config_name",
    "hostfile",
    "launcher_access",
    "launcher_account_name",
    "launcher_env",
    "ssh_secret_name",
]
