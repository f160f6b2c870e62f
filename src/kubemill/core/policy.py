"""Restart-policy rules shared by the reconciler and by both substrates.

The job-level restart policy (Never, OnFailure, Always, ExitCode) is not what the pod (or
the local process supervisor) is told: ExitCode is decided by the core, so the pod itself
must never restart in place. These two small functions are the single source of that rule.
"""

from __future__ import annotations

from kubemill.api import RestartPolicy

_POD_RESTART_POLICY: dict[RestartPolicy, str] = {
    RestartPolicy.ALWAYS: "Always",
    RestartPolicy.ON_FAILURE: "OnFailure",
    RestartPolicy.NEVER: "Never",
    # The core looks at the exit code and recreates the pod itself, so the kubelet
    # (or the local supervisor) must leave an exited container alone.
    RestartPolicy.EXIT_CODE: "Never",
}


def pod_restart_policy(policy: RestartPolicy) -> str:
    """The pod-level ``restartPolicy`` for a replica's job-level restart policy.

    ``ExitCode`` becomes ``Never``; ``OnFailure``, ``Always`` and ``Never`` pass through.
    The local substrate emulates the kubelet with the same answer: it restarts a process in
    place under ``OnFailure`` (non-zero exit) and ``Always`` (any exit), counting restarts.
    """
    return _POD_RESTART_POLICY[RestartPolicy(policy)]


def is_retryable_exit_code(code: int | None) -> bool:
    """Whether an exit code is worth a retry under ``restartPolicy: ExitCode``.

    1-127 are the program's own verdict (permanent); 128 and above mean the process was
    killed by a signal (128+N: OOM kill, preemption, SIGTERM), which a retry may cure.
    0 is success, never retried. A negative code (how Python reports death by signal N)
    is treated as 128+N. ``None`` (the pod failed without a terminated container, e.g.
    evicted) is retryable, as upstream treats its "no exit code" marker.
    """
    if code is None:
        return True
    if code < 0:
        return True
    return code >= 128
