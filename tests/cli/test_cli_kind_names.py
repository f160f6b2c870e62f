"""How ``kubemill get NAME`` tells a kind from a job's name (``kubemill.kinds.kind_named``):
as kubectl does, by the kind's plural, singular, short names and its own name, in any case,
alone or qualified by a group the kind is accepted in (kubemill's own or an upstream one the
operator can serve); anything else names a job.
"""

from __future__ import annotations

import pytest

from kubemill.kinds import kind_named


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("pytorchjobs", "PyTorchJob"),
        ("PyTorchJob", "PyTorchJob"),
        ("tfj", "TFJob"),
        ("pytorchjobs.kubemill.dev", "PyTorchJob"),
        ("pytorchjobs.kubeflow.org", "PyTorchJob"),
        ("PyTorchJob.kubeflow.org", "PyTorchJob"),
        ("rayclusters.ray.io", "RayCluster"),
        ("rayjobs.ray.io", "RayJob"),
        ("rayclusters.kubemill.dev", "RayCluster"),
    ],
)
def test_a_kind_is_named_alone_or_qualified_by_a_group_it_is_accepted_in(
    name: str, kind: str
) -> None:
    assert kind_named(name) == kind


@pytest.mark.parametrize(
    "name", ["my-job", "pytorchjobs.ray.io", "rayclusters.kubeflow.org", "rayclusters.ray"]
)
def test_anything_else_names_a_job(name: str) -> None:
    assert kind_named(name) is None
