"""MPIJobs on the local substrate through the real CLI, with the real OpenMPI.

``examples/mpi-allreduce.yaml``: the launcher's ``mpirun -np 4`` reads kubemill's hostfile
of two workers, and its remote shell (kubexec, from the job's file set) asks the
supervisor to exec ``orted`` into each worker; the ranks run in the workers' environments.
A worker killed mid-run fails the job naming it, and nothing is left running. The seed's
v1alpha2 manifest says why it cannot run here.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from kubemill.substrates.local.launch import host_argv
from support.e2e_support import EXAMPLES, KUBEMILL, RUN_TIMEOUT, Cli, processes_with_token
from support.engines import needs_mpirun, skip_without

pytestmark = [pytest.mark.e2e, pytest.mark.engine, needs_mpirun]

RANK = re.compile(
    r"rank (\d)/4 on (mpi-allreduce-worker-\d): sum (\d+); started by (\S+) \(pid (\d+)\), "
    r"which (\S+) \(pid (\d+)\) started"
)


def explain(done: object) -> str:
    return f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"  # type: ignore[attr-defined]


def test_the_allreduce_example_runs_ranks_in_both_workers_through_the_agent(cli: Cli) -> None:
    skip_without("mpi4py", "mpi")
    done = cli.run(EXAMPLES / "mpi-allreduce.yaml")
    assert done.returncode == 0, explain(done)
    ranks = [m.groups() for m in RANK.finditer(done.stdout)]
    assert sorted(int(r[0]) for r in ranks) == [0, 1, 2, 3], done.stdout
    assert {int(r[2]) for r in ranks} == {10}
    # Two ranks in each worker's own environment (POD_NAME is the worker's own name)...
    assert Counter(r[1] for r in ranks) == {
        "mpi-allreduce-worker-0": 2,
        "mpi-allreduce-worker-1": 2,
    }
    # ...each under an orted, one per worker, which the supervisor started (the exec
    # service), not mpirun: mpirun is the launcher's own process.
    assert {r[3] for r in ranks} == {"orted"}
    assert len({r[4] for r in ranks}) == 2
    assert {r[5] for r in ranks} != {"mpirun"} and "mpirun" not in {r[5] for r in ranks}
    described = cli("get", "mpi-allreduce", "-o", "json")
    assert described.returncode == 0, explain(described)
    events = cli("describe", "mpi-allreduce")
    assert events.stdout.count("Exec") >= 2, events.stdout
    assert not processes_with_token(cli.token)


SLOW_RANKS = """\
import time
from mpi4py import MPI
world = MPI.COMM_WORLD
print(f"rank {world.rank} up", flush=True)
time.sleep(120)
world.Barrier()
"""


IP_ADDRESS = re.compile(r'inet_addr\("([^"]+)"\)|inet_pton\(AF_INET6, "([^"]+)"')


def _off_loopback(strace_output: str) -> tuple[int, set[str]]:
    """How many connect() calls of an IP socket the trace holds, and their addresses that
    are not loopback (an IPv4-mapped IPv6 address counts as its IPv4 address)."""
    seen, away = 0, set[str]()
    for line in strace_output.splitlines():
        if "connect(" not in line:
            continue
        for v4, v6 in IP_ADDRESS.findall(line):
            seen += 1
            address = ipaddress.ip_address(v4 or v6)
            mapped = getattr(address, "ipv4_mapped", None)
            if not (mapped or address).is_loopback:
                away.add(str(address))
    return seen, away


def test_the_job_talks_over_loopback_only(cli: Cli, tmp_path: Path) -> None:
    """Every socket the job's processes connect (the CLI, the supervisor, mpirun, kubexec,
    orted, the ranks) goes to loopback: no DNS question about the workers' host names, which
    mpirun asked by default to tell whether a host is this machine."""
    skip_without("mpi4py", "mpi")
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace is missing: scripts/setup.sh installs it with the dev extra")
    trace = tmp_path / "connects.txt"
    argv = [strace, "-f", "-qq", "-e", "trace=connect", "-o", str(trace), str(KUBEMILL)]
    done = subprocess.run(
        [*argv, "run", str(EXAMPLES / "mpi-allreduce.yaml")],
        env=cli.env,
        cwd=cli.cwd,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
    )
    assert done.returncode == 0, explain(done)
    seen, away = _off_loopback(trace.read_text())
    assert seen, "strace saw no connect() of an IP socket: the trace is not of the job"
    assert not away, f"connections off loopback: {sorted(away)}"


def test_killing_a_worker_mid_run_fails_the_job_naming_it(cli: Cli, tmp_path: Path) -> None:
    skip_without("mpi4py", "mpi")
    program = cli.cwd / "slow_ranks.py"
    program.write_text(SLOW_RANKS)
    manifest = cli.cwd / "slow.yaml"
    manifest.write_text(
        json.dumps(
            {
                "apiVersion": "kubemill.dev/v1",
                "kind": "MPIJob",
                "metadata": {"name": "slow"},
                "spec": {
                    "slotsPerWorker": 1,
                    "runPolicy": {"backoffLimit": 0},
                    "mpiReplicaSpecs": {
                        "Launcher": {
                            "replicas": 1,
                            "template": {
                                "spec": {
                                    "containers": [
                                        {
                                            "name": "launcher",
                                            "image": "local",
                                            "command": [
                                                "mpirun",
                                                "-np",
                                                "2",
                                                "python",
                                                program.name,
                                            ],
                                        }
                                    ]
                                }
                            },
                        },
                        "Worker": {
                            "replicas": 2,
                            "template": {"spec": {"containers": [{"name": "w", "image": "local"}]}},
                        },
                    },
                },
            }
        )
    )
    submitted = cli("run", "--detach", str(manifest))
    assert submitted.returncode == 0, explain(submitted)

    def ranks_up() -> bool:
        logs = cli("logs", "slow", "--replica", "launcher-0")
        return logs.stdout.count(" up") == 2

    deadline = time.monotonic() + 120
    while not ranks_up():
        assert time.monotonic() < deadline, cli("logs", "slow").stdout
        time.sleep(0.2)
    # The worker's own process: the idle host (what host_argv runs) with the replica's mark.
    mark = "/slow-worker-1"
    idle = "\0".join(host_argv()) + "\0"
    hosts = [
        pid
        for pid in processes_with_token(cli.token)
        if mark in Path(f"/proc/{pid}/environ").read_bytes().decode(errors="replace")
        and Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace") == idle
    ]
    (host,) = hosts
    os.kill(host, signal.SIGKILL)

    def failed_condition() -> dict[str, str] | None:
        shown = cli("get", "slow", "-o", "json")
        conditions = json.loads(shown.stdout)["status"].get("conditions", [])
        return next((c for c in conditions if c["type"] == "Failed"), None)

    deadline = time.monotonic() + 120
    while (failed := failed_condition()) is None:
        assert time.monotonic() < deadline, cli("describe", "slow").stdout
        time.sleep(0.2)
    assert failed["status"] == "True"
    assert "worker-1" in failed["message"], failed

    deadline = time.monotonic() + 30
    while processes_with_token(cli.token):
        assert time.monotonic() < deadline, processes_with_token(cli.token)
        time.sleep(0.2)


def test_the_seed_manifest_says_why_it_cannot_run_here(cli: Cli) -> None:
    done = cli.run(EXAMPLES / "seed" / "mpijob-v1alpha2.yaml")
    assert done.returncode == 1, explain(done)
    message = done.stdout + done.stderr
    assert "Traceback" not in message
    # At the path the user wrote (v1alpha2), before anything started.
    assert "spec.mpiReplicaSpecs.Launcher.template.spec.containers[0].args[18]" in message
    assert "/examples/tensorflow_mnist.py does not exist on this machine" in message
    assert "Horovod does not build against the torch this project pins" in message
    assert cli.job_names() == []
    assert not processes_with_token(cli.token)
