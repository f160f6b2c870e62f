"""A kind that only a plugin knows runs on the local substrate, whole, with no edit elsewhere.

The toy engine (``toy_engine.py``) is registered the way a user registers one
(``KUBEMILL_ENGINES``), so the detached supervisor, a process of its own, knows it too.
Its replicas are real processes that read the delivered files; the job becomes Ready
(a service never succeeds), the member listing follows the running members, and the
status extension reports the Head's endpoint.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from toy_engine import manifest

from kubemill.api import ConditionType
from kubemill.sdk import JobClient
from support.waiting import eventually

HERE = Path(__file__).resolve().parent

REPLICA = """
import os, pathlib, time
files = pathlib.Path(os.environ["TOY_FILES"])
print("greeting:", (files / "greeting").read_text().strip(), flush=True)
if os.environ.get("TOY_TOKEN"):
    print("token bytes:", len(pathlib.Path(os.environ["TOY_TOKEN"]).read_bytes()), flush=True)
last = None
while True:
    members = (files / "members").read_text()
    if members != last:
        print("members:", "; ".join(members.split("\\n")).strip("; "), flush=True)
        last = members
    time.sleep(0.05)
"""


def toy(name: str) -> dict[str, Any]:
    return manifest(name, command=["python", "-c", REPLICA], greeting="hi from the plugin")


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
        # The Secret's file: the Head alone reads it; only its owner may.
        expected = len(f"toy-token-of-{name}\n")
        eventually(lambda: f"token bytes: {expected}" in head_log(), what="the token read")
        [token] = (tmp_path / "state").glob(f"jobs/*/{name}-*/files/{name}-token/token")
        assert token.stat().st_mode & 0o777 == 0o600
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
