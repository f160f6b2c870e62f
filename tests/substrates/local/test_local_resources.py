"""A container's ``resources`` honoured locally (issue 7): cores, thread counts, memory.

Real processes: a replica reports its own affinity and environment, another allocates
past its memory limit and is OOMKilled.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from local_support import container, pytorch_job

from kubemill.api import ConditionType
from kubemill.substrates.base import JobView, SubmitOptions
from kubemill.substrates.local import LocalBackend, NotRunnableLocally
from kubemill.substrates.local.resources import machine_cores
from support.waiting import eventually

MASTER = "spec.pytorchReplicaSpecs.Master.template.spec.containers[0]"

REPORT = (
    "import json, os, time\n"
    "me = os.environ['HOSTNAME']\n"
    "seen = {'cores': sorted(os.sched_getaffinity(0)),"
    " 'omp': os.environ.get('OMP_NUM_THREADS'), 'mkl': os.environ.get('MKL_NUM_THREADS')}\n"
    "open(me + '.tmp', 'w').write(json.dumps(seen))\n"
    "os.replace(me + '.tmp', me + '.json')\n"
    "while not os.path.exists('go'): time.sleep(0.01)\n"
)
"""Writes what the replica sees to ``<pod>.json``, then waits for ``go`` (so replicas of
one job run at the same time)."""

HOG = (
    "import os, sys, time\n"
    "if os.path.exists('hogged'): sys.exit(0)\n"
    "open('hogged', 'w').close()\n"
    "hog = b'x' * (256 * 2**20)\n"
    "time.sleep(60)\n"
)
"""Holds 256 MiB resident on its first run; a second run exits 0 at once."""


def with_resources(code: str, resources: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return container(code, resources=resources, **extra)


def seen(tmp_path: Path, pod: str) -> dict[str, Any]:
    path = tmp_path / f"{pod}.json"
    text = eventually(lambda: path.exists() and path.read_text(), what=f"{pod} reported")
    return dict(json.loads(text))


def finish(backend: LocalBackend, name: str) -> JobView:
    done = backend.wait(name, timeout=60)
    assert done.finished, done.status
    return done


@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detached"])
def test_cpu_limit_pins_cores_and_sets_thread_counts(
    backend: LocalBackend, tmp_path: Path, detach: bool
) -> None:
    job = pytorch_job(
        "pinned",
        master=with_resources(REPORT, {"limits": {"cpu": "500m"}}),
        worker=with_resources(REPORT, {"limits": {"cpu": "1"}}),
    )
    backend.submit(job, SubmitOptions(detach=detach, base_dir=str(tmp_path)))
    master, worker = seen(tmp_path, "pinned-master-0"), seen(tmp_path, "pinned-worker-0")
    (tmp_path / "go").touch()
    assert finish(backend, "pinned").phase == "Succeeded"
    # 500m rounds up to one core.
    assert len(master["cores"]) == 1 and len(worker["cores"]) == 1
    assert (master["omp"], master["mkl"], worker["omp"]) == ("1", "1", "1")
    if machine_cores() >= 2:
        # Replicas that run at the same time get different cores.
        assert master["cores"] != worker["cores"]


def test_thread_counts_the_manifest_sets_are_kept(backend: LocalBackend, tmp_path: Path) -> None:
    job = pytorch_job(
        "own-threads",
        master=with_resources(
            REPORT,
            {"limits": {"cpu": "1"}},
            env=[{"name": "OMP_NUM_THREADS", "value": "7"}],
        ),
    )
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    report = seen(tmp_path, "own-threads-master-0")
    (tmp_path / "go").touch()
    finish(backend, "own-threads")
    assert (report["omp"], report["mkl"]) == ("7", "1")


def test_no_cpu_limit_means_every_core_and_no_thread_count(
    backend: LocalBackend, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("MKL_NUM_THREADS", raising=False)
    backend.submit(
        pytorch_job("free", master=container(REPORT)),
        SubmitOptions(detach=False, base_dir=str(tmp_path)),
    )
    report = seen(tmp_path, "free-master-0")
    (tmp_path / "go").touch()
    finish(backend, "free")
    assert report["cores"] == sorted(os.sched_getaffinity(0))
    assert report["omp"] is None


@pytest.mark.parametrize("detach", [False, True], ids=["foreground", "detached"])
def test_a_replica_past_its_memory_limit_is_oom_killed(
    backend: LocalBackend, tmp_path: Path, detach: bool
) -> None:
    job = pytorch_job(
        "hog", master=with_resources(HOG, {"limits": {"memory": "64Mi"}}), restart_policy="Never"
    )
    backend.submit(job, SubmitOptions(detach=detach, base_dir=str(tmp_path)))
    done = finish(backend, "hog")
    assert done.phase == "Failed"
    master = done.replicas[0]
    assert (master.phase, master.exit_code, master.reason) == ("Failed", 137, "OOMKilled")
    assert "64Mi" in master.message
    failed = done.status.condition(ConditionType.FAILED)
    assert failed is not None and "137" in failed.message
    events = [e.reason for e in backend.events("hog")]
    assert "OOMKilling" in events


def test_an_oom_killed_replica_restarts_per_its_policy(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job(
        "hog-again",
        master=with_resources(HOG, {"limits": {"memory": "64Mi"}}),
        restart_policy="OnFailure",
        run_policy={"backoffLimit": 2},
    )
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    done = finish(backend, "hog-again")
    # The first run was OOMKilled, the second (which allocates nothing) succeeded.
    assert done.phase == "Succeeded"
    master = done.replicas[0]
    assert (master.exit_code, master.restarts) == (0, 1)


def test_a_memory_limit_below_what_it_uses_is_not_killed_early(
    backend: LocalBackend, tmp_path: Path
) -> None:
    job = pytorch_job(
        "roomy", master=with_resources("x = b'x' * 2**20", {"limits": {"memory": "512Mi"}})
    )
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    done = finish(backend, "roomy")
    assert (done.phase, done.replicas[0].exit_code) == ("Succeeded", 0)


@pytest.mark.parametrize(
    ("resources", "field", "words"),
    [
        ({"requests": {"cpu": "100000"}}, "resources.requests.cpu", "asks for 100000 CPUs"),
        ({"limits": {"cpu": 100000}}, "resources.limits.cpu", "asks for 100000 CPUs"),
        ({"limits": {"memory": "1Ei"}}, "resources.limits.memory", "(MemTotal)"),
        ({"requests": {"memory": "lots"}}, "resources.requests.memory", "not a quantity"),
    ],
)
def test_asks_larger_than_the_machine_are_refused_at_submit(
    backend: LocalBackend, tmp_path: Path, resources: dict[str, Any], field: str, words: str
) -> None:
    job = pytorch_job("too-big", master=with_resources("pass", resources))
    with pytest.raises(NotRunnableLocally) as caught:
        backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    errors = [str(e) for e in caught.value.errors]
    assert any(f"{MASTER}.{field}" in e and words in e for e in errors), errors
    assert not backend.list()


def test_memory_counts_the_whole_process_tree(backend: LocalBackend, tmp_path: Path) -> None:
    # The replica itself stays small; its child in a session of its own holds the memory.
    parent = (
        "import subprocess, sys\n"
        "child = \"import time; hog = b'x' * (256 * 2**20); time.sleep(60)\"\n"
        "subprocess.run([sys.executable, '-c', child], start_new_session=True)\n"
    )
    job = pytorch_job("tree", master=with_resources(parent, {"limits": {"memory": "100Mi"}}))
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    master = finish(backend, "tree").replicas[0]
    assert (master.exit_code, master.reason) == (137, "OOMKilled")


def test_memory_shared_by_the_processes_of_a_replica_counts_once(
    backend: LocalBackend, tmp_path: Path
) -> None:
    """As a container's memory cgroup charges a page once: four processes mapping the same
    96 MiB of shared memory use about 96 MiB, not four times that (summed resident sizes
    would put them past the 200Mi limit and kill them)."""
    program = (
        "import mmap, os, time\n"
        "shared = mmap.mmap(-1, 96 * 2**20)\n"
        "shared.write(b'x' * len(shared))\n"
        "children = []\n"
        "for _ in range(3):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        total = sum(shared[i] for i in range(0, len(shared), 4096))\n"
        "        time.sleep(1.5)\n"
        "        os._exit(0 if total else 1)\n"
        "    children.append(pid)\n"
        "codes = [os.waitpid(pid, 0)[1] for pid in children]\n"
        "raise SystemExit(max(codes))\n"
    )
    job = pytorch_job("shared", master=with_resources(program, {"limits": {"memory": "200Mi"}}))
    backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    done = finish(backend, "shared")
    master = done.replicas[0]
    assert (done.phase, master.exit_code, master.reason) == ("Succeeded", 0, "Completed")
