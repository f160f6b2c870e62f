"""MPIJob: every version loads, conversions are exact, upstream's validation with the
user's paths, the remote-shell choice, defaults, and the wire round trip.

MPIJob is not registered in :mod:`kubemill.kinds` yet (its framework comes with it), so
these tests load through a kind table of their own.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from kubemill.api import (
    API_VERSION,
    CleanPodPolicy,
    FieldError,
    KindTable,
    ManifestError,
    RestartPolicy,
)
from kubemill.api.loader import load, load_one
from kubemill.engines.mpi.api import (
    MPIJOB,
    REMOTE_SHELL_ANNOTATION,
    LauncherCreationPolicy,
    MPIImplementation,
    MPIJob,
    RemoteShell,
)
from kubemill.engines.pytorch.api import PYTORCHJOB
from kubemill.engines.tensorflow.api import TFJOB

ROOT = Path(__file__).parents[3]
SEED = ROOT / "examples" / "seed" / "mpijob-v1alpha2.yaml"
GOOD = ROOT / "tests" / "manifests" / "mpi" / "good"
KINDS = KindTable([TFJOB, PYTORCHJOB, MPIJOB])

V2BETA1 = "kubeflow.org/v2beta1"
V1 = "kubeflow.org/v1"
V1ALPHA2 = "kubeflow.org/v1alpha2"
EVERY_VERSION = (API_VERSION, V2BETA1, V1, V1ALPHA2)


def load_mpi(source: Any) -> MPIJob:
    job = load_one(source, kinds=KINDS)
    assert isinstance(job, MPIJob)
    return job


def errors_of(source: Any) -> list[FieldError]:
    with pytest.raises(ManifestError) as caught:
        load(source, kinds=KINDS)
    return list(caught.value.errors)


def mpijob(api: str = API_VERSION, name: str = "mpi", **spec: Any) -> dict[str, Any]:
    """A Launcher running mpirun over 2 Workers without a command, plus ``spec``."""
    return {
        "apiVersion": api,
        "kind": "MPIJob",
        "metadata": {"name": name},
        "spec": {
            "mpiReplicaSpecs": {
                "Launcher": {
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "launcher", "image": "local", "command": ["mpirun"]}
                            ]
                        }
                    },
                },
                "Worker": {
                    "replicas": 2,
                    "template": {"spec": {"containers": [{"name": "worker", "image": "local"}]}},
                },
            },
            **spec,
        },
    }


def edit(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``doc`` with ``value`` at a dotted path (``_DELETE`` removes the key)."""
    out = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node: Any = out
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    if value is _DELETE:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


_DELETE = object()
L = "spec.mpiReplicaSpecs.Launcher"
W = "spec.mpiReplicaSpecs.Worker"


# --- every version loads -------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [pytest.param(SEED, id="seed-v1alpha2")]
    + [pytest.param(p, id=p.stem) for p in sorted(GOOD.glob("*.yaml"))],
)
def test_each_version_loads_into_the_kubemill_model(path: Path) -> None:
    job = load_mpi(path.read_text(encoding="utf-8"))
    assert job.api_version == API_VERSION
    assert job.to_wire()["apiVersion"] == API_VERSION
    assert set(job.replica_specs) == {"Launcher", "Worker"}


def test_the_good_fixtures_cover_every_upstream_version() -> None:
    versions = {load_mpi_raw(p)["apiVersion"] for p in [SEED, *GOOD.glob("*.yaml")]}
    assert versions == set(EVERY_VERSION)


def load_mpi_raw(path: Path) -> dict[str, Any]:
    import yaml

    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(doc, dict)
    return doc


