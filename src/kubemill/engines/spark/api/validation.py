"""The checks of a SparkApplication spec, shared by SparkApplication and a
ScheduledSparkApplication's template: upstream's CRD and webhook checks, kubemill's own,
the restart policy's ignored fields and the names the services are derived from.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from kubemill.api.errors import FieldError, child_path, did_you_mean
from kubemill.engines.spark.api.spec import (
    DENIED_SPARK_CONF,
    SparkApplicationSpec,
    SparkPodSpec,
    SparkRestartPolicy,
    SparkRestartPolicyType,
    conf_int,
)

_DNS_1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def spec_errors(spec: SparkApplicationSpec, root: str, *, namespace: str) -> list[FieldError]:
    """Everything wrong with a SparkApplication spec at ``root`` (``spec`` or
    ``spec.template``), as upstream's CRD and webhook say it, plus kubemill's checks."""
    errors = _required_errors(spec, root)
    if spec.node_selector and (spec.driver.node_selector or spec.executor.node_selector):
        errors.append(
            FieldError(
                f"{root}.nodeSelector",
                "node selectors are given both for the application and in driver/executor",
                f"keep one: {root}.nodeSelector for both pods, or "
                f"{root}.driver.nodeSelector and {root}.executor.nodeSelector",
            )
        )
    errors += _template_errors(spec, root)
    errors += _spark_conf_errors(spec.spark_conf or {}, root, namespace)
    errors += _allocation_errors(spec, root)
    errors += _mount_errors(spec, root)
    return errors


def _required_errors(spec: SparkApplicationSpec, root: str) -> list[FieldError]:
    errors: list[FieldError] = []
    if spec.type is None:
        errors.append(
            FieldError(
                f"{root}.type",
                "required field is missing",
                "the application's language: Scala, Java, Python or R",
            )
        )
    if not spec.spark_version:
        errors.append(
            FieldError(
                f"{root}.sparkVersion",
                "required field is missing",
                'the Spark version of the image, e.g. "4.0.0"',
            )
        )
    if not spec.main_application_file:
        errors.append(
            FieldError(
                f"{root}.mainApplicationFile",
                "required field is missing",
                "the application's jar, Python or R file, e.g. "
                "local:///opt/spark/examples/src/main/python/pi.py",
            )
        )
    if not spec.image and not (spec.driver.image and spec.executor.image):
        missing = [r for r in ("driver", "executor") if not getattr(spec, r).image]
        errors.append(
            FieldError(
                f"{root}.image",
                f"required field is missing (the {' and '.join(missing)} would have no image)",
                f"name the Spark image here, or in both {root}.driver.image and "
                f"{root}.executor.image",
            )
        )
    return errors


def _version(text: str) -> tuple[int, ...] | None:
    match = re.match(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", text.strip())
    if match is None:
        return None
    return tuple(int(part or 0) for part in match.groups())


def _template_errors(spec: SparkApplicationSpec, root: str) -> list[FieldError]:
    """Pod templates need Spark 3.0.0 or later (upstream's webhook)."""
    version = _version(spec.spark_version or "")
    if version is None or version >= (3, 0, 0):
        return []
    return [
        FieldError(
            f"{root}.{role}.template",
            f"pod templates need Spark 3.0.0 or later; sparkVersion is {spec.spark_version!r}",
            "use the driver/executor fields instead, or a Spark 3 image",
        )
        for role in ("driver", "executor")
        if getattr(spec, role).template is not None
    ]


def _spark_conf_errors(conf: Mapping[str, str], root: str, namespace: str) -> list[FieldError]:
    errors: list[FieldError] = []
    field = f"{root}.sparkConf"
    for key, value in conf.items():
        if key in DENIED_SPARK_CONF:
            errors.append(
                FieldError(child_path(field, key), "not allowed here", DENIED_SPARK_CONF[key])
            )
        elif key == "spark.kubernetes.namespace" and value != namespace:
            errors.append(
                FieldError(
                    child_path(field, key),
                    f"{value!r} is not the application's namespace {namespace!r}",
                    "remove it: the application runs in its own namespace",
                )
            )
    return errors


_ALLOCATION_KEYS = {
    "min": "spark.dynamicAllocation.minExecutors",
    "max": "spark.dynamicAllocation.maxExecutors",
    "initial": "spark.dynamicAllocation.initialExecutors",
    "instances": "spark.executor.instances",
}


def _allocation_errors(spec: SparkApplicationSpec, root: str) -> list[FieldError]:
    """Dynamic allocation's bounds, merged from the field and sparkConf as upstream's
    webhook merges them, each error at the field or sparkConf key that set the value."""
    conf = spec.spark_conf or {}
    conf_field = f"{root}.sparkConf"
    errors: list[FieldError] = []
    enabled_text = conf.get("spark.dynamicAllocation.enabled")
    conf_enabled = False
    if enabled_text is not None:
        if enabled_text.strip().lower() not in ("true", "false"):
            errors.append(
                FieldError(
                    child_path(conf_field, "spark.dynamicAllocation.enabled"),
                    f"{enabled_text!r} is not a boolean",
                    'write "true" or "false"',
                )
            )
        conf_enabled = enabled_text.strip().lower() == "true"
    alloc = spec.dynamic_allocation
    field_enabled = alloc is not None and alloc.enabled
    if not field_enabled and not conf_enabled:
        return errors
    values: dict[str, tuple[int | None, str]] = {}
    for name, key in _ALLOCATION_KEYS.items():
        path = child_path(conf_field, key)
        text = conf.get(key)
        number = conf_int(conf, key)
        if text is not None and number is None:
            errors.append(FieldError(path, f"{text!r} is not a whole number", 'e.g. "2"'))
        values[name] = (number, path)
    if alloc is not None and field_enabled:
        for name, value in (
            ("min", alloc.min_executors),
            ("max", alloc.max_executors),
            ("initial", alloc.initial_executors),
        ):
            if value is not None:
                values[name] = (value, f"{root}.dynamicAllocation.{name}Executors")
    if spec.executor.instances is not None:
        values["instances"] = (spec.executor.instances, f"{root}.executor.instances")
    low, low_path = values["min"]
    high, high_path = values["max"]
    if low is not None and low < 0:
        errors.append(FieldError(low_path, f"must be >= 0, got {low}"))
        low = None
    if high is not None and high < 1:
        errors.append(FieldError(high_path, f"must be >= 1, got {high}"))
        return errors
    if high is None:
        return errors
    if low is not None and low > high:
        errors.append(
            FieldError(
                low_path,
                f"{low} is above the maximum {high} ({high_path})",
                "make minExecutors <= maxExecutors",
            )
        )
        return errors
    starts = [(v, p) for v, p in (values["min"], values["initial"], values["instances"]) if v]
    if starts:
        first, first_path = max(starts, key=lambda item: item[0])
        if first > high:
            errors.append(
                FieldError(
                    first_path,
                    f"Spark would start {first} executors, above the maximum {high} ({high_path})",
                    "the initial executors are the largest of minExecutors, initialExecutors "
                    "and executor.instances; keep it <= maxExecutors",
                )
            )
    return errors


def _mount_errors(spec: SparkApplicationSpec, root: str) -> list[FieldError]:
    """A volume mount must name a volume of ``spec.volumes`` (or of the role's template):
    Kubernetes refuses the pod otherwise."""
    errors: list[FieldError] = []
    declared = {v.get("name") for v in spec.volumes or [] if isinstance(v, Mapping)}
    for role_name in ("driver", "executor"):
        role: SparkPodSpec = getattr(spec, role_name)
        template_volumes = ((role.template or {}).get("spec") or {}).get("volumes") or []
        names = declared | {v.get("name") for v in template_volumes if isinstance(v, Mapping)}
        for i, mount in enumerate(role.volume_mounts or []):
            name = mount.get("name") if isinstance(mount, Mapping) else None
            if name not in names:
                errors.append(
                    FieldError(
                        f"{root}.{role_name}.volumeMounts[{i}].name",
                        f"no volume named {name!r} in {root}.volumes",
                        did_you_mean(str(name), [str(n) for n in names if n])
                        or f"declare it in {root}.volumes",
                    )
                )
    return errors


def restart_policy_refusals(policy: SparkRestartPolicy, field: str) -> list[FieldError]:
    """Retry counts under a policy type that never reads them: Never re-runs nothing,
    Always re-runs without limit."""
    kind = policy.type or SparkRestartPolicyType.NEVER
    if kind is SparkRestartPolicyType.ON_FAILURE:
        return []
    ignored = ["onFailureRetries", "onSubmissionFailureRetries"]
    if kind is SparkRestartPolicyType.NEVER:
        ignored += ["onFailureRetryInterval", "onSubmissionFailureRetryInterval"]
    written = policy.model_dump(by_alias=True, exclude_none=True)
    what = "re-runs nothing" if kind is SparkRestartPolicyType.NEVER else "re-runs without limit"
    return [
        FieldError(
            f"{field}.{name}",
            f"would be ignored: restartPolicy {kind.value} {what}",
            "set type: OnFailure to limit the re-runs, or remove it",
        )
        for name in ignored
        if name in written
    ]


def name_errors(name: str, longest: int, what: str) -> list[FieldError]:
    """``name`` must be a DNS-1035 label short enough for the services derived from it
    (upstream's webhook checks the label; the loader checks DNS-1123 and reports that)."""
    if not name or not _DNS_1123.match(name):
        return []
    if not _DNS_1035.match(name):
        return [
            FieldError(
                "metadata.name",
                f"{name!r} must start with a letter: it names the application's services",
                "start the name with a lowercase letter",
            )
        ]
    if len(name) > longest:
        return [
            FieldError(
                "metadata.name",
                f"{name!r} is {len(name)} characters, over the {longest} allowed{what}",
                f"shorten the name to at most {longest} characters",
            )
        ]
    return []
