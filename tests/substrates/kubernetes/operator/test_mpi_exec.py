"""kubexec against the test API server's exec endpoint, and a real ``mpirun`` through both.

The agent (``kubemill.engines.mpi.agent``) runs as ``mpirun`` runs it, a separate program with
``KUBECONFIG`` pointing at the kmock cluster; the endpoint runs each command as a local
process in the named pod's environment (only the kubelet is emulated). The MPI run is the
seed's design end to end: ``mpirun -np 4`` over two worker pods with two slots each,
``plm_rsh_agent`` = kubexec, and an mpi4py allreduce whose ranks report which pod's
environment they ran in.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mpi_support import ALLREDUCE, role_allows

from kubemill.engines.mpi import agent as mpi_exec
from support.engines import needs_mpirun
from support.kmock_cluster import Call, write_kubeconfig
from support.operator_support import Cluster, Kubelet, free_port
from support.waiting import eventually

AGENT = [sys.executable, str(Path(mpi_exec.__file__))]
HANG_GUARD = 300.0
"""Seconds after which a run is abandoned: a guard against hangs, not a bound."""
WORKERS = ("pi-worker-0", "pi-worker-1")
TAGS = {"pi-worker-0": "alpha", "pi-worker-1": "beta"}
"""An env value only that worker pod has."""
SLOTS = 2


@dataclass
class Served:
    thread: Cluster
    namespace: str
    kubeconfig: Path


def worker_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"job": "pi"}},
        "spec": {
            "containers": [
                {
                    "name": "worker",
                    "image": "example/mpi:latest",
                    "env": [{"name": "WORKER_TAG", "value": TAGS.get(name, "none")}],
                }
            ]
        },
    }


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Cluster() as thread:
        namespace = f"m-{uuid.uuid4().hex[:8]}"
        thread.create_namespaces(namespace)
        kubelet = Kubelet(thread, namespace)
        for name in (*WORKERS, "pi-pending"):
            thread.create(f"/api/v1/namespaces/{namespace}/pods", worker_pod(name))
        for name in WORKERS:
            kubelet.set(name, "Running", container="worker")
        config = write_kubeconfig(tmp_path_factory.mktemp("kube") / "config", thread.url)
        yield Served(thread, namespace, config)


def agent_env(served: Served, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBEMILL_EXEC_")}
    env["KUBECONFIG"] = str(served.kubeconfig)
    env.update(extra)
    return env


def run_agent(served: Served, host: str, *words: str, **env: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [*AGENT, host, *words],
        env=agent_env(served, **env),
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
    )
    return done.returncode, done.stdout, done.stderr


def host(served: Served, pod: str) -> str:
    return f"{pod}.pi.{served.namespace}.svc"


# --- (a) plain commands ---------------------------------------------------------------------


def test_stdout_and_stderr_stay_apart_and_the_exit_code_is_the_commands(served: Served) -> None:
    code, out, err = run_agent(
        served, host(served, "pi-worker-0"), "echo out;", "echo $WORKER_TAG;", "echo err >&2;"
    )
    assert (code, out, err) == (0, "out\nalpha\n", "err\n")
    code, out, err = run_agent(
        served, host(served, "pi-worker-1"), "echo", "$WORKER_TAG;", "exit 5"
    )
    assert (code, out, err) == (5, "beta\n", "")


def test_a_missing_pod_and_a_pod_not_running_are_one_line_and_255(served: Served) -> None:
    code, out, err = run_agent(served, host(served, "ghost"), "true")
    assert (code, out, err) == (255, "", 'kubexec: ghost: pods "ghost" not found (HTTP 404)\n')
    code, out, err = run_agent(served, host(served, "pi-pending"), "true")
    assert (code, out) == (255, "")
    assert err.startswith("kubexec: pi-pending: ") and err.endswith("(HTTP 400)\n")
    assert "does not have a host assigned" in err


def test_the_container_comes_from_the_environment(served: Served) -> None:
    target = host(served, "pi-worker-0")
    assert run_agent(served, target, "echo", "ok", KUBEMILL_EXEC_CONTAINER="worker")[:2] == (
        0,
        "ok\n",
    )
    code, _, err = run_agent(served, target, "true", KUBEMILL_EXEC_CONTAINER="sidecar")
    assert code == 255
    assert (
        err
        == "kubexec: pi-worker-0: container sidecar is not valid for pod pi-worker-0 (HTTP 400)\n"
    )


def test_an_unqualified_host_goes_to_the_pods_own_namespace_or_default(served: Served) -> None:
    if Path(mpi_exec.NAMESPACE_FILE).exists():
        pytest.skip(f"{mpi_exec.NAMESPACE_FILE} exists here: this machine is a pod")
    before = len(served.thread.calls())
    code, _, err = run_agent(served, "pi-worker-0", "true")
    assert (code, err) == (255, 'kubexec: pi-worker-0: pods "pi-worker-0" not found (HTTP 404)\n')
    [call] = served.thread.calls()[before:]
    assert (call.namespace, call.name, call.resource) == ("default", "pi-worker-0", "pods/exec")


def test_an_unreachable_api_server_is_one_line_and_255(served: Served, tmp_path: Path) -> None:
    nowhere = write_kubeconfig(tmp_path / "config", f"http://127.0.0.1:{free_port()}")
    code, out, err = run_agent(served, host(served, "pi-worker-0"), "true", KUBECONFIG=str(nowhere))
    assert (code, out) == (255, "")
    assert err.startswith("kubexec: pi-worker-0: ") and err.count("\n") == 1
    assert "refused" in err.lower()


def test_a_terminated_agent_exits_143_and_the_remote_command_stops(served: Served) -> None:
    running = subprocess.Popen(
        [*AGENT, host(served, "pi-worker-0"), "echo $$;", "exec sleep 300"],
        env=agent_env(served),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert running.stdout is not None
    pid = int(running.stdout.readline())  # relayed as it arrives, before the command ends
    assert Path(f"/proc/{pid}").exists()
    running.send_signal(signal.SIGTERM)
    assert running.wait(timeout=HANG_GUARD) == 143
    running.communicate(timeout=HANG_GUARD)
    eventually(lambda: not Path(f"/proc/{pid}").exists(), what="the remote command to stop")


# --- (b) and (c): a real mpirun through kubexec ------------------------------------------------


@dataclass
class MpiRun:
    code: int
    stdout: str
    stderr: str
    calls: list[Call]
    """Every request the cluster received during the run."""


@pytest.fixture(scope="module")
def mpirun(served: Served, tmp_path_factory: pytest.TempPathFactory) -> MpiRun:
    launcher = shutil.which("mpirun")
    assert launcher is not None, "the tests using this fixture are gated by needs_mpirun"
    work = tmp_path_factory.mktemp("launcher")
    hostfile = work / "hostfile"
    hostfile.write_text("".join(f"{host(served, w)} slots={SLOTS}\n" for w in WORKERS))
    program = work / "allreduce.py"
    program.write_text(ALLREDUCE)
    env = agent_env(served)
    if os.geteuid() == 0:  # mpirun refuses root unless told; kubemill does this for the user
        env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
    argv = [
        launcher, "-np", str(SLOTS * len(WORKERS)), "--hostfile", str(hostfile),
        "--mca", "plm_rsh_agent", " ".join(AGENT),
        # OpenMPI hands the agent short host names (so the namespace would be lost) unless
        # told to keep them whole, as mpi-operator's launcher does
        "--mca", "orte_keep_fqdn_hostnames", "true",
        # only loopback here: pin both the MPI and the control traffic to it
        "--mca", "btl_tcp_if_include", "lo", "--mca", "oob_tcp_if_include", "lo",
        sys.executable, str(program),
    ]  # fmt: skip
    before = len(served.thread.calls())
    done = subprocess.run(
        argv, env=env, cwd=work, capture_output=True, text=True, timeout=HANG_GUARD
    )
    return MpiRun(done.returncode, done.stdout, done.stderr, served.thread.calls()[before:])


@pytest.mark.engine
@needs_mpirun
def test_mpirun_runs_ranks_in_both_worker_pods_through_the_agent(
    served: Served, mpirun: MpiRun
) -> None:
    assert mpirun.code == 0, mpirun.stderr
    ranks = [json.loads(line) for line in mpirun.stdout.splitlines() if line.startswith("{")]
    size = SLOTS * len(WORKERS)
    assert sorted(r["rank"] for r in ranks) == list(range(size))
    assert {r["size"] for r in ranks} == {size}
    assert {r["sum"] for r in ranks} == {size * (size + 1) // 2}
    # each rank ran in the environment of the pod its orted was exec'd into
    assert Counter((r["pod"], r["tag"]) for r in ranks) == {(w, TAGS[w]): SLOTS for w in WORKERS}
    tmpdirs = {r["pod"]: r["tmpdir"] for r in ranks}
    assert len(set(tmpdirs.values())) == len(WORKERS)
    # one exec per worker, and what it started is orted
    execs = [c for c in mpirun.calls if c.subresource == "exec"]
    assert sorted(c.name or "" for c in execs) == list(WORKERS)
    for call in execs:
        assert call.namespace == served.namespace and call.status == 101, call
        assert call.body[:2] == ["/bin/sh", "-c"]
        assert "orted" in {Path(word).name for word in shlex.split(call.body[2])}, call.body


@pytest.mark.engine
@needs_mpirun
def test_the_agent_only_execs_into_the_named_workers(mpirun: MpiRun) -> None:
    assert mpirun.code == 0, mpirun.stderr
    agent_calls = [c for c in mpirun.calls if not c.from_tests]
    assert sorted((c.verb, c.resource, c.name or "") for c in agent_calls) == [
        ("get", "pods/exec", w) for w in WORKERS
    ]
    # so a Role that names the workers allows them, and one naming other pods does not
    role = [
        {
            "apiGroups": [""],
            "resources": ["pods/exec"],
            "verbs": ["get", "create"],
            "resourceNames": list(WORKERS),
        }
    ]
    assert all(role_allows(role, c) for c in agent_calls)
    # A WebSocket exec is a GET that is checked for create too: either verb alone is refused.
    for verb in ("get", "create"):
        assert not any(role_allows([{**role[0], "verbs": [verb]}], c) for c in agent_calls)
    others = [{**role[0], "resourceNames": ["pi-launcher"]}]
    assert not any(role_allows(others, c) for c in agent_calls)
