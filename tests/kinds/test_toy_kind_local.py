"""A kind that only a plugin knows runs on the local substrate, whole, with no edit elsewhere.

The toy engine (``toy_engine.py``) is registered the way a user registers one
(``KUBEMILL_ENGINES``), so the detached supervisor, a process of its own, knows it too.
Its replicas are real processes that read the delivered files; the job becomes Ready
(a service never succeeds), the member listing follows the running members, and the
status extension reports the Head's endpoint.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "local"))
from local_support import eventually

from kubemill.api import ConditionType
from kubemill.kinds import unregister
from kubemill.sdk import JobClient
from kubemill.substrates.plugins import load_plugins

HERE = Path(__file__).resolve().parent

REPLICA = """
import os, pathlib, time
files = pathlib.Path(os.environ["TOY_FILES"])
print("greeting:", (files / "greeting").read_text().strip(), flush=True)
last = None
while True:
    members = (files / "members").read_text()
    if members != last:
        print("members:", "; ".join(members.split("\\n")).strip("; "), flush=True)
        last = members
    time.sleep(0.05)
"""


def toy(name: str) -> dict[str, Any]:
    def replicas(count: int) -> dict[str, Any]:
        container = {"name": "toy", "image": "python", "command": ["python", "-c", REPLICA]}
        return {"replicas": count, "template": {"spec": {"containers": [container]}}}

    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "ToyCluster",
        "metadata": {"name": name},
        "spec": {
            "greeting": "hi from the plugin",
            "minMembers": 2,
            "toyReplicaSpecs": {"Head": replicas(1), "Member": replicas(2)},
        },
    }


@pytest.fixture
def toy_plugin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("KUBEMILL_ENGINES", "toy_engine:ENGINE")
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", f"{HERE}{os.pathsep}{path}" if path else str(HERE))
    added = load_plugins()
    yield
    for engine in added:
        unregister(engine.kind)


@pytest.mark.parametrize("detach", [False, True], ids=["in-process", "detached-supervisor"])
def test_a_plugin_kind_runs_locally_as_a_service(
    toy_plugin: None, tmp_path: Path, detach: bool
) -> None:
    client = JobClient("local", state_dir=tmp_path / "state")
    name = f"toy-{'d' if detach else 'f'}"
    client.submit(toy(name), detach=detach, base_dir=tmp_path)
    try:
        view = eventually(
            lambda: (v := client.get(name)).status.is_true(ConditionType.READY) and v,
            what="the toy cluster to be Ready",
        )
        assert view.phase == "Ready" and not view.finished
        assert view.status.endpoint.startswith("http://127.0.0.1:")  # type: ignore[attr-defined]

        def head_log() -> str:
            return "\n".join(line.text for line in client.logs(name, replica="head-0"))

        # The replicas read the file set: the static file, and the listing of the members
        # that run, rewritten in place as they came up.
        eventually(lambda: "greeting: hi from the plugin" in head_log(), what="the greeting")
        eventually(
            lambda: "members: 127.0.0.1 member-0; 127.0.0.1 member-1" in head_log(),
            what="the full member listing",
        )
        events = {e.reason for e in client.events(name)}
        assert "SuccessfulCreateConfigMap" in events
        assert "ToyClusterReady" in events
    finally:
        client.delete(name)
    assert name not in {v.name for v in client.list()}
