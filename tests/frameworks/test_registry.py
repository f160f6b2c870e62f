"""The framework registry: dispatch on the job's kind, a clear error for kinds without one."""

from __future__ import annotations

from typing import ClassVar

import pytest
from framework_networks import ClusterNetwork

from kubemill.api import Job, PyTorchJob, TFJob
from kubemill.frameworks import (
    FRAMEWORKS,
    NoFrameworkError,
    PlanError,
    PyTorch,
    TensorFlow,
    framework_for,
    plan_for,
)


def test_every_training_kind_has_its_framework() -> None:
    assert isinstance(FRAMEWORKS["TFJob"], TensorFlow)
    assert isinstance(FRAMEWORKS["PyTorchJob"], PyTorch)
    assert {f.kind for f in FRAMEWORKS.values()} == set(FRAMEWORKS)
    assert framework_for(TFJob.KIND) is FRAMEWORKS["TFJob"]
    assert framework_for(PyTorchJob.KIND) is FRAMEWORKS["PyTorchJob"]


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        FRAMEWORKS["MPIJob"] = TensorFlow()  # type: ignore[index]


class MPIJob(Job):
    """A kind the registry does not know (yet)."""

    KIND: ClassVar[str] = "MPIJob"


def test_plan_for_a_kind_without_framework_names_the_known_kinds() -> None:
    job = MPIJob(metadata={"name": "mpi"})
    with pytest.raises(NoFrameworkError, match=r"no framework plans 'MPIJob'.*PyTorchJob, TFJob"):
        plan_for(job, ClusterNetwork("mpi"))
    assert issubclass(NoFrameworkError, PlanError)
    assert issubclass(NoFrameworkError, LookupError)
