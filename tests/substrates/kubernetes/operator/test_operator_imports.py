"""The operator process never imports the ``kubernetes`` package (issue 21): its requests,
its kopf login and its leader election go through kubemill's own HTTP client.

The real operator runs against the test API server with a ``sitecustomize`` on its path
that reports, on the way out (SIGTERM), the modules it imported; in between it leads (a
Lease), reconciles a job to ``Created`` and posts its Events. What is asserted is which
modules were imported, never how much memory that took (that is bench/operator_throughput.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.operator_jobs import tfjob
from support.operator_support import Operator, is_true, job_path, running_cluster
from support.waiting import eventually

REPORT = """\
import atexit, json, os, sys

def _report():
    with open(os.environ["KUBEMILL_TEST_MODULES"], "w") as out:
        json.dump(sorted(m for m, v in sys.modules.items() if v is not None), out)

atexit.register(_report)
"""


def test_the_operator_process_never_imports_the_kubernetes_package(tmp_path: Path) -> None:
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(REPORT)
    report = tmp_path / "modules.json"
    path = os.pathsep.join(p for p in (str(probe), os.environ.get("PYTHONPATH", "")) if p)
    with running_cluster() as cluster:
        cluster.create("/api/v1/namespaces", {"metadata": {"name": "kubemill-system"}})
        namespace = cluster.namespace()
        operator = Operator(
            cluster,
            tmp_path,
            "--all-namespaces",
            "--leader-election",
            "--lease-namespace=kubemill-system",
            env={"PYTHONPATH": path, "KUBEMILL_TEST_MODULES": str(report)},
        )
        try:
            operator.start()
            cluster.create(job_path("TFJob", namespace), tfjob("one", workers=1))
            eventually(
                lambda: is_true(cluster.get(job_path("TFJob", namespace, "one")), "Created"),
                what="Created",
            )
            eventually(lambda: operator.probe()["kubemill"]["leading"], what="leading")
        finally:
            operator.stop()
    assert operator.process is not None and operator.process.returncode == 0, operator.log()
    modules = set(json.loads(report.read_text()))
    assert "kopf" in modules and "kubemill.substrates.kubernetes.operator.leader" in modules
    assert sorted(m for m in modules if m.partition(".")[0] in ("kubernetes", "urllib3")) == []
