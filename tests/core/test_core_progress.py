"""The core turns progress reports into ``trainerStatus``: whose report, its shape, the rate.

Reconciles run with Plans built by hand (``corekit``) and reports given as observed, so
every rule is checked without a process or a clock.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from datetime import timedelta

from corekit import all_pods, at, plan_for, pytorchjob, with_status

from kubemill.core import Observed, ObservedProgress, ReconcileOptions, reconcile
from kubemill.core.progress import INT32_MAX, trainer_status
from kubemill.kinds import lifecycle_for

INTERVAL = timedelta(seconds=2)


def report(pod: str, seconds: float, step: int, **metrics: float) -> ObservedProgress:
    return ObservedProgress(
        pod=pod,
        time=at(seconds),
        step=step,
        total=10,
        metrics=tuple(sorted(metrics.items())),
        origin=(at(0), 0),
    )


def test_the_status_has_kubeflow_trainers_shape_from_the_first_replica_in_plan_order() -> None:
    job = pytorchjob(name="p", workers=1)
    plan = plan_for(job)
    master, worker = (rep.name for rep in plan.replicas)
    observed = Observed(
        pods=all_pods(plan),
        # The worker reported later and further: the master's numbers are still the ones.
        progress=(report(worker, 9, 6, loss=9.0), report(master, 8, 4, loss=0.23456789)),
    )
    result = reconcile(job, plan, observed, at(8.5), lifecycle=lifecycle_for(job.KIND))
    shown = result.status.trainer_status
    assert shown is not None
    wire = result.status.to_wire()["trainerStatus"]
    assert wire == {
        "progressPercentage": 40,
        # 4 steps in 8 s: 6 steps left take 12 s.
        "estimatedRemainingSeconds": 12,
        "metrics": [{"name": "loss", "value": "0.234568"}],
        "lastUpdatedTime": wire["lastUpdatedTime"],
        "step": 4,
        "total": 10,
    }
    assert shown.last_updated_time == at(8.5)


def test_writes_are_bounded_and_the_latest_report_waits_for_its_turn() -> None:
    """A report every 0.1 s for 10 s: the status changes at most once per interval, every
    change shows the latest report, and the one held back is asked to be looked at again."""
    pod = "p-master-0"
    previous = None
    writes = []
    for tick in range(1, 101):
        now = at(tick / 10)
        status, wait = trainer_status(
            previous, [report(pod, tick / 10, tick)], [pod], now, interval=INTERVAL, final=False
        )
        if status is not previous:
            assert status is not None and status.step == tick
            writes.append(now)
        else:
            assert wait is not None and now + wait == writes[-1] + INTERVAL
        previous = status
    # The first at once (0.1 s), then one every 2 s: 2.1, 4.1, 6.1 and 8.1 s.
    assert [round((w - at(0)).total_seconds(), 1) for w in writes] == [0.1, 2.1, 4.1, 6.1, 8.1]
    assert all(b - a >= INTERVAL for a, b in itertools.pairwise(writes))


def test_the_end_of_a_job_writes_the_last_report_at_once_and_a_repeat_is_not_a_write() -> None:
    pod = "p-master-0"
    first, _ = trainer_status(
        None, [report(pod, 1, 1)], [pod], at(1), interval=INTERVAL, final=False
    )
    held, wait = trainer_status(
        first, [report(pod, 1.5, 2)], [pod], at(1.5), interval=INTERVAL, final=False
    )
    assert held is first and wait == timedelta(seconds=1.5)
    last, wait = trainer_status(
        first, [report(pod, 1.5, 2)], [pod], at(1.6), interval=INTERVAL, final=True
    )
    assert last is not None and last.step == 2 and wait is None
    again, wait = trainer_status(
        last, [report(pod, 1.5, 2)], [pod], at(9), interval=INTERVAL, final=True
    )
    assert again is last and wait is None


def test_no_report_keeps_what_was_written_and_eta_needs_a_speed() -> None:
    pod = "p-master-0"
    kept, _ = trainer_status(None, [], [pod], at(1), interval=INTERVAL, final=False)
    assert kept is None
    only_one = replace(report(pod, 0, 0), origin=(at(0), 0))
    status, _ = trainer_status(None, [only_one], [pod], at(1), interval=INTERVAL, final=False)
    assert status is not None
    assert status.progress_percentage == 0 and status.estimated_remaining_seconds is None
    slow = replace(report(pod, 10**9, 1), total=10**6)
    status, _ = trainer_status(None, [slow], [pod], at(1), interval=INTERVAL, final=False)
    assert status is not None and status.estimated_remaining_seconds == INT32_MAX
    kept, _ = trainer_status(status, [], [pod], at(99), interval=INTERVAL, final=True)
    assert kept is status


def test_a_pass_with_a_held_report_asks_to_run_again_when_it_is_due() -> None:
    job = pytorchjob(name="p", workers=0)
    plan = plan_for(job)
    pod = plan.replicas[0].name
    options = ReconcileOptions(progress_interval=INTERVAL)
    lifecycle = lifecycle_for(job.KIND)
    first = reconcile(
        job,
        plan,
        Observed(pods=all_pods(plan), progress=(report(pod, 1, 1),)),
        at(1),
        options=options,
        lifecycle=lifecycle,
    )
    job = with_status(job, first.status)
    second = reconcile(
        job,
        plan,
        Observed(pods=all_pods(plan), progress=(report(pod, 1.5, 2),)),
        at(1.5),
        options=options,
        lifecycle=lifecycle,
    )
    assert second.status.trainer_status == first.status.trainer_status
    assert second.requeue_after == timedelta(seconds=1.5)
