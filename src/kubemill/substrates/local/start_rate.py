"""How fast one supervisor starts replica processes: the config file's ``replicaStarts``
(:class:`StartLimits`) and the token bucket the supervisor takes a start from
(:class:`StartBucket`). Apart from the kubelet stand-in, so that reading the config (a
submission does) does not import what runs processes."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubemill.substrates.base import SubstrateError
from kubemill.substrates.local.images import config_whole_number, read_config

DEFAULT_STARTS_PER_SECOND = 20.0
DEFAULT_START_BURST = 20


@dataclass(frozen=True)
class StartLimits:
    """How fast one supervisor starts replica processes (a token bucket).

    Up to ``burst`` start at once, then ``per_second``; the rest wait as Pending pods, as
    pods wait for a kubelet that is busy. Without it a 500-replica job had 197 processes
    starting before the first finished, each importing its libraries at once. In-place
    restarts are not limited (they have their back-off). From the config file::

        replicaStarts:
          perSecond: 20   # replica processes started per second, at most
          burst: 20       # started at once before the rate applies
    """

    per_second: float = DEFAULT_STARTS_PER_SECOND
    burst: int = DEFAULT_START_BURST

    @classmethod
    def from_config(cls, data: Mapping[str, Any], where: str) -> StartLimits:
        """The limits of a config mapping; a bad value is an error naming its key."""
        section = data.get("replicaStarts") or {}
        if not isinstance(section, Mapping):
            raise SubstrateError(
                f"{where}: replicaStarts: expected a mapping with perSecond and burst"
            )
        unknown = sorted(set(section) - {"perSecond", "burst"})
        if unknown:
            raise SubstrateError(
                f"{where}: replicaStarts: unknown keys {unknown}; the keys are perSecond, burst"
            )
        rate = section.get("perSecond", DEFAULT_STARTS_PER_SECOND)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not rate > 0:
            raise SubstrateError(
                f"{where}: replicaStarts.perSecond: expected a number > 0, got {rate!r}"
            )
        burst = config_whole_number(
            section.get("burst", DEFAULT_START_BURST), 1, f"{where}: replicaStarts.burst"
        )
        return cls(per_second=float(rate), burst=burst)

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> StartLimits:
        """The limits of the local config file (defaults when there is no file)."""
        return cls.from_config(*read_config(path))


class StartBucket:
    """Tokens for starting processes under :class:`StartLimits`."""

    def __init__(self, limits: StartLimits) -> None:
        self.limits = limits
        self._tokens = float(limits.burst)
        self._at: float | None = None

    def _refill(self, now: float) -> None:
        if self._at is not None and now > self._at:
            gained = (now - self._at) * self.limits.per_second
            self._tokens = min(float(self.limits.burst), self._tokens + gained)
        self._at = now if self._at is None else max(self._at, now)

    def take(self, now: float) -> bool:
        """Use a token if one is there."""
        self._refill(now)
        # A token due at exactly ``next_token`` may fall a rounding error short of 1.
        if self._tokens >= 1.0 - 1e-9:
            self._tokens = max(0.0, self._tokens - 1.0)
            return True
        return False

    def next_token(self, now: float) -> float:
        """When the next token will be there."""
        self._refill(now)
        return now + max(0.0, 1.0 - self._tokens) / self.limits.per_second
