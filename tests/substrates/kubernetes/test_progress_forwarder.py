"""The progress forwarder of a job pod's sidecar (:mod:`kubemill.progress`, standard library):
how it reads the file, what state it sends, and how it bears an operator that is away."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kubemill.progress import FORWARD_FINAL_TRIES, MAX_LINE, Follower, forward, merge, validate

JOB = {"apiVersion": "kubemill.dev/v1", "kind": "PyTorchJob", "namespace": "ns", "name": "j"}


def _line(**report: Any) -> dict[str, Any]:
    return validate(report)


def test_a_report_updates_what_it_names_and_a_lower_step_starts_a_new_run() -> None:
    state = merge(None, _line(step=2, total=10, loss=1.0, time=100.0), read_at=999.0)
    assert state == {
        "step": 2,
        "total": 10,
        "time": 100.0,
        "metrics": {"loss": 1.0},
        "origin": [100.0, 2],
    }
    state = merge(state, _line(accuracy=0.5), read_at=150.0)  # no step: the step's time stays
    assert (state["step"], state["time"], state["total"]) == (2, 100.0, 10)
    assert state["metrics"] == {"loss": 1.0, "accuracy": 0.5}
    state = merge(state, _line(step=5), read_at=200.0)  # no time: the reader's
    assert (state["step"], state["time"], state["origin"]) == (5, 200.0, [100.0, 2])
    state = merge(state, _line(step=1), read_at=300.0)  # restarted: its speed starts again
    assert (state["step"], state["origin"]) == (1, [300.0, 1])


def test_the_follower_reads_whole_lines_skips_bad_ones_and_survives_a_missing_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "reports.jsonl"
    follower = Follower(str(path))
    follower.poll()
    assert follower.state is None  # not written yet
    path.write_bytes(b'{"step": 1, "total": 4}\n{"step": 2')
    follower.poll()
    assert follower.state is not None and follower.state["step"] == 1  # half a line waits
    with path.open("ab") as stream:
        stream.write(b', "loss": 0.5}\nnot json\n{"step": "x"}\n')
        stream.write(b'{"loss": ' + b"1" * MAX_LINE + b"}\n")
        stream.write(b'{"step": 3}\n')
    follower.poll()
    assert (follower.state["step"], follower.state["metrics"]) == (3, {"loss": 0.5})
    assert follower.skipped == 3
    path.write_bytes(b'{"step": 0}\n')  # truncated (a new run of the program): read again
    follower.poll()
    assert follower.state["step"] == 0


class _Operator(http.server.BaseHTTPRequestHandler):
    """Answers each POST with the next of ``answers`` (then 202), keeping what was sent."""

    answers: list[int]
    received: list[tuple[int, str, dict[str, Any]]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        status = self.answers.pop(0) if self.answers else 202
        self.received.append((status, self.headers.get("Authorization", ""), body))
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def operator() -> Iterator[tuple[str, type[_Operator]]]:
    handler = type("Handler", (_Operator,), {"answers": [], "received": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/progress", handler
    finally:
        server.shutdown()
        server.server_close()


def _run(url: str, tmp_path: Path, steps: list[Any], **options: Any) -> list[str]:
    """Run :func:`forward` over a file fed by ``steps`` (a callable or a line, one per loop,
    then stop); what it said."""
    path = tmp_path / "reports.jsonl"
    token = tmp_path / "token"
    token.write_text("secret-token\n")
    said: list[str] = []
    pending = list(steps)

    def stopping() -> bool:
        if not pending:
            return True
        step = pending.pop(0)
        if callable(step):
            step()
        elif step is not None:
            with path.open("a") as stream:
                stream.write(json.dumps(step) + "\n")
        return False

    code = forward(
        url,
        path=str(path),
        token_file=str(token),
        job=JOB,
        stopping=stopping,
        interval=0.0,
        poll_every=0.0,
        log=said.append,
        **options,
    )
    assert code == 0
    return said


def test_each_new_state_is_sent_once_with_the_token(
    operator: tuple[str, type[_Operator]], tmp_path: Path
) -> None:
    url, handler = operator
    _run(url, tmp_path, [None, {"step": 1, "total": 3}, None, None, {"loss": 0.5}, None])
    bodies = [body for _, _, body in handler.received]
    assert {h for _, h, _ in handler.received} == {"Bearer secret-token"}
    assert [b["report"]["step"] for b in bodies] == [1, 1]  # unchanged states not sent again
    assert bodies[-1] == {**JOB, "report": {**bodies[-1]["report"], "metrics": {"loss": 0.5}}}


def test_a_refusing_or_absent_operator_is_tried_again_and_the_newest_state_wins(
    operator: tuple[str, type[_Operator]], tmp_path: Path
) -> None:
    url, handler = operator
    handler.answers = [503, 503, 500]
    steps: list[Any] = [{"step": 1, "total": 3}, {"step": 2}, *[None] * 40]
    said = _run(url, tmp_path, steps, max_backoff=0.0)
    sent = [(status, body["report"]["step"]) for status, _, body in handler.received]
    assert sent[:3] == [(503, 1), (503, 2), (500, 2)]
    assert sent[3:] == [(202, 2)]
    assert said == [
        "the operator answered 503; trying again",
        "the operator answered 500; trying again",
        "the operator takes reports again",
    ]
    assert all("secret-token" not in line for line in said)


def test_the_last_report_is_tried_a_bounded_number_of_times_when_stopping(
    operator: tuple[str, type[_Operator]], tmp_path: Path
) -> None:
    url, handler = operator
    handler.answers = [503] * 100  # never taken: the forwarder still ends
    _run(url, tmp_path, [{"step": 1}], max_backoff=0.0)
    assert len(handler.received) == 1 + FORWARD_FINAL_TRIES  # once running, then the last tries


def test_an_operator_that_does_not_answer_is_said_once(tmp_path: Path) -> None:
    said = _run("http://127.0.0.1:9/progress", tmp_path, [{"step": 1}, None], max_backoff=0.0)
    assert said == ["the operator does not answer; trying again"]


def test_without_a_token_it_waits_for_the_kubelet_to_mount_one(
    operator: tuple[str, type[_Operator]], tmp_path: Path
) -> None:
    url, handler = operator
    token = tmp_path / "token"
    steps: list[Any] = [token.unlink, {"step": 1}, None, lambda: token.write_text("t2"), None]
    said = _run(url, tmp_path, steps, max_backoff=0.0)
    assert said == ["no token to send yet; trying again", "the operator takes reports again"]
    assert [h for _, h, _ in handler.received] == ["Bearer t2"]
