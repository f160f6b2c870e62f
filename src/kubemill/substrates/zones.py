"""Time zones by name, from the zone database (files: the core cannot read them).

A schedule's ``spec.timeZone`` is resolved here for both substrates (the
operator and the local schedule loop) and for
``kubemill render``; unset or ``Local`` is the zone of the process that runs the schedule.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

logger = logging.getLogger("kubemill.operator")


def local_zone() -> tzinfo:
    """The operator's own time zone (``Local``, or no ``timeZone``): ``$TZ`` if it names a
    zone, else ``/etc/localtime``, else UTC (an operator pod's usual zone)."""
    name = os.environ.get("TZ", "").lstrip(":")
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            logger.warning("TZ=%s is not a time zone: using UTC", name)
            return UTC
    localtime = Path("/etc/localtime")
    try:
        with localtime.open("rb") as handle:
            return ZoneInfo.from_file(handle, key="localtime")
    except (OSError, ValueError):
        return UTC


def resolve_zone(name: str | None) -> tzinfo | str:
    """The zone ``spec.timeZone`` names, or why it names none."""
    if name is None or name == "Local":
        return local_zone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        detail = str(exc).strip("'\"") or "not in the time zone database"
        return f"invalid timeZone {name!r}: {detail} (an IANA name such as UTC or Europe/Paris)"


__all__ = ["local_zone", "resolve_zone"]
