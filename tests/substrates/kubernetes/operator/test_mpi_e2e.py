"""An MPIJob end to end on the Kubernetes substrate: the real operator, a real ``mpirun``.

The operator creates the job's objects in the strict test API server; this test is the
kubelet. It reports the worker pods Running (the server's exec endpoint then runs what is
exec'd into them as local processes in their environment), and it runs the launcher pod as
a kubelet would: the ConfigMap's files written out where the pod mounts them (a local
directory stands in for the mount: env values under the mount path point there), the
container's env and command, and ``KUBECONFIG`` standing in for the in-cluster config. The
launcher's ``mpirun`` reads the operator's hostfile and runs the operator's ``kubexec`` as
its remote shell, which execs ``orted`` into each worker through the exec API, allowed by the
launcher's Role. Only the kubelet and the pod network (loopback here) are emulated.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mpi_support import ALLREDUCE, role_allows

from kubemill.engines.mpi.local import LOCAL_ENV
from support.engines import needs_mpi4py, needs_mpirun
from support.kmock_cluster import write_kubeconfig
from support.operator_jobs import mpijob
from support.operator_support import (
    Cluster,
    Kubelet,
    is_true,
    job_path,
    running_cluster,
    running_operator,
)
from support.waiting import eventually

HANG_GUARD = 300.0
"""Seconds after which the launcher is abandoned: a guard against hangs, not a bound."""


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with running_cluster() as served:
        yield served


def mount_volumes(
    cluster: Cluster, namespace: str, pod: dict[str, Any], root: Path
) -> dict[str, Path]:
    """Each ConfigMap volume's items written under ``root``; mountPath -> local directory."""
    spec = pod["spec"]
    local: dict[str, Path] = {}
    for volume in spec.get("volumes", []):
        source = volume.get("configMap")
        if source is None:
            continue
        data = cluster.get(f"/api/v1/namespaces/{namespace}/configmaps/{source['name']}")["data"]
        directory = root / volume["name"]
        directory.mkdir(parents=True)
        for item in source["items"]:
            path = directory / item["path"]
            path.write_text(data[item["key"]])
            path.chmod(item["mode"])
        local[volume["name"]] = directory
    container = spec["containers"][0]
    return {m["mountPath"]: local[m["name"]] for m in container.get("volumeMounts", [])}


def launcher_env(
    container: dict[str, Any], mounts: dict[str, Path], kubeconfig: Path
) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = (
        f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # the image's python3
    )
    env["KUBECONFIG"] = str(kubeconfig)  # stands in for the in-cluster service account
    env.pop("KUBERNETES_SERVICE_HOST", None)
    for entry in container.get("env", []):
        value = str(entry.get("value", ""))
        for mount_path, directory in mounts.items():
            if value == mount_path or value.startswith(mount_path + "/"):
                value = str(directory) + value[len(mount_path) :]
        env[entry["name"]] = value
    # This machine has no pod network and runs as root: what the local substrate gives
    # MPI replicas (loopback only, mpirun allowed as root) stands in for the pod's.
    env |= LOCAL_ENV
    return env


@pytest.mark.engine
@needs_mpirun
@needs_mpi4py
def test_mpirun_through_the_operators_hostfile_agent_and_role(
    cluster: Cluster, tmp_path: Path
) -> None:
    program = tmp_path / "allreduce.py"
    program.write_text(ALLREDUCE)
    namespace = cluster.namespace()
    kubeconfig = write_kubeconfig(tmp_path / "launcher.kubeconfig", cluster.url)
    pods = f"/api/v1/namespaces/{namespace}/pods"
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("MPIJob", namespace, "m")
        cluster.create(
            job_path("MPIJob", namespace),
            mpijob(launcher=["mpirun", "-np", "4", sys.executable, str(program)]),
        )
        kubelet = Kubelet(cluster, namespace)
        for worker in ("m-worker-0", "m-worker-1"):
            eventually(lambda w=worker: cluster.get_or_none(f"{pods}/{w}"), what=worker)  # type: ignore[misc]
            kubelet.set(worker, "Running", container="worker")
        launcher = eventually(lambda: cluster.get_or_none(f"{pods}/m-launcher-0"), what="launcher")

        container = launcher["spec"]["containers"][0]
        mounts = mount_volumes(cluster, namespace, launcher, tmp_path / "volumes")
        env = launcher_env(container, mounts, kubeconfig)
        workdir = tmp_path / "launcher"
        workdir.mkdir()
        kubelet.set("m-launcher-0", "Running", container="launcher")
        done = subprocess.run(
            [*container["command"], *container.get("args", [])],
            env=env,
            cwd=workdir,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
        )
        phase = "Succeeded" if done.returncode == 0 else "Failed"
        kubelet.set("m-launcher-0", phase, container="launcher", exit_code=done.returncode)
        assert done.returncode == 0, done.stderr
        job = eventually(
            lambda: (j := cluster.get(path)) and is_true(j, "Succeeded") and j, what="Succeeded"
        )
        assert not is_true(job, "Failed")

    ranks = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert sorted(r["rank"] for r in ranks) == [0, 1, 2, 3]
    assert {r["sum"] for r in ranks} == {10}
    # Two ranks in each worker pod's environment (its hostname, its own TMPDIR).
    assert Counter(r["pod"] for r in ranks) == {"m-worker-0": 2, "m-worker-1": 2}
    assert len({r["tmpdir"] for r in ranks}) == 2

    # orted was exec'd by the agent into each worker, as the launcher's Role allows.
    execs = [c for c in cluster.calls() if c.subresource == "exec"]
    assert sorted(c.name or "" for c in execs) == ["m-worker-0", "m-worker-1"]
    assert all("orted" in " ".join(c.body) for c in execs)
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    rules = cluster.get(f"{rbac}/roles/m-launcher")["rules"]
    assert all(role_allows(rules, c) for c in execs)
    # ...and no further: the same exec into the launcher itself would be refused.
    assert not role_allows(rules, dataclasses.replace(execs[0], name="m-launcher-0"))
