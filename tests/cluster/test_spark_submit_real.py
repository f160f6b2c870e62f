"""SPEC S1 against the real API server: ``kubemill spark-submit --master k8s://https://127.0.0.1:PORT``
and the JVM ``spark-submit`` of the pyspark wheel, both with a kubeconfig (client
certificates), create objects the real server accepts, and the same ones, field by field
(support/spark_parity.py), up to what the real server adds of its own to each pod."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from support.control_plane import ControlPlane
from support.engines import SPARK_SUBMIT, needs_java, needs_spark_submit
from support.real_operator import KUBEMILL
from support.spark_parity import COMMAND_LINE_IDS, COMMAND_LINES, KINDS, compare
from support.waiting import eventually

pytestmark = [pytest.mark.engine, needs_spark_submit, needs_java]

TOKEN_VOLUME = re.compile(r"^kube-api-access-[a-z0-9]{5}$")
"""The projected service-account token volume the ServiceAccount admission plugin adds to
every pod, with a random suffix of its own."""


def environment(plane: ControlPlane, tmp_path: Path) -> dict[str, str]:
    """Both clients find the cluster's credentials where users keep them: KUBECONFIG."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        k: v for k, v in os.environ.items() if k not in ("KUBERNETES_SERVICE_HOST", "SPARK_USER")
    }
    env.update(HOME=str(home), KUBECONFIG=str(plane.admin_kubeconfig))
    env["PATH"] = f"{SPARK_SUBMIT.parent}:{env.get('PATH', '')}"
    return env


def snapshot(plane: ControlPlane, namespace: str) -> dict[str, dict[str, dict[str, Any]]]:
    return {
        kind: {
            o["metadata"]["name"]: o
            for o in plane.request("GET", path.format(ns=namespace))["items"]
        }
        for kind, path in KINDS.items()
    }


def created(
    plane: ControlPlane, namespace: str, before: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    out = {}
    for kind, objects in snapshot(plane, namespace).items():
        new = [o for name, o in objects.items() if name not in before[kind]]
        assert len(new) == 1, f"expected one new {kind}, got {[o['metadata']['name'] for o in new]}"
        out[kind] = new[0]
    return out


def submit(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done.stdout


def without_server_additions(objects: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """What the real server adds to each pod of its own, the same for both but for names it
    generates: its status (the node stand-in plays it) and the token volume's suffix."""
    pod = objects["Pod"]
    pod.pop("status", None)
    # ... and who wrote that status and the binding (the node, the scheduler), by when.
    pod["spec"].pop("nodeName", None)
    pod["metadata"]["managedFields"] = [
        m
        for m in pod["metadata"]["managedFields"]
        if m.get("subresource") not in ("status", "binding") and m["manager"] != "kube-scheduler"
    ]
    for volume in pod["spec"].get("volumes", []):
        if TOKEN_VOLUME.match(volume["name"]):
            volume["name"] = "kube-api-access-<server>"
    for container in pod["spec"]["containers"]:
        for mount in container.get("volumeMounts", []):
            if TOKEN_VOLUME.match(mount["name"]):
                mount["name"] = "kube-api-access-<server>"
    return objects


@pytest.mark.usefixtures("node")
@pytest.mark.parametrize(("argv", "clean_name"), COMMAND_LINES, ids=COMMAND_LINE_IDS)
def test_kubemill_and_the_jvm_create_the_same_driver_on_the_real_server(
    control_plane: ControlPlane, tmp_path: Path, argv: list[str], clean_name: str
) -> None:
    namespace = control_plane.new_namespace("spark")
    # One command line names the driver's ServiceAccount `spark`: on a real cluster it must
    # exist, or the ServiceAccount admission plugin refuses the driver pod.
    control_plane.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts", {"metadata": {"name": "spark"}}
    )
    env = environment(control_plane, tmp_path)
    command = [
        "--master", f"k8s://{control_plane.url}", "--deploy-mode", "cluster",
        "--conf", f"spark.kubernetes.namespace={namespace}",
        "--conf", "spark.kubernetes.submission.waitAppCompletion=false",
        *argv,
    ]  # fmt: skip
    before = snapshot(control_plane, namespace)
    submit([str(SPARK_SUBMIT), *command], env)
    jvm = created(control_plane, namespace, before)

    before = snapshot(control_plane, namespace)
    out = submit([KUBEMILL, "spark-submit", *command], env)
    ours = created(control_plane, namespace, before)
    assert f"submission ID {namespace}:{ours['Pod']['metadata']['name']}" in out
    for objects in (jvm, ours):
        # Bound by the real scheduler, like any pod; one whose node selector (disk=ssd) no
        # node has stays Pending, as on any cluster.
        pod = objects["Pod"]
        path = f"/api/v1/namespaces/{namespace}/pods/{pod['metadata']['name']}"
        if not pod["spec"].get("nodeSelector"):
            eventually(
                lambda path=path: control_plane.request("GET", path)["spec"].get("nodeName"),
                what=f"{path} bound",
            )
    compare(without_server_additions(jvm), without_server_additions(ours), clean_name)
