"""The examples train for real when run through the real CLI on the local substrate.

Each test runs ``kubemill run examples/<name>.yaml`` in a subprocess, exactly as the README
tells a user to, and then reads what the replicas printed: from the streamed output of
``run`` and from ``kubemill logs`` afterwards (the persisted per-replica logs). They check
the training happened (ranks, losses, accuracies), that every replica got the environment
contract (TF_CONFIG in the upstream shape, the seed-style flags), and that no replica
process outlives its job.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest

from support.e2e_support import EXAMPLES, Cli, processes_with_token
from support.engines import skip_without

pytestmark = pytest.mark.e2e

PREFIXED = re.compile(r"^(?P<replica>[a-z0-9][a-z0-9-]*)\s*\| ?(?P<text>.*)$")
ADDRESS = re.compile(r"^127\.0\.0\.1:(\d+)$")


def by_replica(output: str) -> dict[str, list[str]]:
    """Lines of ``run``/``logs`` output grouped by their ``replica |`` prefix."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for line in output.splitlines():
        match = PREFIXED.match(line.rstrip())
        if match:
            grouped[match["replica"]].append(match["text"])
    return dict(grouped)


def replica_log(cli: Cli, job: str, replica: str) -> list[str]:
    """What one replica printed, as ``kubemill logs JOB --replica REPLICA`` shows it.

    With one replica asked for, the lines come as the replica printed them, unprefixed.
    """
    done = cli("logs", job, "--replica", replica)
    assert done.returncode == 0, explain(done)
    lines = done.stdout.splitlines()
    assert lines, f"no output from {replica}:\n{explain(done)}"
    return lines