def test_the_seed_manifest_loads_as_the_seed_describes() -> None:
    job = load_mpi(SEED.read_text(encoding="utf-8"))
    assert job.name == "tensorflow-mnist"
    assert job.spec.slots_per_worker == 1
    assert job.run_policy.clean_pod_policy is CleanPodPolicy.RUNNING
    assert job.spec.mpi_implementation is MPIImplementation.OPENMPI
    assert job.replica_count("Launcher") == 1
    assert job.worker_count == 2
    launcher = job.main_container("Launcher")
    worker = job.main_container("Worker")
    assert launcher is not None and worker is not None
    assert (launcher.name, worker.name) == ("mpi-launcher", "mpi-worker")
    assert launcher.command == ["mpirun"]
    assert launcher.args is not None and launcher.args[:2] == ["-np", "2"]
    # `command: [""]`: no command of its own (the image's entrypoint).
    assert worker.command is None
    assert worker.resources == {"limits": {"cpu": 2, "memory": "4Gi"}}
    assert job.restart_policy("Launcher") is RestartPolicy.ON_FAILURE
    assert job.restart_policy("Worker") is RestartPolicy.NEVER
    assert job.remote_shell is RemoteShell.EXEC


# --- conversions are exact -------------------------------------------------------------------


def _with_mpi_containers(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` whose templates have a sidecar first and the MPI container ``mpi`` second."""
    out = copy.deepcopy(doc)
    for replica in out["spec"]["mpiReplicaSpecs"].values():
        containers = replica["template"]["spec"]["containers"]
        containers[0]["name"] = "mpi"
        containers.insert(0, {"name": "sidecar", "image": "busybox"})
    return out


CONVERSIONS = [
    pytest.param(
        mpijob(V1ALPHA2, cleanPodPolicy="Running"),
        mpijob(runPolicy={"cleanPodPolicy": "Running"}),
        id="v1alpha2-cleanPodPolicy",
    ),
    pytest.param(
        mpijob(V1ALPHA2, backoffLimit=3, activeDeadlineSeconds=100),
        mpijob(runPolicy={"backoffLimit": 3, "activeDeadlineSeconds": 100}),
        id="v1alpha2-backoff-deadline",
    ),
    pytest.param(
        mpijob(V1ALPHA2, backoffLimit=2, runPolicy={"backoffLimit": 2, "suspend": True}),
        mpijob(runPolicy={"backoffLimit": 2, "suspend": True}),
        id="v1alpha2-agreeing-runPolicy",
    ),
    pytest.param(
        mpijob(V1ALPHA2, mpiDistribution="IntelMPI"),
        mpijob(mpiImplementation="Intel"),
        id="v1alpha2-IntelMPI",
    ),
    pytest.param(
        mpijob(V1ALPHA2, mpiDistribution="MPICH"),
        mpijob(mpiImplementation="MPICH"),
        id="v1alpha2-MPICH",
    ),
    pytest.param(
        mpijob(V1ALPHA2, mpiDistribution="OpenMPI", slotsPerWorker=4),
        mpijob(mpiImplementation="OpenMPI", slotsPerWorker=4),
        id="v1alpha2-OpenMPI-slots",
    ),
    pytest.param(
        mpijob(V1ALPHA2, launcherOnMaster=False),
        mpijob(),
        id="v1alpha2-launcherOnMaster-false",
    ),
    pytest.param(
        mpijob(V1, cleanPodPolicy="All", runPolicy={"ttlSecondsAfterFinished": 10}),
        mpijob(runPolicy={"cleanPodPolicy": "All", "ttlSecondsAfterFinished": 10}),
        id="v1-cleanPodPolicy-ttl",
    ),
    pytest.param(
        mpijob(V1, runPolicy={"schedulingPolicy": {"minAvailable": 3, "queue": "q"}}),
        mpijob(runPolicy={"schedulingPolicy": {"minAvailable": 3, "queue": "q"}}),
        id="v1-schedulingPolicy",
    ),
    pytest.param(
        _with_mpi_containers(mpijob(V1, mainContainer="mpi")),
        _with_mpi_containers(mpijob(mainContainer="mpi")),
        id="v1-mainContainer",
    ),
    pytest.param(
        mpijob(V2BETA1, launcherCreationPolicy="WaitForWorkersReady", runLauncherAsWorker=True),
        mpijob(
            launcherCreationPolicy="WaitForWorkersReady",
            runLauncherAsWorker=True,
            remoteShell="ssh",
        ),
        id="v2beta1-unchanged-but-ssh",
    ),
]


@pytest.mark.parametrize(("older", "current"), CONVERSIONS)
def test_conversion_gives_exactly_the_kubemill_job(
    older: dict[str, Any], current: dict[str, Any]
) -> None:
    assert load_mpi(older).to_wire() == load_mpi(current).to_wire()


@pytest.mark.parametrize("api", EVERY_VERSION)
def test_defaults_are_upstreams(api: str) -> None:
    job = load_mpi(edit(mpijob(api), f"{L}.replicas", _DELETE))
    assert job.replica_count("Launcher") == 1
    assert job.restart_policy("Launcher") is RestartPolicy.ON_FAILURE
    assert job.restart_policy("Worker") is RestartPolicy.NEVER
    assert job.spec.slots_per_worker == 1
    assert job.spec.mpi_implementation is MPIImplementation.OPENMPI
    assert job.spec.launcher_creation_policy is LauncherCreationPolicy.AT_STARTUP
    assert not job.launcher_waits_for_workers
    assert job.spec.run_launcher_as_worker is False
    assert job.spec.ssh_auth_mount_path == "/root/.ssh"
    assert job.run_policy.clean_pod_policy is CleanPodPolicy.NONE
    # The launcher's batch Job upstream retries 6 times unless told otherwise.
    assert job.run_policy.backoff_limit == 6
    # No framework port: nothing is added to any container.
    for spec in job.replica_specs.values():
        assert all(c.ports is None for c in spec.template.spec.containers)


def test_a_given_backoff_limit_is_kept() -> None:
    assert load_mpi(mpijob(runPolicy={"backoffLimit": 0})).run_policy.backoff_limit == 0


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        pytest.param([""], None, id="seed-empty-string"),
        pytest.param(["", ""], None, id="empty-strings"),
        pytest.param([], None, id="empty-list"),
        pytest.param(["sleep", ""], ["sleep", ""], id="real-command-kept"),
    ],
)
def test_an_empty_command_means_none(command: list[str], expected: list[str] | None) -> None:
    doc = edit(mpijob(V1ALPHA2), f"{W}.template.spec.containers.0.command", command)
    doc = edit(doc, f"{W}.template.spec.containers.0.args", ["-x"])
    worker = load_mpi(doc).main_container("Worker")
    assert worker is not None
    assert worker.command == expected
    assert worker.args == ["-x"]


# --- which container is the MPI one ----------------------------------------------------------


def test_the_mpi_container_is_the_first_by_default() -> None:
    job = load_mpi(_with_mpi_containers(mpijob()))
    assert job.main_container_name("Launcher") == "sidecar"
    assert job.main_container_name("Worker") == "sidecar"


@pytest.mark.parametrize("api", [API_VERSION, V1, V1ALPHA2])
def test_main_container_names_another_one(api: str) -> None:
    job = load_mpi(_with_mpi_containers(mpijob(api, mainContainer="mpi")))
    for rtype in ("Launcher", "Worker"):
        assert job.main_container_name(rtype) == "mpi"
        container = job.main_container(rtype)
        assert container is not None and container.name == "mpi"


# --- remote shell ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api", "field", "annotation", "expected"),
    [
        (API_VERSION, None, None, "exec"),
        (API_VERSION, "ssh", None, "ssh"),
        (API_VERSION, "exec", None, "exec"),
        (API_VERSION, "ssh", "exec", "exec"),
        (API_VERSION, "exec", "ssh", "ssh"),
        (V2BETA1, None, None, "ssh"),
        (V2BETA1, None, "exec", "exec"),
        (V2BETA1, None, "ssh", "ssh"),
        (V1, None, None, "exec"),
        (V1, None, "ssh", "ssh"),
        (V1ALPHA2, None, None, "exec"),
        (V1ALPHA2, None, "ssh", "ssh"),
    ],
)
def test_remote_shell_field_annotation_and_version_default(
    api: str, field: str | None, annotation: str | None, expected: str
) -> None:
    doc = mpijob(api, **({"remoteShell": field} if field else {}))
    if annotation:
        doc["metadata"]["annotations"] = {REMOTE_SHELL_ANNOTATION: annotation}
    job = load_mpi(doc)
    assert job.remote_shell is RemoteShell(expected)
    # The choice survives the trip through kubemill's own group.
    assert load_mpi(job.to_wire()).remote_shell is RemoteShell(expected)


# --- validation: upstream's rules, each at the path the user wrote ---------------------------


ANNOTATION_PATH = "metadata.annotations['kubemill.dev/remote-shell']"

INVALID = [
    pytest.param(
        edit(mpijob(V2BETA1), f"{L}.replicas", 0),
        f"{L}.replicas",
        "must be 1, got 0",
        id="launcher-0",
    ),
    pytest.param(
        edit(mpijob(), f"{L}.replicas", 2), f"{L}.replicas", "must be 1, got 2", id="launcher-2"
    ),
    pytest.param(
        edit(mpijob(V1), "spec.mpiReplicaSpecs.Launcher", _DELETE),
        L,
        "an MPIJob has one Launcher",
        id="no-launcher",
    ),
    pytest.param(
        edit(mpijob(V2BETA1), f"{W}.replicas", 0),
        f"{W}.replicas",
        "must be at least 1, got 0",
        id="workers-0",
    ),
    pytest.param(
        edit(mpijob(V1ALPHA2), f"{W}.replicas", _DELETE),
        f"{W}.replicas",
        "must be at least 1, got 0",
        id="workers-default-to-0",
    ),
    pytest.param(
        edit(mpijob(), f"{L}.restartPolicy", "Always"),
        f"{L}.restartPolicy",
        "'Always' is not allowed",
        id="launcher-always",
    ),
    pytest.param(
        edit(mpijob(V1), f"{W}.restartPolicy", "ExitCode"),
        f"{W}.restartPolicy",
        "'ExitCode' is not allowed",
        id="worker-exitcode",
    ),
    pytest.param(
        edit(mpijob(V2BETA1), f"{L}.template.spec.containers", []),
        f"{L}.template.spec.containers",
        "at least one container is required",
        id="launcher-no-container",
    ),
    pytest.param(
        mpijob(V2BETA1, name="9lives"),
        "metadata.name",
        "'9lives-worker-1' would not be a valid DNS-1035 label",
        id="name-starts-with-digit",
    ),
    pytest.param(
        mpijob(V2BETA1, name="a" * 53),
        "metadata.name",
        "over the 63 allowed",
        id="name-too-long",
    ),
    pytest.param(
        mpijob(slotsPerWorker=0), "spec.slotsPerWorker", "must be >= 1, got 0", id="slots-0"
    ),
    pytest.param(
        mpijob(V1, slotsPerWorker=0), "spec.slotsPerWorker", "must be >= 1, got 0", id="v1-slots-0"
    ),
    pytest.param(
        mpijob(V2BETA1, sshAuthMountPath=""),
        "spec.sshAuthMountPath",
        "must not be empty",
        id="mount-path-empty",
    ),
    pytest.param(
        mpijob(sshAuthMountPath="keys"),
        "spec.sshAuthMountPath",
        "'keys' is not an absolute path",
        id="mount-path-relative",
    ),
    pytest.param(
        mpijob(V2BETA1, mpiImplementation="IntelMPI"),
        "spec.mpiImplementation",
        "got 'IntelMPI'",
        id="v2beta1-implementation-is-not-distribution",
    ),
    pytest.param(
        mpijob(launcherCreationPolicy="Later"),
        "spec.launcherCreationPolicy",
        "got 'Later'",
        id="creation-policy",
    ),
    pytest.param(
        mpijob(remoteShell="rsh"), "spec.remoteShell", "got 'rsh'", id="remote-shell-value"
    ),
    pytest.param(
        edit(mpijob(V1), "metadata.annotations", {REMOTE_SHELL_ANNOTATION: "kubectl"}),
        ANNOTATION_PATH,
        "got 'kubectl'",
        id="annotation-value",
    ),
    pytest.param(
        mpijob(V2BETA1, remoteShell="exec"),
        "spec.remoteShell",
        "not a field of kubeflow.org/v2beta1",
        id="v2beta1-remoteShell",
    ),
    pytest.param(
        _with_mpi_containers(mpijob(V2BETA1, mainContainer="mpi")),
        "spec.mainContainer",
        "not a field of kubeflow.org/v2beta1",
        id="v2beta1-mainContainer",
    ),
    pytest.param(
        mpijob(V1ALPHA2, remoteShell="ssh"),
        "spec.remoteShell",
        "unknown field",
        id="v1alpha2-remoteShell",
    ),
    pytest.param(
        mpijob(V1, mpiImplementation="Intel"),
        "spec.mpiImplementation",
        "unknown field",
        id="v1-has-no-mpiImplementation",
    ),
    pytest.param(
        edit(
            _with_mpi_containers(mpijob(V1, mainContainer="mpi")),
            f"{W}.template.spec.containers",
            [{"name": "worker", "image": "local"}],
        ),
        f"{W}.template.spec.containers",
        "no container is named 'mpi'",
        id="mainContainer-missing",
    ),
    pytest.param(
        mpijob(V1ALPHA2, cleanPodPolicy="All", runPolicy={"cleanPodPolicy": "Running"}),
        "spec.cleanPodPolicy",
        "'All' disagrees with spec.runPolicy.cleanPodPolicy 'Running'",
        id="v1alpha2-cleanPodPolicy-conflict",
    ),
    pytest.param(
        mpijob(V1, activeDeadlineSeconds=5, runPolicy={"activeDeadlineSeconds": 6}),
        "spec.activeDeadlineSeconds",
        "5 disagrees with spec.runPolicy.activeDeadlineSeconds 6",
        id="v1-deadline-conflict",
    ),
    pytest.param(
        mpijob(V1ALPHA2, mpiDistribution="Intel"),
        "spec.mpiDistribution",
        "got 'Intel'",
        id="v1alpha2-distribution-is-not-implementation",
    ),
    pytest.param(
        mpijob(V1ALPHA2, launcherOnMaster=True),
        "spec.launcherOnMaster",
        "not supported",
        id="v1alpha2-launcherOnMaster",
    ),
    pytest.param(
        mpijob(runPolicy={"managedBy": "kueue.x-k8s.io/multikueue"}),
        "spec.runPolicy.managedBy",
        "names another controller",
        id="managed-by-kueue",
    ),
    pytest.param(
        edit(mpijob(), "spec.mpiReplicaSpecs", {}),
        "spec.mpiReplicaSpecs",
        "at least one replica type is required",
        id="no-replicas-one-error",
    ),
    pytest.param(
        edit(mpijob(V2BETA1), "spec.mpiReplicaSpecs.Master", {"replicas": 1}),
        "spec.mpiReplicaSpecs.Master",
        "unknown replica type 'Master'",
        id="unknown-type",
    ),
]


@pytest.mark.parametrize(("doc", "path", "message"), INVALID)
def test_each_problem_is_one_error_at_the_users_path(
    doc: dict[str, Any], path: str, message: str
) -> None:
    errors = errors_of(doc)
    assert [e.path for e in errors] == [path], "\n".join(map(str, errors))
    assert message in errors[0].message, str(errors[0])


def test_every_mpi_check_says_what_to_do() -> None:
    doc = mpijob(V2BETA1, name="0x", remoteShell="exec", mainContainer="mpi")
    doc = edit(doc, f"{L}.replicas", 3)
    doc = edit(doc, f"{W}.replicas", 0)
    doc = edit(doc, f"{W}.restartPolicy", "Always")
    doc = edit(doc, "metadata.annotations", {REMOTE_SHELL_ANNOTATION: "rsh"})
    job = MPIJob.model_validate(doc)
    errors = job.kind_errors()
    assert len(errors) == 9, "\n".join(map(str, errors))
    assert all(e.hint for e in errors), "\n".join(map(str, errors))


@pytest.mark.parametrize(
    "doc",
    [
        pytest.param(edit(mpijob(), "spec.mpiReplicaSpecs.Worker", _DELETE), id="launcher-alone"),
        pytest.param(
            edit(mpijob(V2BETA1), f"{L}.template.spec.containers.0.command", _DELETE),
            id="launcher-without-command",
        ),
        pytest.param(edit(mpijob(), f"{L}.restartPolicy", "Never"), id="launcher-never"),
        pytest.param(edit(mpijob(V1), f"{W}.restartPolicy", "OnFailure"), id="workers-onfailure"),
        pytest.param(
            mpijob(V2BETA1, runPolicy={"managedBy": "kubeflow.org/mpi-operator"}),
            id="managed-by-mpi-operator",
        ),
        pytest.param(mpijob(V2BETA1, name="a" * 52), id="longest-name"),
        pytest.param(mpijob(sshAuthMountPath="/home/mpiuser/.ssh"), id="mount-path"),
    ],
)
def test_valid_mpijobs(doc: dict[str, Any]) -> None:
    load_mpi(doc)


# --- paths of the converted job map back onto the user's manifest ----------------------------


@pytest.mark.parametrize(
    ("doc", "path", "written"),
    [
        (
            mpijob(V1ALPHA2, cleanPodPolicy="All"),
            "spec.runPolicy.cleanPodPolicy",
            "spec.cleanPodPolicy",
        ),
        (mpijob(V1, backoffLimit=1), "spec.runPolicy.backoffLimit", "spec.backoffLimit"),
        (
            mpijob(V1, activeDeadlineSeconds=9),
            "spec.runPolicy.activeDeadlineSeconds",
            "spec.activeDeadlineSeconds",
        ),
        (
            mpijob(V1, backoffLimit=1, runPolicy={"backoffLimit": 1}),
            "spec.runPolicy.backoffLimit",
            "spec.runPolicy.backoffLimit",
        ),
        (mpijob(V1ALPHA2), "spec.runPolicy.cleanPodPolicy", "spec.runPolicy.cleanPodPolicy"),
        (mpijob(V1ALPHA2), "spec.mpiImplementation", "spec.mpiDistribution"),
        (mpijob(V1), "spec.mpiImplementation", "spec.mpiImplementation"),
        (
            mpijob(V1ALPHA2),
            f"{W}.template.spec.containers[0].command",
            f"{W}.template.spec.containers[0].command",
        ),
        (mpijob(V2BETA1), "spec.runPolicy.cleanPodPolicy", "spec.runPolicy.cleanPodPolicy"),
    ],
)
def test_source_paths_name_the_field_the_user_wrote(
    doc: dict[str, Any], path: str, written: str
) -> None:
    assert load_mpi(doc).source_path(path) == written


# --- round trip ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "doc",
    [pytest.param(load_mpi_raw(SEED), id="seed")]
    + [pytest.param(load_mpi_raw(p), id=p.stem) for p in sorted(GOOD.glob("*.yaml"))]
    + [pytest.param(mpijob(V1ALPHA2, backoffLimit=2, mpiDistribution="MPICH"), id="v1alpha2")],
)
def test_to_wire_round_trips(doc: dict[str, Any]) -> None:
    job = load_mpi(doc)
    wire = job.to_wire()
    again = load_mpi(wire)
    assert again.to_wire() == wire
    assert again.remote_shell is job.remote_shell
    assert again.spec == job.spec
