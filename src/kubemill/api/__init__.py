"""Job kinds as typed models: shared vocabulary, each kind's API, loading and validation.

Loading takes a kind table (:class:`KindTable`); :mod:`kubemill.kinds` binds it to the
registered kinds, so load manifests with ``kubemill.kinds.load``/``load_one``.

The public surface of the API layer; everything else in this package is private.

The names below load on first use, not when a submodule is imported: importing
``kubemill.api.cron`` (or an engine's API module that needs no models, as ``kubemill
spark-submit``'s fast path does) does not load the job models (pydantic).

Each kind's own API lives in its engine's folder (``kubemill.engines.<engine>.api``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubemill.api.clusters import ClusterOptions
    from kubemill.api.common import (
        API_VERSION,
        GROUP,
        STOP_ANNOTATION,
        VERSION,
        CleanPodPolicy,
        Condition,
        ConditionType,
        ConditionVocabulary,
        Job,
        JobStatus,
        Metric,
        ReplicaSpec,
        ReplicaStatus,
        RestartPolicy,
        RunPolicy,
        SchedulingPolicy,
        TrainerStatus,
        WordedStatus,
    )
    from kubemill.api.cron import CronError, CronSchedule, parse_cron
    from kubemill.api.errors import FieldError, ManifestError
    from kubemill.api.kinds import ApiVersion, KindApi, KindTable
    from kubemill.api.kube import (
        Container,
        ContainerPort,
        EnvVar,
        EnvVarSource,
        ObjectFieldSelector,
        ObjectMeta,
        PodSpec,
        PodTemplateSpec,
    )
    from kubemill.api.runstates import ApplicationStateType

__all__ = [
    "API_VERSION",
    "GROUP",
    "STOP_ANNOTATION",
    "VERSION",
    "ApiVersion",
    "ApplicationStateType",
    "CleanPodPolicy",
    "ClusterOptions",
    "Condition",
    "ConditionType",
    "ConditionVocabulary",
    "Container",
    "ContainerPort",
    "CronError",
    "CronSchedule",
    "EnvVar",
    "EnvVarSource",
    "FieldError",
    "Job",
    "JobStatus",
    "KindApi",
    "KindTable",
    "ManifestError",
    "Metric",
    "ObjectFieldSelector",
    "ObjectMeta",
    "PodSpec",
    "PodTemplateSpec",
    "ReplicaSpec",
    "ReplicaStatus",
    "RestartPolicy",
    "RunPolicy",
    "SchedulingPolicy",
    "TrainerStatus",
    "WordedStatus",
    "parse_cron",
]


_WHERE = {
    "API_VERSION": "common",
    "ApiVersion": "kinds",
    "ApplicationStateType": "runstates",
    "CleanPodPolicy": "common",
    "ClusterOptions": "clusters",
    "Condition": "common",
    "ConditionType": "common",
    "ConditionVocabulary": "common",
    "Container": "kube",
    "ContainerPort": "kube",
    "CronError": "cron",
    "CronSchedule": "cron",
    "EnvVar": "kube",
    "EnvVarSource": "kube",
    "FieldError": "errors",
    "GROUP": "common",
    "Job": "common",
    "JobStatus": "common",
    "KindApi": "kinds",
    "KindTable": "kinds",
    "ManifestError": "errors",
    "Metric": "common",
    "ObjectFieldSelector": "kube",
    "ObjectMeta": "kube",
    "PodSpec": "kube",
    "PodTemplateSpec": "kube",
    "ReplicaSpec": "common",
    "ReplicaStatus": "common",
    "RestartPolicy": "common",
    "RunPolicy": "common",
    "STOP_ANNOTATION": "common",
    "SchedulingPolicy": "common",
    "TrainerStatus": "common",
    "VERSION": "common",
    "WordedStatus": "common",
    "parse_cron": "cron",
}
"""Each public name's module, in this package: only that one loads on first use (``Job``
needs neither the cron parser nor the kind tables)."""


if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """A public name, from the submodule that holds it (loaded now, once)."""
        match _WHERE.get(name):
            case "clusters":
                from kubemill.api import clusters as home
            case "common":
                from kubemill.api import common as home
            case "cron":
                from kubemill.api import cron as home
            case "errors":
                from kubemill.api import errors as home
            case "kinds":
                from kubemill.api import kinds as home
            case "kube":
                from kubemill.api import kube as home
            case "runstates":
                from kubemill.api import runstates as home
            case _:
                raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(home, name)
        globals()[name] = value
        return value
