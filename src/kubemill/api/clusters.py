"""What ``kubemill cluster create <engine>`` was asked for (:class:`ClusterOptions`), from
which each service engine makes its kind's manifest.

Apart from :mod:`.kinds`, which every command that loads a job imports: only a service
cluster's commands make these options (a dataclass costs ~0.4 ms to make).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ClusterOptions:
    """What ``kubemill cluster create <engine>`` was asked for: each service engine makes
    its kind's manifest of the options that apply to it (None: the kind's default)."""

    workers: int = 1
    worker_cpu: float = 1
    worker_mem: str = "2g"
    supervisors: int = 1
    supervisor_cpu: float | None = None
    supervisor_mem: str | None = None
    min_workers: int | None = None
    worker_cache_mem: str | None = None
    image: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)


__all__ = ["ClusterOptions"]
