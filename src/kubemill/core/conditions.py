"""Job condition transitions with Kubeflow training-operator semantics.

One function, :func:`set_condition`, is the only way the reconciler touches
``status.conditions``, so the rules live in one place:

- a condition is replaced, never duplicated; setting it with the same status and reason
  is a no-op (so a reconcile that changes nothing writes nothing), unless the caller
  restates it: a new occurrence of the same state (a second retry while the first's
  Restarting still stands) gets its own message;
- ``lastTransitionTime`` moves only when the status flips, ``lastUpdateTime`` whenever
  the condition is rewritten;
- Running and Restarting replace each other (the job is one or the other);
- Succeeded or Failed turn a True Running (or a service's True Ready) into False;
- Succeeded and Failed are terminal: once either is True nothing changes any more
  (upstream guards Failed only; kubemill guards both so a job has one final verdict);
- the kind's declared vocabulary (:class:`~kubemill.api.ConditionVocabulary`, on its status
  model) is applied here: a condition the kind does not have is never written, and a
  reason the kind words otherwise is written in its words.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from kubemill.api import Condition, ConditionType, JobStatus

ConditionStatus = Literal["True", "False", "Unknown"]

_EXCLUSIVE = frozenset({ConditionType.RUNNING, ConditionType.RESTARTING})
_TERMINAL = frozenset({ConditionType.SUCCEEDED, ConditionType.FAILED})
_ENDED_BY_TERMINAL = frozenset({ConditionType.RUNNING, ConditionType.READY})


def set_condition(
    status: JobStatus,
    kind: ConditionType,
    value: ConditionStatus,
    *,
    reason: str,
    message: str,
    now: datetime,
    restate: bool = False,
) -> bool:
    """Set one condition on ``status`` in place; returns whether anything changed.

    ``restate``: the same status and reason still rewrite the message (and
    ``lastUpdateTime``), for a caller reporting a new occurrence rather than a standing
    state."""
    if status.finished:
        return False
    vocabulary = type(status).VOCABULARY
    if kind in vocabulary.unused:
        return False
    reason = vocabulary.reasons.get(reason, reason)
    current = status.condition(kind)
    same = current is not None and current.status == value and current.reason == reason
    if same and not (restate and current is not None and current.message != message):
        return False
    if current is not None and current.status == value:
        transition = current.last_transition_time
    else:
        transition = now
    updated = Condition(
        type=kind,
        status=value,
        reason=reason,
        message=message,
        last_update_time=now,
        last_transition_time=transition,
    )
    kept: list[Condition] = []
    for cond in status.conditions:
        if cond.type == kind:
            continue
        if kind in _EXCLUSIVE and cond.type in _EXCLUSIVE:
            continue
        if kind in _TERMINAL and cond.type in _ENDED_BY_TERMINAL and cond.status == "True":
            cond = cond.model_copy(
                update={"status": "False", "last_update_time": now, "last_transition_time": now}
            )
        kept.append(cond)
    kept.append(updated)
    status.conditions = kept
    return True


def terminal_time(status: JobStatus) -> datetime | None:
    """When the job finished: ``completionTime``, else when its terminal condition became True."""
    if status.completion_time is not None:
        return status.completion_time
    for kind in (ConditionType.FAILED, ConditionType.SUCCEEDED):
        cond = status.condition(kind)
        if cond is not None and cond.status == "True":
            return cond.last_transition_time
    return None
