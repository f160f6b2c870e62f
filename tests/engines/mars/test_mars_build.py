"""The pure builders of a Mars cluster's objects, and Mars's sizes.

Every object passes kubernetes-validate (strict, oldest and newest supported Kubernetes);
the sizes read as Mars reads them.
"""

from __future__ import annotations

from typing import Any

import pytest

from kubemill import __version__
from kubemill.engines.mars.api import (
    MarsClusterSpec,
    SizeError,
    cpu_text,
    parse_cache_size,
    parse_size,
)
from kubemill.engines.mars.framework import (
    ENV_CACHE_MEM_SIZE,
    ENV_CPU_TOTAL,
    ENV_SPILL_DIRS,
    LABEL_MARS_ROLE,
    build_cluster,
    build_namespace,
    build_supervisors,
    build_workers,
)
from support import manifest_checks

OWNER = {
    "apiVersion": "kubemill.dev/v1",
    "kind": "MarsCluster",
    "name": "demo",
    "uid": "0000-1111",
    "controller": True,
    "blockOwnerDeletion": True,
}


def _env(deployment: dict[str, Any]) -> dict[str, Any]:
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    return {e["name"]: e.get("value") for e in container["env"]}


@pytest.mark.parametrize("owner", [None, OWNER], ids=["new_cluster", "operator"])
def test_every_object_passes_kubernetes_validate(owner: dict[str, Any] | None) -> None:
    spec = MarsClusterSpec(
        supervisor_num=2,
        supervisor_cpu=0.5,
        supervisor_extra_env={"A": "1"},
        worker_num=4,
        worker_cpu=2,
        worker_mem="8g",
        worker_spill_paths=["/mnt/disk1/spill", "/mnt/disk2/spill"],
        worker_cache_mem="30%",
        min_worker_num=3,
        worker_extra_env={"MARS_CPU_TOTAL": "1.5", "B": "2"},
        image="registry.example/mars:v1",
    )
    objects = [build_namespace("mars-abc", "demo"), *build_cluster("demo", "ns", spec, owner=owner)]
    assert [o["kind"] for o in objects] == [
        "Namespace",
        "Role",
        "RoleBinding",
        "Deployment",
        "Deployment",
        "Service",
    ]
    for obj in objects:
        assert manifest_checks.k8s_errors(obj) == [], obj["kind"]
    for obj in objects[1:]:
        assert obj["metadata"].get("ownerReferences") == ([owner] if owner else None)


def test_the_deployments_select_their_own_pods_and_the_service_the_supervisors() -> None:
    spec = MarsClusterSpec(worker_cpu=1, worker_mem="1g")
    role, binding, supervisors, workers, service = build_cluster("demo", "ns", spec)
    for deployment, role_name in ((supervisors, "supervisor"), (workers, "worker")):
        selector = deployment["spec"]["selector"]["matchLabels"]
        assert selector[LABEL_MARS_ROLE] == role_name
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items()
    assert service["spec"]["selector"] == supervisors["spec"]["selector"]["matchLabels"]
    port = service["spec"]["ports"][0]
    supervisor_ports = supervisors["spec"]["template"]["spec"]["containers"][0]["ports"]
    assert port["targetPort"] in {p["name"] for p in supervisor_ports}
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_the_pods_run_the_image_kubemill_builds_unless_told_otherwise() -> None:
    """Mars's own image has no kubemill, whose entrypoints the pods run."""
    for image, expected in (
        (None, f"kubemill-mars:{__version__}"),
        ("r.example/m:1", "r.example/m:1"),
    ):
        spec = MarsClusterSpec(worker_cpu=1, worker_mem="1g", image=image)
        _, _, supervisors, workers, _ = build_cluster("demo", "ns", spec)
        for deployment in (supervisors, workers):
            container = deployment["spec"]["template"]["spec"]["containers"][0]
            assert container["image"] == expected
            assert container["command"][:3] == [
                "python",
                "-m",
                "kubemill.engines.mars.pod.entrypoint",
            ]


def test_extra_env_replaces_the_entrypoints_by_name_and_adds_the_rest() -> None:
    spec = MarsClusterSpec(
        worker_cpu=2, worker_mem="2g", worker_extra_env={ENV_CPU_TOTAL: "1.5", "B": "2"}
    )
    container = build_workers("demo", "ns", spec)["spec"]["template"]["spec"]["containers"][0]
    names = [e["name"] for e in container["env"]]
    assert names.count(ENV_CPU_TOTAL) == 1
    env = _env(build_workers("demo", "ns", spec))
    assert env[ENV_CPU_TOTAL] == "1.5" and env["B"] == "2"
    assert _env(build_supervisors("demo", "ns", spec))[ENV_CPU_TOTAL] == "1"


def test_workers_without_spill_paths_or_cache_get_no_spill_and_marss_default_cache() -> None:
    spec = MarsClusterSpec(worker_cpu=1, worker_mem="1g")
    deployment = build_workers("demo", "ns", spec)
    pod = deployment["spec"]["template"]["spec"]
    env = _env(deployment)
    assert ENV_SPILL_DIRS not in env
    # The plasma store always has a /dev/shm of its size: Mars's Kubernetes default, 40%.
    assert env[ENV_CACHE_MEM_SIZE] == str((1 << 30) * 2 // 5)
    assert [v["name"] for v in pod["volumes"]] == ["shm"]
    assert pod["volumes"][0]["emptyDir"] == {
        "medium": "Memory",
        "sizeLimit": env[ENV_CACHE_MEM_SIZE],
    }
    assert pod["containers"][0]["volumeMounts"] == [{"name": "shm", "mountPath": "/dev/shm"}]


@pytest.mark.parametrize(
    ("written", "size"),
    [
        (1024, 1024),
        ("1024", 1024),
        ("16g", 16 << 30),
        ("16G", 16 << 30),
        ("2Gi", 2 << 30),
        ("512m", 512 << 20),
        ("1.5k", 1536),
        ("1gb", 1 << 30),
        ("2GiB", 2 << 30),
        (" 3 t ", 3 << 40),
        ("100b", 100),
        ("1e", 1 << 60),
        (2.5, 2),
    ],
)
def test_sizes_read_as_mars_reads_them(written: int | str, size: int) -> None:
    assert parse_size(written) == size


@pytest.mark.parametrize("written", ["", "lots", "-1g", "0", "1x", "g", True])
def test_bad_sizes_are_refused(written: Any) -> None:
    with pytest.raises(SizeError):
        parse_size(written)


def test_cache_sizes_take_a_percentage_of_the_memory() -> None:
    assert parse_cache_size("25%", 1 << 30) == 1 << 28
    assert parse_cache_size("100m", 1 << 30) == 100 << 20
    with pytest.raises(SizeError, match="between 0 and 100"):
        parse_cache_size("150%", 1 << 30)


@pytest.mark.parametrize(("cpu", "text"), [(1, "1"), (2.0, "2"), (0.5, "500m"), (1.25, "1250m")])
def test_cpu_as_kubernetes_takes_it(cpu: float, text: str) -> None:
    assert cpu_text(cpu) == text