def explain(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"


def outcome(done: subprocess.CompletedProcess[str]) -> str:
    """The line of ``run``'s output that names how the job ended."""
    endings = [
        line for line in done.stdout.splitlines() if re.search(r"\b(Succeeded|Failed)\b", line)
    ]
    assert endings, explain(done)
    return endings[-1]


def assert_nothing_left_running(cli: Cli) -> None:
    left = processes_with_token(cli.token)
    assert not left, f"processes still alive after the job ended: {left}"


# --- PyTorch ----------------------------------------------------------------------------------

EPOCH = re.compile(r"^\[rank (\d)/2\] epoch (\d+)/(\d+) loss=([0-9.]+) test_accuracy=([0-9.]+)$")
ALLREDUCE = re.compile(
    r"^\[rank (\d)/2\] allreduce check: world_size=2 params_identical_across_ranks=True"
)


@pytest.mark.engine
def test_pytorch_ddp_trains_on_both_ranks(cli: Cli) -> None:
    skip_without("torch", "torch")
    done = cli.run(EXAMPLES / "pytorch-ddp.yaml")

    assert done.returncode == 0, explain(done)
    assert "pytorch-ddp Succeeded" in outcome(done)
    streamed = by_replica(done.stdout)
    for replica, rank in (("master-0", "0"), ("worker-0", "1")):
        epochs = [m for line in streamed.get(replica, []) if (m := EPOCH.match(line))]
        assert [int(m[2]) for m in epochs] == list(range(1, int(epochs[0][3]) + 1)), replica
        assert {m[1] for m in epochs} == {rank}, f"{replica} must be rank {rank}"
        accuracies = [float(m[5]) for m in epochs]
        losses = [float(m[4]) for m in epochs]
        assert accuracies[-1] > accuracies[0], f"{replica}: accuracy did not rise: {accuracies}"
        assert accuracies[-1] >= 0.8, f"{replica}: accuracy too low: {accuracies}"
        assert losses[-1] < losses[0], f"{replica}: loss did not fall: {losses}"
        assert any(ALLREDUCE.match(line) for line in streamed[replica]), streamed[replica]

    # The persisted log of one replica says the same after the run.
    assert any(EPOCH.match(line) for line in replica_log(cli, "pytorch-ddp", "worker-0"))

    # Rank 0 reported each epoch: the status holds its last loss and accuracy, and get
    # shows the job done.
    shown = cli("get", "pytorch-ddp", "-o", "json")
    assert shown.returncode == 0, explain(shown)
    trainer = json.loads(shown.stdout)["status"]["trainerStatus"]
    last = [m for line in streamed["master-0"] if (m := EPOCH.match(line))][-1]
    assert (trainer["step"], trainer["total"]) == (int(last[2]), int(last[3]))
    assert trainer["progressPercentage"] == 100
    metrics = {m["name"]: float(m["value"]) for m in trainer["metrics"]}
    assert metrics["loss"] == pytest.approx(float(last[4]), abs=1e-4)
    assert metrics["accuracy"] == pytest.approx(float(last[5]), abs=1e-4)
    table = cli("get").stdout.splitlines()
    assert table[0].split()[-2:] == ["PROGRESS", "ETA"], table
    assert next(r for r in table if r.startswith("pytorch-ddp")).split()[-2:] == ["100%", "-"]
    assert_nothing_left_running(cli)


# --- TensorFlow ParameterServerStrategy --------------------------------------------------------

CHIEF_EPOCH = re.compile(r"^\[chief-0\] epoch (\d+)/(\d+) loss=([0-9.]+) test_accuracy=([0-9.]+)")
PS_REPLICAS = {
    "chief-0": ("chief", 0),
    "ps-0": ("ps", 0),
    "worker-0": ("worker", 0),
    "worker-1": ("worker", 1),
}


def tf_config_of(lines: list[str]) -> dict[str, object]:
    found = [
        line.removeprefix("TF_CONFIG_JSON=") for line in lines if line.startswith("TF_CONFIG_JSON=")
    ]
    assert len(found) == 1, lines
    config = json.loads(found[0])
    assert isinstance(config, dict)
    return config


@pytest.mark.engine
def test_tf_parameter_server_trains_and_every_replica_gets_upstream_tf_config(cli: Cli) -> None:
    skip_without("tensorflow", "tensorflow")
    done = cli.run(EXAMPLES / "tf-parameter-server.yaml")

    assert done.returncode == 0, explain(done)
    assert "tf-parameter-server Succeeded" in outcome(done)
    configs = {r: tf_config_of(replica_log(cli, "tf-parameter-server", r)) for r in PS_REPLICAS}

    cluster = configs["chief-0"]["cluster"]
    assert isinstance(cluster, dict)
    assert sorted(cluster) == ["chief", "ps", "worker"]
    assert [len(cluster[t]) for t in ("chief", "ps", "worker")] == [1, 1, 2]
    addresses = [a for t in ("chief", "ps", "worker") for a in cluster[t]]
    assert all(ADDRESS.match(a) for a in addresses), addresses
    assert len(set(addresses)) == len(addresses), "every replica needs its own port"
    for replica, (task_type, index) in PS_REPLICAS.items():
        # The upstream shape, key for key: cluster, task {type, index}, environment "cloud".
        assert configs[replica] == {
            "cluster": cluster,
            "task": {"type": task_type, "index": index},
            "environment": "cloud",
        }, replica

    chief = replica_log(cli, "tf-parameter-server", "chief-0")
    epochs = [m for line in chief if (m := CHIEF_EPOCH.match(line))]
    assert len(epochs) == int(epochs[0][2]) >= 2, chief
    losses = [float(m[3]) for m in epochs]
    assert losses[-1] < losses[0], f"loss did not fall: {losses}"
    assert any("variables placed on: /job:ps/" in line for line in chief), chief
    # Steps ran on the workers: they print from inside the step function.
    worker_steps = [
        line
        for w in ("worker-0", "worker-1")
        for line in replica_log(cli, "tf-parameter-server", w)
        if "applied step" in line
    ]
    assert worker_steps, "no training step was reported by a worker"
    assert_nothing_left_running(cli)


# --- TensorFlow, the seed's trainer flags ------------------------------------------------------

SEED_HOSTS = re.compile(r"^\[(ps|worker)-(\d)\] ps_hosts=(\[.*\]) worker_hosts=(\[.*\])$")
SEED_DONE = re.compile(r"^\[worker-0\] done: global_step=(\d+) .* test_accuracy=([0-9.]+)$")


@pytest.mark.engine
def test_tf_seed_style_flags_come_from_the_tf_variables(cli: Cli) -> None:
    skip_without("tensorflow", "tensorflow")
    done = cli.run(EXAMPLES / "tf-seed-style.yaml")

    assert done.returncode == 0, explain(done)
    assert "tf-seed-style Succeeded" in outcome(done)
    seen_hosts = {}
    for replica in ("ps-0", "worker-0", "worker-1"):
        lines = replica_log(cli, "tf-seed-style", replica)
        assert not any("$(" in line for line in lines), "a $(VAR) reached the trainer unexpanded"
        hosts = [m for line in lines if (m := SEED_HOSTS.match(line))]
        assert len(hosts) == 1, lines
        job_name, index, ps_hosts, worker_hosts = hosts[0].groups()
        assert f"{job_name}-{index}" == replica, "--job_name/--task_index disagree with the replica"
        seen_hosts[replica] = (ps_hosts, worker_hosts)
    assert len(set(seen_hosts.values())) == 1, f"replicas disagree on the cluster: {seen_hosts}"
    ps_hosts, worker_hosts = (parse_printed_list(v) for v in next(iter(seen_hosts.values())))
    assert len(ps_hosts) == 1 and len(worker_hosts) == 2
    assert all(ADDRESS.match(a) for a in ps_hosts + worker_hosts)

    worker0 = replica_log(cli, "tf-seed-style", "worker-0")
    finished = [m for line in worker0 if (m := SEED_DONE.match(line))]
    assert finished, worker0
    assert int(finished[0][1]) >= 200 and float(finished[0][2]) >= 0.8, finished[0][0]
    # Both workers trained the one shared model: worker 1 found it initialised by worker 0,
    # and both started training once both had joined.
    worker1 = replica_log(cli, "tf-seed-style", "worker-1")
    assert "[worker-1] shared variables are ready" in worker1, worker1
    for replica, lines in (("worker-0", worker0), ("worker-1", worker1)):
        assert f"[{replica}] all 2 workers joined; training" in lines, lines
    assert_nothing_left_running(cli)


def parse_printed_list(text: str) -> list[str]:
    """A printed Python list of strings (``['a', 'b']``) back as a list."""
    loaded = json.loads(text.replace("'", '"'))
    assert isinstance(loaded, list)
    return [str(item) for item in loaded]


# --- Manifests ---------------------------------------------------------------------------------


def test_every_example_validates(cli: Cli) -> None:
    done = cli("validate", str(EXAMPLES))

    assert done.returncode == 0, explain(done)
    manifests = sorted(p.relative_to(EXAMPLES) for p in EXAMPLES.rglob("*.yaml"))
    assert len(manifests) >= 4
    for manifest in manifests:
        assert any(str(manifest) in line and "OK" in line for line in done.stdout.splitlines()), (
            f"{manifest} not reported OK:\n{done.stdout}"
        )


def test_seed_v1alpha1_tfjob_cannot_run_locally_and_says_why(cli: Cli) -> None:
    done = cli.run(EXAMPLES / "seed" / "tfjob-v1alpha1.yaml")

    assert done.returncode == 1, explain(done)
    message = done.stdout + done.stderr
    assert "Traceback" not in message, message
    # One problem per item of the seed's replicaSpecs list (MASTER, WORKER, PS), each at
    # the path the user wrote (not the converted v1 one) and saying why.
    for index in range(3):
        path = f"spec.replicaSpecs[{index}].template.spec.containers[0].command"
        assert path in message, message
    assert "tfReplicaSpecs" not in message, message
    assert "no `command`" in message and "entrypoint" in message, message
    # Refused before anything started: no job recorded, no process left.
    assert cli.job_names() == []
    assert_nothing_left_running(cli)


@pytest.mark.parametrize(
    "manifest",
    [
        pytest.param("pytorch-ddp.yaml", id="pytorch-ddp"),
        pytest.param("tf-parameter-server.yaml", id="tf-parameter-server"),
        pytest.param("tf-seed-style.yaml", id="tf-seed-style"),
    ],
)
def test_example_scripts_sit_next_to_their_manifest(manifest: str) -> None:
    # Locally the command runs in the manifest's directory: every script it names must be there.
    from kubemill.sdk.manifests import load_path

    job = load_path(EXAMPLES / manifest)[0]
    for spec in job.replica_specs.values():
        for container in spec.template.spec.containers:
            scripts = [a for a in container.command or [] if a.endswith(".py")]
            assert scripts, f"{manifest}: no script in {container.command}"
            for script in scripts:
                assert (Path(EXAMPLES) / script).is_file(), f"{manifest}: {script} missing"


def test_the_leftover_process_check_sees_a_process_started_through_the_cli_env(cli: Cli) -> None:
    # assert_nothing_left_running is only worth something if it can see a process.
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], env=cli.env)
    try:
        deadline = time.monotonic() + 10
        while sleeper.pid not in processes_with_token(cli.token) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sleeper.pid in processes_with_token(cli.token)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert sleeper.pid not in processes_with_token(cli.token)
