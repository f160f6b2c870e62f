"""What lets the operator keep a job's plan across its own status write
(:meth:`~kubemill.substrates.kubernetes.operator.loaded.LoadedJobs.status_written`): no
engine plans from a job's status. Each example job is planned, given the status the core
decides on its first pass (what the operator writes), and planned again: the same plan."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from kubemill.core import Observed, reconcile
from kubemill.kinds import is_controller, lifecycle_for, load_document
from kubemill.substrates.kubernetes.render import plan_on_kubernetes, reconcile_options

EXAMPLES = sorted((Path(__file__).parents[4] / "examples").glob("**/*.yaml"))
_ADDRESS = re.compile(r" at 0x[0-9a-f]+>")


def _shown(plan: object) -> str:
    """The plan's repr without object addresses: a status extension is a closure made
    anew by each planning, the same function of the same values."""
    return _ADDRESS.sub(">", repr(plan))


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_a_plan_is_the_same_whatever_the_status_of_the_job(path: Path) -> None:
    for document in yaml.safe_load_all(path.read_text()):
        job, errors = load_document(document)
        assert job is not None, errors
        if is_controller(job.KIND):
            continue  # it creates jobs, not pods: no plan
        plan = plan_on_kubernetes(job)
        assert _shown(plan_on_kubernetes(job)) == _shown(plan)  # planning is repeatable
        result = reconcile(
            job,
            plan,
            Observed(),
            datetime.now(UTC),
            options=reconcile_options(None),
            lifecycle=lifecycle_for(job.KIND),
        )
        assert result.status != job.status  # the status the operator writes first
        written = job.model_copy(update={"status": result.status})
        assert _shown(plan_on_kubernetes(written)) == _shown(plan)
