"""The TF examples' servers end on their own once the replicas they serve are done.

``examples/cluster_watch.py`` is what lets a PS or worker replica exit where nothing
deletes it (kubemill stops it anyway once the job has succeeded, so the e2e runs never get
to see this path). Tested here against real listening sockets on 127.0.0.1, no engine.
"""

from __future__ import annotations

import importlib.util
import socket
import threading
from collections.abc import Iterator
from types import ModuleType

import pytest

from support.e2e_support import EXAMPLES

pytestmark = pytest.mark.e2e


def load_cluster_watch() -> ModuleType:
    spec = importlib.util.spec_from_file_location("cluster_watch", EXAMPLES / "cluster_watch.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


cluster_watch = load_cluster_watch()


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server
    server.close()


def address(sock: socket.socket) -> str:
    host, port = sock.getsockname()
    return f"{host}:{port}"


def free_address() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return address(s)


def test_reachable_tells_a_listening_port_from_a_closed_one(listener: socket.socket) -> None:
    assert cluster_watch.reachable(address(listener))
    assert not cluster_watch.reachable(free_address())


def test_returns_only_after_the_peers_were_up_and_are_gone(listener: socket.socket) -> None:
    other = socket.socket()
    other.bind(("127.0.0.1", 0))
    other.listen()
    peers = [address(listener), address(other)]
    finished = threading.Event()
    watcher = threading.Thread(
        target=lambda: (
            cluster_watch.wait_until_gone("ps-0", peers, interval=0.05, misses_to_confirm=3),
            finished.set(),
        ),
        daemon=True,
    )
    watcher.start()
    listener.close()
    # One peer still serves: the watcher must keep waiting.
    assert not finished.wait(0.5)
    other.close()
    assert finished.wait(10), "the watcher did not notice that every peer was gone"


def test_gives_up_with_exit_1_when_no_peer_ever_comes_up(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as exited:
        cluster_watch.wait_until_gone(
            "worker-1", [free_address()], wait_for_start=0.3, interval=0.05
        )
    assert exited.value.code == 1
    assert "no peer came up" in capsys.readouterr().out
