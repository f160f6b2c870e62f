"""A container's ``resources`` on this machine: ``limits.cpu`` as cores to pin (and the thread
variables it sets), ``limits.memory`` as the limit the supervisor watches, and asks larger
than the machine refused with their field paths (:func:`local_resources`).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from kubemill.api import Container, FieldError

THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
"""Set from ``limits.cpu`` unless the container sets them: torch, NumPy and friends start
one thread per core they see otherwise, and oversubscribe the cores the replica has."""


def machine_cores() -> int:
    """The cores this process may run on (its affinity, not every core of the machine)."""
    return len(os.sched_getaffinity(0))


def machine_memory() -> int | None:
    """``MemTotal`` in bytes, or ``None`` if ``/proc/meminfo`` cannot tell."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


@dataclass(frozen=True)
class LocalResources:
    """What the local substrate honours of a container's ``resources``."""

    cpus: int | None = None
    memory_limit: int | None = None


def local_resources(container: Container, path: str) -> tuple[LocalResources, list[FieldError]]:
    """The cores and memory limit of ``container`` (at manifest ``path``), or why it cannot
    run on this machine: malformed quantities and asks beyond the machine, by field path."""
    errors: list[FieldError] = []
    resources = container.resources or {}
    cores, memory = machine_cores(), machine_memory()
    wanted: dict[tuple[str, str], Decimal] = {}
    for section in ("requests", "limits"):
        values = resources.get(section)
        if values is None:
            continue
        if not isinstance(values, Mapping):
            errors.append(FieldError(f"{path}.resources.{section}", "expected a mapping"))
            continue
        for name in ("cpu", "memory"):
            if name not in values:
                continue
            raw = values[name]
            # Imported only for a container that asks: any module of the core loads the
            # whole reconciler, which a submission (it checks the resources) never runs.
            from kubemill.core.quantity import parse_quantity

            amount = parse_quantity(raw) if isinstance(raw, (str, int, float)) else None
            where = f"{path}.resources.{section}.{name}"
            if amount is None or amount < 0:
                errors.append(
                    FieldError(where, f"{raw!r} is not a quantity", 'e.g. "2", "500m", "4Gi"')
                )
                continue
            wanted[(section, name)] = amount
            if name == "cpu" and amount > cores:
                errors.append(
                    FieldError(
                        where,
                        f"asks for {raw} CPUs; this machine has {cores} for kubemill to use",
                        f"ask for at most {cores}, or run on kubernetes",
                    )
                )
            if name == "memory" and memory is not None and amount > memory:
                errors.append(
                    FieldError(
                        where,
                        f"asks for {raw} of memory; this machine has {memory // 2**20}Mi"
                        " (MemTotal)",
                        "ask for less, or run on kubernetes",
                    )
                )
    cpu = wanted.get(("limits", "cpu"))
    mem = wanted.get(("limits", "memory"))
    return (
        LocalResources(
            cpus=None if cpu is None else min(cores, max(1, math.ceil(cpu))),
            memory_limit=None if mem is None or mem == 0 else int(mem),
        ),
        errors,
    )
