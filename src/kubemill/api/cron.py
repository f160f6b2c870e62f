"""Cron schedules, for any controller kind that runs something on a schedule.

:func:`parse_cron` reads the five-field expressions, shortcuts (``@hourly``) and
``@every <duration>`` intervals that upstream's cron library and Kubernetes CronJobs accept,
with an error naming the wrong field; :class:`CronSchedule` says when a schedule fires next.
:func:`check_time_zone` checks a zone name's spelling. Pure: no clock (the caller passes
the time) and no zone database (the substrates consult it). It lives in the API layer, the
lowest, so a kind's model can validate its schedule on load and the core's controllers,
the frameworks and the substrates can all read it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from kubemill.api.errors import did_you_mean

CRON_SHORTCUTS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""The shortcuts upstream's cron library (and Kubernetes CronJobs) accept."""

_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_DAYS = ("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT")
_CRON_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {m: i + 1 for i, m in enumerate(_MONTHS)}),
    ("day of week", 0, 6, {d: i for i, d in enumerate(_DAYS)}),
)
_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


MAX_CRON_YEARS = 8
"""The furthest :meth:`CronSchedule.next_after` looks: every date that exists comes back
within 8 years (29 February skips at most one leap year, 1900-style)."""
_MONTH_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


class CronError(ValueError):
    """A schedule that is not a cron expression, with what to do about it."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class CronSchedule:
    """A parsed schedule: the values each of the five fields allows, or an interval.

    ``every_seconds`` is set for ``@every <duration>`` (upstream's cron library accepts it)
    and the field sets are then empty.
    """

    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days_of_month: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    days_of_week: frozenset[int] = frozenset()
    day_of_month_any: bool = True
    day_of_week_any: bool = True
    """Cron's rule: with both day fields restricted, a day matches either of them."""
    every_seconds: float | None = None

    def matches(self, when: datetime) -> bool:
        """Whether the schedule fires at ``when``'s minute (in ``when``'s own zone)."""
        if self.every_seconds is not None:
            raise ValueError("an @every schedule fires by interval, not on minutes")
        if when.minute not in self.minutes or when.hour not in self.hours:
            return False
        if when.month not in self.months:
            return False
        return self._day_matches(when)

    def _day_matches(self, when: datetime) -> bool:
        dom = when.day in self.days_of_month
        dow = (when.isoweekday() % 7) in self.days_of_week
        if self.day_of_month_any or self.day_of_week_any:
            return dom and dow
        return dom or dow

    def next_after(self, when: datetime) -> datetime:
        """The first time after ``when`` that the schedule fires.

        Cron fields are wall-clock times in ``when``'s own zone (pass an aware datetime in
        the schedule's time zone); ``@every`` adds its interval. Skips whole months, days
        and hours that cannot match, so a yearly schedule costs a few dozen steps.
        """
        if self.every_seconds is not None:
            return when + timedelta(seconds=self.every_seconds)
        at = when.replace(second=0, microsecond=0) + timedelta(minutes=1)
        last_year = at.year + MAX_CRON_YEARS
        while at.year <= last_year:
            if at.month not in self.months:
                year, month = (at.year + 1, 1) if at.month == 12 else (at.year, at.month + 1)
                at = at.replace(year=year, month=month, day=1, hour=0, minute=0)
            elif not self._day_matches(at):
                at = at.replace(hour=0, minute=0) + timedelta(days=1)
            elif at.hour not in self.hours:
                at = at.replace(minute=0) + timedelta(hours=1)
            elif at.minute not in self.minutes:
                at += timedelta(minutes=1)
            else:
                return at
        raise ValueError(f"the schedule does not fire within {MAX_CRON_YEARS} years")


def parse_cron(text: str) -> CronSchedule:
    """Parse a five-field cron expression, a shortcut (``@hourly``) or ``@every 5m``.

    Raises :class:`CronError` saying which field is wrong and how.
    """
    stripped = text.strip()
    if not stripped:
        raise CronError("the schedule is empty", 'e.g. "0 2 * * *" (every day at 02:00)')
    if re.match(r"^(CRON_)?TZ=", stripped):
        raise CronError(
            "a time zone inside the schedule is not allowed",
            "remove the TZ= prefix and set spec.timeZone instead",
        )
    if stripped.startswith("@every"):
        return CronSchedule(every_seconds=_every(stripped[len("@every") :].strip()))
    if stripped.startswith("@"):
        if stripped not in CRON_SHORTCUTS:
            raise CronError(
                f"unknown shortcut {stripped!r}",
                did_you_mean(stripped, CRON_SHORTCUTS)
                or f"use one of {', '.join(CRON_SHORTCUTS)} or @every <duration>",
            )
        stripped = CRON_SHORTCUTS[stripped]
    fields = stripped.split()
    if len(fields) != len(_CRON_FIELDS):
        raise CronError(
            f"{len(fields)} fields, not 5",
            'minute hour day-of-month month day-of-week, e.g. "*/15 * * * *"; '
            "or a shortcut such as @hourly",
        )
    sets = [_cron_field(value, *spec) for value, spec in zip(fields, _CRON_FIELDS, strict=True)]
    if fields[4] in ("*", "?") and min(sets[2]) > max(_MONTH_DAYS[m - 1] for m in sets[3]):
        raise CronError(
            f"day {min(sets[2])} never comes in the months {fields[3]!r}",
            "the schedule would never run; choose a day every month chosen has",
        )
    return CronSchedule(
        minutes=sets[0],
        hours=sets[1],
        days_of_month=sets[2],
        months=sets[3],
        days_of_week=sets[4],
        day_of_month_any=fields[2] in ("*", "?"),
        day_of_week_any=fields[4] in ("*", "?"),
    )


def _every(text: str) -> float:
    if not _DURATION.match(text):
        raise CronError(
            f"@every needs a duration, got {text!r}",
            "a Go duration such as 30s, 5m or 1h30m",
        )
    seconds = sum(float(n) * _SECONDS[unit] for n, unit in _DURATION_PART.findall(text))
    if seconds < 1:
        raise CronError(f"@every {text} is under a second", "schedule runs at least 1s apart")
    return seconds


def _cron_field(text: str, name: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()
    for item in text.split(","):
        values |= _cron_item(item, name, low, high, names)
    return frozenset(values)


def _cron_item(item: str, name: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    where = f"the {name} field {item!r}"
    allowed = f"{name} runs {low}-{high}" + (
        f" (or {names and next(iter(names))}...)" if names else ""
    )
    base, _, step_text = item.partition("/")
    step = 1
    if step_text:
        if not step_text.isdigit() or int(step_text) < 1:
            raise CronError(f"{where}: the step must be a whole number >= 1", allowed)
        step = int(step_text)
    if base in ("*", "?"):
        if base == "?" and name not in ("day of month", "day of week"):
            raise CronError(f"{where}: '?' is only for the day fields", "use *")
        start, end = low, high
    else:
        first, dash, last = base.partition("-")
        start = _cron_value(first, where, low, high, names, allowed)
        end = _cron_value(last, where, low, high, names, allowed) if dash else start
        if dash and end < start:
            raise CronError(f"{where}: the range runs backwards", f"write {last}-{first}")
        if step_text and not dash:
            end = high  # "5/15": from 5 to the end in steps of 15
    return set(range(start, end + 1, step))


def _cron_value(
    text: str, where: str, low: int, high: int, names: dict[str, int], allowed: str
) -> int:
    if text.upper() in names:
        return names[text.upper()]
    if not text.isdigit():
        raise CronError(f"{where}: {text!r} is not a number", allowed)
    value = int(text)
    if not low <= value <= high:
        raise CronError(f"{where}: {value} is out of range", allowed)
    return value


_TIME_ZONE = re.compile(r"^[A-Za-z][A-Za-z0-9_+\-]*(/[A-Za-z0-9_+\-]+)*$")


def check_time_zone(name: str) -> str:
    """``name`` if it is spelt as an IANA zone (``Europe/Paris``, ``UTC``) or ``Local``.

    By syntax only: whether the zone exists is the zone database's to say, which the API
    layer does not read (the substrates check it with :mod:`zoneinfo` before scheduling).
    """
    if not _TIME_ZONE.match(name) or ".." in name or len(name) > 255:
        raise ValueError(name)
    return name
