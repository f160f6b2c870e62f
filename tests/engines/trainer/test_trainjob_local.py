"""TrainJobs run for real on the local substrate: ``kubemill run`` of the examples. A 2-node
torch TrainJob through upstream's ``torch-distributed`` runtime is two real torchrun
processes (one per node, one worker each) whose gloo all-reduce sums across both; a 2-node
TrainJob through ``xgboost-distributed`` trains one XGBoost model over its collective; a
2-node TrainJob through ``jax-distributed`` is two JAX processes whose psum sums across both."""

from __future__ import annotations

import json
import re

import pytest

from support.e2e_support import EXAMPLES, Cli, processes_with_token
from support.engines import skip_without

pytestmark = pytest.mark.engine

RESULT = re.compile(
    r"^(?P<replica>node-\d) \| \[rank (?P<rank>\d)/(?P<world>\d)\] node=(?P<node>\d) "
    r"allreduce=(?P<sum>\d+) expected=(?P<expected>\d+) ok=(?P<ok>\w+)$"
)


def test_a_two_node_torch_trainjob_all_reduces_over_gloo(cli: Cli) -> None:
    skip_without("torch", "torch")
    done = cli.run(EXAMPLES / "trainjob" / "trainjob.yaml")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "TrainJob torch-allreduce Succeeded" in done.stdout, done.stdout

    results = [m for line in done.stdout.splitlines() if (m := RESULT.match(line.strip()))]
    # One process per node (numProcPerNode 1), node i holding global rank i, world size 2,
    # and 1 + 2 = 3 in both after the all-reduce.
    assert sorted((m["replica"], m["rank"], m["node"], m["world"]) for m in results) == [
        ("node-0", "0", "0", "2"),
        ("node-1", "1", "1", "2"),
    ], done.stdout
    assert {(m["sum"], m["expected"], m["ok"]) for m in results} == {("3", "3", "True")}

    shown = cli("get", "torch-allreduce", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)["status"]
    assert status["replicaStatuses"]["node"]["succeeded"] == 2
    assert status["jobsStatus"] == [
        {"name": "node", "ready": 1, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]
    # Upstream's conditions: Complete with the reason upstream carries over from its JobSet,
    # and none of the Created/Running that upstream's TrainJob does not have.
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Complete", "True", "AllJobsCompleted")
    ]
    # The listing (which reads the stored status without the models) shows it finished.
    listed = cli("get")
    assert listed.returncode == 0, listed.stderr
    (row,) = [line.split() for line in listed.stdout.splitlines() if "torch-allreduce" in line]
    assert "Succeeded" in row, listed.stdout
    assert not processes_with_token(cli.token), "a process outlived its job"


XGBOOST = re.compile(
    r"^(?P<replica>node-\d) \| \[worker (?P<rank>\d)/(?P<world>\d)\] rounds=\d+ "
    r"test_accuracy=(?P<accuracy>[0-9.]+) model=(?P<digest>[0-9a-f]+)$"
)


def test_a_two_node_xgboost_trainjob_trains_one_model(cli: Cli) -> None:
    skip_without("xgboost", "xgboost")
    skip_without("sklearn", "torch")
    done = cli.run(EXAMPLES / "trainjob" / "xgboost.yaml")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "TrainJob xgboost-digits Succeeded" in done.stdout, done.stdout
    results = [m for line in done.stdout.splitlines() if (m := XGBOOST.match(line.strip()))]
    # Node i is worker i of 2 (DMLC_TASK_ID); the collective made both grow the same trees.
    assert sorted((m["replica"], m["rank"], m["world"]) for m in results) == [
        ("node-0", "0", "2"),
        ("node-1", "1", "2"),
    ], done.stdout
    assert len({m["digest"] for m in results}) == 1, done.stdout
    assert all(float(m["accuracy"]) >= 0.8 for m in results), done.stdout
    assert not processes_with_token(cli.token), "a process outlived its job"


JAX = re.compile(
    r"^(?P<replica>node-\d) \| \[process (?P<id>\d)/(?P<count>\d)\] "
    r"psum=(?P<sum>[0-9.]+) expected=(?P<expected>[0-9.]+) ok=(?P<ok>\w+)$"
)


def test_a_two_node_jax_trainjob_psums_over_cpu_collectives(cli: Cli) -> None:
    skip_without("jax", "jax")
    done = cli.run(EXAMPLES / "trainjob" / "jax.yaml")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "TrainJob jax-psum Succeeded" in done.stdout, done.stdout
    results = [m for line in done.stdout.splitlines() if (m := JAX.match(line.strip()))]
    # Node i is JAX process i of 2 (JAX_PROCESS_ID), and both see 1 + 2 = 3.
    assert sorted((m["replica"], m["id"], m["count"]) for m in results) == [
        ("node-0", "0", "2"),
        ("node-1", "1", "2"),
    ], done.stdout
    assert {(m["sum"], m["expected"], m["ok"]) for m in results} == {("3.0", "3.0", "True")}
    assert not processes_with_token(cli.token), "a process outlived its job"


MPI = re.compile(
    r"^launcher-0\s+\| \[rank (?P<rank>\d)/(?P<size>\d)\] host=(?P<host>\S+) "
    r"allreduce=(?P<sum>\d+) expected=(?P<expected>\d+) ok=(?P<ok>\w+)$"
)


def test_a_two_node_mpi_trainjob_allreduces_through_real_mpirun(cli: Cli) -> None:
    skip_without("mpi4py", "mpi")
    done = cli.run(EXAMPLES / "trainjob" / "mpi.yaml")
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    assert "TrainJob mpi-allreduce Succeeded" in done.stdout, done.stdout
    results = [m for line in done.stdout.splitlines() if (m := MPI.match(line.strip()))]
    # mpirun placed one rank on each node of the hostfile (one slot each), through the exec
    # agent: rank i runs on node i, and both see 1 + 2 = 3.
    assert sorted((m["rank"], m["size"], m["host"]) for m in results) == [
        ("0", "2", "mpi-allreduce-trainer-node-0"),
        ("1", "2", "mpi-allreduce-trainer-node-1"),
    ], done.stdout
    assert {(m["sum"], m["expected"], m["ok"]) for m in results} == {("3", "3", "True")}
    shown = cli("get", "mpi-allreduce", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)["status"]
    assert status["replicaStatuses"]["launcher"]["succeeded"] == 1
    assert not processes_with_token(cli.token), "a process outlived its job"
