"""A kind that only a plugin knows, on the Kubernetes substrate: CRD, RBAC, render, operator.

The toy engine (``toy_engine.py``) is registered through ``KUBEMILL_ENGINES``; the real
operator runs in a subprocess against the strict test API server and learns the kind from
the same variable. Nothing in kubemill names the kind, yet it gets its CRD and RBAC, renders,
and the operator runs it: the file set as a ConfigMap rewritten as members come up, the
service outcome (Ready, never Succeeded), the status extension, and a foreign pod the Head
creates, counted and never deleted.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from toy_engine import manifest
from typer.testing import CliRunner

from kubemill.cli.app import app
from kubemill.kinds import load_one
from kubemill.substrates.kubernetes.install import operator_rules, permits
from kubemill.substrates.kubernetes.render import render_job
from support.operator_support import (
    Cluster,
    Kubelet,
    is_true,
    job_path,
    running_cluster,
    running_operator,
)
from support.waiting import eventually

HERE = Path(__file__).resolve().parent


def toy(name: str) -> dict[str, Any]:
    return manifest(name, command=["toy"], greeting="hi")


def test_the_plugin_kind_has_its_crd_rbac_and_render(toy_plugin: None) -> None:
    rules = operator_rules()
    assert permits(rules, group="kubemill.dev", resource="toyclusters", verb="watch")
    assert permits(rules, group="kubemill.dev", resource="toyclusters/status", verb="patch")
    assert permits(rules, group="", resource="configmaps", verb="update")
    objects = render_job(load_one(toy("r")))
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objects]
    assert kinds[0] == ("ConfigMap", "r-config")
    assert ("Pod", "r-head-0") in kinds and ("Pod", "r-member-1") in kinds
    config = objects[0]["data"]
    assert config["greeting"] == "hi\n"
    # Rendered as the pods come up: the listing of the members the operator would write.
    assert config["members"] == (
        "r-member-0.default.svc member-0\nr-member-1.default.svc member-1\n"
    )
    head = next(o for o in objects if (o["kind"], o["metadata"]["name"]) == ("Pod", "r-head-0"))
    env = {e["name"]: e["value"] for e in head["spec"]["containers"][0]["env"]}
    assert env["TOY_FILES"] == "/etc/toy"


@pytest.fixture
def cluster(toy_plugin: None) -> Iterator[Cluster]:
    with running_cluster() as served:  # installs every registered kind's CRD, the toy's too
        yield served


def config_map(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = cluster.get_or_none(
        f"/api/v1/namespaces/{namespace}/configmaps/{name}"
    )
    return found


def test_the_operator_runs_the_plugin_kind(cluster: Cluster, tmp_path: Path) -> None:
    namespace = cluster.namespace()
    with running_operator(cluster, tmp_path, "--all-namespaces"):
        path = job_path("ToyCluster", namespace, "t")
        cluster.create(job_path("ToyCluster", namespace), toy("t"))
        pods = f"/api/v1/namespaces/{namespace}/pods"

        def pod_names() -> set[str]:
            return {p["metadata"]["name"] for p in cluster.list(pods)}

        eventually(lambda: pod_names() == {"t-head-0", "t-member-0", "t-member-1"}, what="pods")
        config = eventually(lambda: config_map(cluster, namespace, "t-config"), what="config")
        assert config["data"] == {"greeting": "hi\n", "members": ""}
        head = cluster.get(f"{pods}/t-head-0")
        mounts = head["spec"]["containers"][0]["volumeMounts"]
        assert [m["mountPath"] for m in mounts] == ["/etc/toy", "/var/run/toy"]
        member = cluster.get(f"{pods}/t-member-0")
        assert [m["mountPath"] for m in member["spec"]["containers"][0]["volumeMounts"]] == [
            "/etc/toy"
        ]
        assert head["spec"]["serviceAccountName"] == "t-head"
        assert "serviceAccountName" not in member["spec"]
        rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
        role = cluster.get(f"{rbac}/roles/t-head")
        assert role["rules"] == [
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}
        ]
        binding = cluster.get(f"{rbac}/rolebindings/t-head")
        assert binding["subjects"][0]["name"] == "t-head"
        assert cluster.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/t-head")
        secret = cluster.get(f"/api/v1/namespaces/{namespace}/secrets/t-token")
        assert base64.b64decode(secret["data"]["token"]) == b"toy-token-of-t\n"

        kubelet = Kubelet(cluster, namespace)
        for pod in ("t-head-0", "t-member-0", "t-member-1"):
            kubelet.set(pod, "Running", container="toy")
        ready = eventually(
            lambda: (job := cluster.get(path)) and is_true(job, "Ready") and job, what="Ready"
        )
        assert ready["status"]["endpoint"] == f"http://t-head-0.{namespace}.svc:7070"
        assert not is_true(ready, "Succeeded")
        # The listing follows the running members: rewritten in place.
        eventually(
            lambda: (
                config_map(cluster, namespace, "t-config")["data"]["members"]  # type: ignore[index]
                == f"t-member-0.{namespace}.svc member-0\nt-member-1.{namespace}.svc member-1\n"
            ),
            what="the member listing",
        )

        # The Head starts a helper of its own: a foreign pod, counted, never deleted.
        head_uid = head["metadata"]["uid"]
        cluster.create(
            pods,
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "t-helper-0",
                    "labels": {"kubemill.dev/job-name": "t", "kubemill.dev/replica-type": "helper"},
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": "t-head-0",
                            "uid": head_uid,
                            "controller": True,
                        }
                    ],
                },
                "spec": {"containers": [{"name": "helper", "image": "toy:1"}]},
            },
        )
        kubelet.set("t-helper-0", "Running", container="helper")
        eventually(
            lambda: (
                cluster.get(path)["status"]["replicaStatuses"].get("Helper", {}).get("active") == 1
            ),
            what="the helper counted",
        )
        assert "t-helper-0" in pod_names()

        # A member lost: no longer Ready (2 needed), and the listing drops it.
        kubelet.set("t-member-1", "Failed", container="toy", exit_code=1)
        failed = eventually(
            lambda: (job := cluster.get(path)) and is_true(job, "Failed") and job, what="Failed"
        )
        assert not is_true(failed, "Ready")
        assert "t-helper-0" in pod_names()


def test_render_hides_secret_values_unless_asked(toy_plugin: None, tmp_path: Path) -> None:
    manifest = tmp_path / "toy.yaml"
    manifest.write_text(yaml.safe_dump(toy("s")))
    runner = CliRunner()
    hidden = runner.invoke(app, ["render", str(manifest)])
    assert hidden.exit_code == 0, hidden.output
    secret = next(d for d in yaml.safe_load_all(hidden.output) if d["kind"] == "Secret")
    assert secret["data"] == {"token": ""}
    assert "--show-secrets" in secret["metadata"]["annotations"]["kubemill.dev/redacted"]
    assert "toy-token-of-s" not in hidden.output
    assert base64.b64encode(b"toy-token-of-s\n").decode() not in hidden.output
    shown = runner.invoke(app, ["render", "--show-secrets", str(manifest)])
    assert shown.exit_code == 0, shown.output
    secret = next(d for d in yaml.safe_load_all(shown.output) if d["kind"] == "Secret")
    assert base64.b64decode(secret["data"]["token"]) == b"toy-token-of-s\n"
