"""How an ``mpirun`` launcher reaches its hosts, for every kind that runs one: the hostfile's
lines, the launcher's environment per MPI implementation, kubemill's exec agent (the remote
shell when the hosts are reached through the exec API, as on the local substrate), the
per-job SSH key pair (when they run sshd) and OpenMPI's settings on one machine.

Each kind decides which replicas are the hosts, their names, where the files are mounted
and which remote shell it uses; this module only builds what those choices give.
"""

from __future__ import annotations

from kubemill.api import EnvVar
from kubemill.frameworks._common import env
from kubemill.frameworks.plan import FilePlan, FileSet, PackagedProgram, SshKeyPart

OPENMPI = "OpenMPI"
INTEL = "Intel"
MPICH = "MPICH"
IMPLEMENTATIONS = (OPENMPI, INTEL, MPICH)
HOSTFILE = "hostfile"
EXEC_AGENT = "kubexec"
EXEC_AGENT_PROGRAM = "kubemill.engines.mpi.agent"
"""kubemill's exec agent, a standalone program delivered as a file (never imported)."""
SSH_SECRET_TYPE = "kubernetes.io/ssh-auth"  # noqa: S105 - a Secret type, not a password
SSH_RETRIES = "-o ConnectionAttempts=10"
"""Hosts' sshd may start after the launcher's first attempt (upstream's retry)."""
EXEC_CONTAINER_VAR = "KUBEMILL_EXEC_CONTAINER"
"""Tells the exec agent which container of a host's pod to exec into."""

LOCAL_ENV = {
    # kubemill runs the job as whoever runs kubemill, root included; mpirun refuses root
    # unless told twice.
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    # Every "host" is this machine: MPI traffic and OpenMPI's own control traffic go over
    # loopback, never out of a real interface.
    "OMPI_MCA_btl_tcp_if_include": "lo",
    "OMPI_MCA_oob_tcp_if_include": "lo",
    # Nor does mpirun ask DNS about the workers' host names: it resolves each host of the
    # hostfile to tell whether it is this machine (none is to it: each is reached through
    # kubexec), and the resolver of a machine without those names is off loopback.
    "OMPI_MCA_if_base_do_not_resolve": "1",
    # OpenMPI judges oversubscription host by host, and each host's slots fit its share:
    # but every host is this machine, and all their ranks share its cores. Ranks that spin
    # while they wait for a message then take the cores from the ranks that would send it
    # (4 ranks over 2 workers on 2 cores: the allreduce example's MPI start and collective
    # took 0.60 s spinning, 0.43 s yielding, as mpirun's own oversubscribed default does;
    # bench/mpi_profile.py).
    "OMPI_MCA_mpi_yield_when_idle": "1",
}
"""What OpenMPI needs on the local substrate, on every replica of a kind that runs it."""


def hostfile_line(implementation: str, host: str, slots: int) -> str:
    """One host with its slots, as ``implementation`` reads a hostfile."""
    return f"{host} slots={slots}" if implementation == OPENMPI else f"{host}:{slots}"


def hostfile(implementation: str, hosts: list[str], slots: int) -> str:
    """Every host mpirun may use, one line each."""
    return "".join(f"{hostfile_line(implementation, host, slots)}\n" for host in hosts)


def exec_agent_file() -> FilePlan:
    """The exec agent, an executable file mpirun runs as its remote shell."""
    return FilePlan(EXEC_AGENT, mode=0o755, source=PackagedProgram(EXEC_AGENT_PROGRAM))


def ssh_key_files(name: str, mount_path: str) -> FileSet:
    """Secret ``name``: one key pair per job, authorised on every replica it is mounted in."""
    return FileSet(
        name,
        (
            FilePlan("ssh-privatekey", mode=0o600, source=SshKeyPart("private"), paths=("id_rsa",)),
            FilePlan(
                "ssh-publickey",
                mode=0o644,
                source=SshKeyPart("public"),
                paths=("id_rsa.pub", "authorized_keys"),
            ),
        ),
        mount_path=mount_path,
        secret=True,
        secret_type=SSH_SECRET_TYPE,
    )


def launcher_env(
    implementation: str, hostfile_path: str, slots: int, *, agent: str | None
) -> list[EnvVar]:
    """Where the hostfile is and how to reach the hosts: through the exec agent at
    ``agent``, or (None) over ssh with retries."""
    if implementation == OPENMPI:
        out = [
            env("OMPI_MCA_orte_default_hostfile", hostfile_path),
            env("OMPI_MCA_orte_keep_fqdn_hostnames", "true"),
            env("OMPI_MCA_orte_set_default_slots", str(slots)),
        ]
        if agent is not None:
            # No tree spawn: an orted would run the agent itself, from a host, whose pod
            # has neither the agent nor the right to exec.
            return [
                *out,
                env("OMPI_MCA_plm_rsh_agent", agent),
                env("OMPI_MCA_plm_rsh_no_tree_spawn", "true"),
            ]
        return [*out, env("OMPI_MCA_plm_rsh_args", SSH_RETRIES)]
    if implementation == INTEL:
        out = [env("I_MPI_HYDRA_HOST_FILE", hostfile_path)]
        if agent is not None:
            return [
                *out,
                env("I_MPI_HYDRA_BOOTSTRAP", "rsh"),
                env("I_MPI_HYDRA_BOOTSTRAP_EXEC", agent),
            ]
        return [*out, env("I_MPI_HYDRA_BOOTSTRAP_EXEC_EXTRA_ARGS", SSH_RETRIES)]
    out = [env("HYDRA_HOST_FILE", hostfile_path)]
    if agent is not None:
        return [*out, env("HYDRA_LAUNCHER", "rsh"), env("HYDRA_LAUNCHER_EXEC", agent)]
    return [*out, env("HYDRA_LAUNCH_EXTRA_ARGS", SSH_RETRIES)]


__all__ = [
    "EXEC_AGENT",
    "EXEC_AGENT_PROGRAM",
    "EXEC_CONTAINER_VAR",
    "HOSTFILE",
    "IMPLEMENTATIONS",
    "INTEL",
    "LOCAL_ENV",
    "MPICH",
    "OPENMPI",
    "SSH_RETRIES",
    "SSH_SECRET_TYPE",
    "exec_agent_file",
    "hostfile",
    "hostfile_line",
    "launcher_env",
    "ssh_key_files",
]
