"""Kubernetes resource quantities, just enough to size a gang's PodGroup.

Upstream sizes ``minResources`` of a PodGroup, when the job does not give it, as the sum of
the container requests (a limit stands in for a missing request) of the first
``minMember`` pods, highest priority first. Quantities are summed exactly with
:class:`decimal.Decimal` and written back in canonical form.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation

from kubemill.api import PodSpec

_SUFFIXES: dict[str, Decimal] = {
    "": Decimal(1),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "k": Decimal(10) ** 3,
    "M": Decimal(10) ** 6,
    "G": Decimal(10) ** 9,
    "T": Decimal(10) ** 12,
    "P": Decimal(10) ** 15,
    "E": Decimal(10) ** 18,
    "Ki": Decimal(2) ** 10,
    "Mi": Decimal(2) ** 20,
    "Gi": Decimal(2) ** 30,
    "Ti": Decimal(2) ** 40,
    "Pi": Decimal(2) ** 50,
    "Ei": Decimal(2) ** 60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


def parse_quantity(text: str | int | float) -> Decimal | None:
    """The value of a quantity (``500m`` -> 0.5, ``1Gi`` -> 1073741824); None if malformed."""
    match = _QUANTITY.match(str(text).strip())
    if match is None:
        return None
    try:
        return Decimal(match.group(1)) * _SUFFIXES[match.group(2)]
    except InvalidOperation:
        return None


def format_quantity(value: Decimal) -> str:
    """A canonical quantity string: ``2``, ``1500m``, ``1073741824``."""
    if value == value.to_integral_value():
        return str(int(value))
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return format(value.normalize(), "f")


def sum_pod_requests(pods: Sequence[PodSpec], *, first: int) -> tuple[tuple[str, str], ...]:
    """Summed requests of the first ``first`` pods, highest ``priority`` first (stable).

    Upstream orders by the priority of each pod's PriorityClass, which only the API server
    knows; the pure core uses the pod's own ``priority`` field when the template sets it.
    Malformed quantities are left out here; the API server rejects them with its own message
    when the pod is created.
    """
    ranked = sorted(enumerate(pods), key=lambda item: (-(item[1].priority or 0), item[0]))
    totals: dict[str, Decimal] = {}
    for _, spec in ranked[: max(first, 0)]:
        for container in spec.containers:
            resources = container.resources or {}
            requests = resources.get("requests")
            limits = resources.get("limits")
            wanted: dict[str, object] = {}
            if isinstance(limits, dict):
                wanted.update(limits)
            if isinstance(requests, dict):
                wanted.update(requests)
            for name, raw in wanted.items():
                if not isinstance(raw, str | int | float):
                    continue
                value = parse_quantity(raw)
                if value is not None:
                    totals[name] = totals.get(name, Decimal(0)) + value
    return tuple((name, format_quantity(totals[name])) for name in sorted(totals))
