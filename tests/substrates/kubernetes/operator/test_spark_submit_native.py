"""``kubemill spark-submit --master k8s://... --deploy-mode cluster`` creates what the JVM's does.

Against one strict kmock fixture (server-side apply creates missing objects, schemas
checked), the real JVM ``spark-submit`` of the pyspark wheel and ``kubemill spark-submit``
run with the same arguments into the same namespace. The driver pod, its service, its
NetworkPolicy and its ConfigMap are then read back and compared field by field. Only what
Spark generates per submission may differ, and each is first checked to have Spark's shape
and then replaced by a placeholder: the ``<name>-<16 hex>`` prefix, the ConfigMap's
``spark-drv-<16 hex>``, the ``spark-<32 hex>`` application id, the local directory's UUID,
the submission time (and its date comment line), and what the server assigns (uid,
resourceVersion, creation time, the managers' names and times in managedFields).
``spark.properties`` is compared as properties (Java writes them in hash order).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kubemill.cli.app import app
from support.engines import SPARK_SUBMIT, needs_java, needs_spark_submit
from support.operator_support import Cluster
from support.spark_parity import COMMAND_LINE_IDS, COMMAND_LINES, KINDS, compare

pytestmark = [pytest.mark.engine, needs_spark_submit, needs_java]


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    """A fixture cluster of this module's own: the calls of the two spark-submits are no
    operator's, so they stay out of the operator suite's record (test_rbac reads it)."""
    with Cluster() as served:
        yield served


@pytest.fixture
def no_kubeconfig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """No kubeconfig anywhere: both clients go to the master's URL as it is."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for variable in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "SPARK_USER"):
        monkeypatch.delenv(variable, raising=False)
    return {**os.environ, "PATH": f"{SPARK_SUBMIT.parent}:{os.environ.get('PATH', '')}"}


def snapshot(cluster: Cluster, namespace: str) -> dict[str, dict[str, dict[str, Any]]]:
    return {
        kind: {o["metadata"]["name"]: o for o in cluster.list(path.format(ns=namespace))}
        for kind, path in KINDS.items()
    }


def created(
    cluster: Cluster, namespace: str, before: Mapping[str, Mapping[str, Any]]
) -> dict[str, dict[str, Any]]:
    """The one object of each kind that appeared since ``before``."""
    out = {}
    for kind, objects in snapshot(cluster, namespace).items():
        new = [o for name, o in objects.items() if name not in before[kind]]
        assert len(new) == 1, f"expected one new {kind}, got {[o['metadata']['name'] for o in new]}"
        out[kind] = new[0]
    return out


def submit_with_jvm(cluster: Cluster, argv: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(
        [
            str(SPARK_SUBMIT),
            "--master",
            f"k8s://{cluster.url}",
            "--conf",
            "spark.kubernetes.submission.waitAppCompletion=false",
            *argv,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def submit_with_kubemill(cluster: Cluster, argv: list[str]) -> str:
    result = CliRunner().invoke(
        app,
        [
            "spark-submit",
            "--master",
            f"k8s://{cluster.url}",
            "--conf",
            "spark.kubernetes.submission.waitAppCompletion=false",
            *argv,
        ],
    )
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize(("argv", "clean_name"), COMMAND_LINES, ids=COMMAND_LINE_IDS)
def test_kubemill_creates_what_the_jvm_creates(
    cluster: Cluster,
    namespace: str,
    no_kubeconfig: dict[str, str],
    argv: list[str],
    clean_name: str,
) -> None:
    # Spark's default deploy mode is client (kubemill's, with k8s://, cluster): say it.
    in_namespace = [
        "--deploy-mode",
        "cluster",
        "--conf",
        f"spark.kubernetes.namespace={namespace}",
        *argv,
    ]
    before = snapshot(cluster, namespace)
    submit_with_jvm(cluster, in_namespace, no_kubeconfig)
    jvm = created(cluster, namespace, before)

    before = snapshot(cluster, namespace)
    out = submit_with_kubemill(cluster, in_namespace)
    ours = created(cluster, namespace, before)
    assert f"submission ID {namespace}:{ours['Pod']['metadata']['name']}" in out
    compare(jvm, ours, clean_name)
