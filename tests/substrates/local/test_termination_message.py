"""``terminationMessagePolicy: FallbackToLogsOnError`` locally: a failed run's last log
lines (both streams, at most 80 lines and 2 KiB) are its termination message, which the
core puts in the job's failure message, as the kubelet's terminated.message is on a
cluster. Without the policy the message names the exit only."""

from __future__ import annotations

from pathlib import Path

import pytest
from local_support import container, pytorch_job

from kubemill.api import ConditionType
from kubemill.substrates.base import SubmitOptions
from kubemill.substrates.local import LocalBackend
from kubemill.substrates.local.log_reads import TERMINATION_BYTES, TERMINATION_LINES

NOISY_FAILURE = (
    "import sys\n"
    "for i in range({lines}):\n"
    "    print(f'line {{i}} ' + 'x' * {width}, flush=True)\n"
    "sys.stderr.write('ValueError: the input is missing\\n')\n"
    "sys.exit(1)\n"
)


def failure_message(backend: LocalBackend, tmp_path: Path, code: str, *, policy: str | None) -> str:
    extra = {} if policy is None else {"terminationMessagePolicy": policy}
    job = pytorch_job("tail", master=container(code, **extra))
    view = backend.submit(job, SubmitOptions(detach=False, base_dir=str(tmp_path)))
    done = backend.wait(view.name, timeout=120)
    failed = done.status.condition(ConditionType.FAILED)
    assert failed is not None and failed.status == "True", done.status
    return failed.message


@pytest.mark.parametrize(("lines", "width"), [(3, 10), (200, 10), (20, 300)])
def test_a_failed_run_s_log_tail_is_in_the_failure_message(
    backend: LocalBackend, tmp_path: Path, lines: int, width: int
) -> None:
    message = failure_message(
        backend,
        tmp_path,
        NOISY_FAILURE.format(lines=lines, width=width),
        policy="FallbackToLogsOnError",
    )
    assert "master-0 exited with code 1 (Error): " in message
    tail = message.split("(Error): ", 1)[1]
    # The last line, from stderr, after the stdout lines before it.
    assert "ValueError: the input is missing" in tail
    assert f"line {lines - 1} " in tail
    # The kubelet's bounds: no more lines and bytes than it keeps.
    assert len(tail.encode()) <= TERMINATION_BYTES + len(".")
    assert tail.count("\n") < TERMINATION_LINES
    if lines > TERMINATION_LINES or lines * width > TERMINATION_BYTES:
        assert "line 0 " not in tail


def test_without_the_policy_the_message_names_the_exit_only(
    backend: LocalBackend, tmp_path: Path
) -> None:
    message = failure_message(
        backend, tmp_path, NOISY_FAILURE.format(lines=3, width=10), policy=None
    )
    assert "master-0 exited with code 1" in message
    assert "the input is missing" not in message


def test_a_log_that_cannot_be_read_gives_no_message(tmp_path: Path) -> None:
    from kubemill.substrates.local.log_reads import termination_tail

    assert termination_tail("gone", tmp_path / "missing" / "gone.log") == ""
