"""What the operator's loops (a job's reconcile, a controller's) share about writing: the
status as a JSON merge patch, writes to retry later, and the core's events as Kubernetes
Events (posted once their action succeeded, one per type and reason of a pass).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from kubemill.core import Action, RecordEvent
from kubemill.substrates.kubernetes.operator.kubeapi import ApiError

EventType = Literal["Normal", "Warning"]
EventPoster = Callable[[Mapping[str, Any], EventType, str, str], None]


class RetryLater(Exception):
    """Some writes failed; reconcile the job again after a backoff."""

    def __init__(self, errors: list[ApiError], *, blocked: bool) -> None:
        super().__init__("; ".join(str(e) for e in errors))
        self.errors = errors
        self.blocked = blocked


def merge_patch(old: Any, new: Any) -> Any:
    """The JSON merge patch (RFC 7386) that turns ``old`` into ``new``; ``{}`` if equal."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    patch: dict[str, Any] = {}
    for key in old.keys() - new.keys():
        patch[key] = None
    for key, value in new.items():
        if key not in old:
            patch[key] = value
        elif old[key] != value:
            if isinstance(old[key], dict) and isinstance(value, dict):
                patch[key] = merge_patch(old[key], value)
            else:
                patch[key] = value
    return patch


def coalesce_events(events: Iterable[RecordEvent]) -> list[tuple[EventType, str, str]]:
    """One Event per (type, reason) of a pass, its messages joined in order.

    A pass that creates four pods posts one ``SuccessfulCreatePod`` Event naming the four,
    not four Events: the same decisions for ``kubectl describe``, a third of the requests.
    """
    grouped: dict[tuple[EventType, str], list[str]] = {}
    for event in events:
        grouped.setdefault((event.type, event.reason), []).append(event.message)
    return [(type_, reason, "; ".join(messages)) for (type_, reason), messages in grouped.items()]


def pair_events(
    actions: Iterable[Action],
) -> tuple[list[tuple[Action, list[RecordEvent]]], list[RecordEvent]]:
    """Split the core's actions into (action, its event) steps and the status's own events.

    The core records an action's event right after the action (``CreatePod`` then
    ``SuccessfulCreatePod``); such an event is posted only once its action succeeded.
    Every other event (conditions, restarts) announces the new status and is posted only
    once that status is written.
    """
    steps: list[tuple[Action, list[RecordEvent]]] = []
    status_events: list[RecordEvent] = []
    previous_was_action = False
    for action in actions:
        if isinstance(action, RecordEvent):
            if previous_was_action:
                steps[-1][1].append(action)
            else:
                status_events.append(action)
            previous_was_action = False
        else:
            steps.append((action, []))
            previous_was_action = True
    return steps, status_events
