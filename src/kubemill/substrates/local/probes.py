"""A container's exec ``readinessProbe`` as the local kubelet takes it: the probe's settings
(:class:`ExecProbe`, Kubernetes' defaults) read from the container with field paths
(:func:`exec_probe`). :class:`~.prober.Prober` runs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubemill.api import FieldError
from kubemill.substrates.local.expansion import expand


@dataclass(frozen=True)
class ExecProbe:
    """An exec probe as the kubelet runs it: ``argv`` in the container's environment and
    working directory, every ``period`` seconds from ``initial_delay`` after the start,
    failed past ``timeout``; ``success_threshold`` passes in a row make it pass,
    ``failure_threshold`` failures in a row make it fail. Kubernetes' defaults."""

    argv: tuple[str, ...]
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3


_PROBE_FIELDS = {
    "initialDelaySeconds": ("initial_delay", 0),
    "periodSeconds": ("period", 1),
    "timeoutSeconds": ("timeout", 1),
    "successThreshold": ("success_threshold", 1),
    "failureThreshold": ("failure_threshold", 1),
}


def exec_probe(
    probe: Mapping[str, Any] | None, path: str, declared: Mapping[str, str]
) -> tuple[ExecProbe | None, list[FieldError]]:
    """The exec probe of a container's ``readinessProbe`` (``$(VAR)`` expanded from the
    container's env, as the kubelet does). Other handlers (httpGet, tcpSocket, grpc) are
    not run locally: such a pod is ready while its process runs, as before probes."""
    if not probe or "exec" not in probe:
        return None, []
    command = (probe.get("exec") or {}).get("command")
    if not isinstance(command, list) or not command or not all(isinstance(w, str) for w in command):
        return None, [
            FieldError(
                f"{path}.exec.command",
                "expected a non-empty list of strings",
                'e.g. command: ["test", "-f", "/tmp/ready"]',
            )
        ]
    values: dict[str, int] = {}
    errors: list[FieldError] = []
    for key, (name, least) in _PROBE_FIELDS.items():
        if key not in probe:
            continue
        value = probe[key]
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            errors.append(
                FieldError(f"{path}.{key}", f"expected a whole number >= {least}, got {value!r}")
            )
        else:
            values[name] = value
    if errors:
        return None, errors
    argv = tuple(expand(word, declared) for word in command)
    return (
        ExecProbe(
            argv,
            initial_delay=float(values.get("initial_delay", 0)),
            period=float(values.get("period", 10)),
            timeout=float(values.get("timeout", 1)),
            success_threshold=values.get("success_threshold", 1),
            failure_threshold=values.get("failure_threshold", 3),
        ),
        [],
    )
