"""Reading and following the replicas' pod logs (``pods/log``, the framework container's).

Which container is a replica's and whether it has run yet are decided from the same pod
snapshot the operator judges (:mod:`kubemill.substrates.kubernetes.observe`). Lines are
asked for with ``timestamps=true``, so a followed stream that is cut can be resumed after
the last line read.
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from kubemill.api import Job
from kubemill.frameworks import Plan
from kubemill.substrates.base import JobNotFound, LogLine, LogQuery
from kubemill.substrates.kubernetes.client.connection import REQUEST_TIMEOUT, Http
from kubemill.substrates.kubernetes.client.errors import KubeApiError, Request
from kubemill.substrates.kubernetes.client.kinds import Found
from kubemill.substrates.kubernetes.client.views import job_plan, replica_names
from kubemill.substrates.kubernetes.observe import (
    ContainerSnapshot,
    PodSnapshot,
    main_container_name,
    parse_time,
)
from kubemill.substrates.kubernetes.transport import api_path, is_connection_error, lines

FINISH_GRACE = 5.0
"""After the job has finished, seconds to let log streams of still-running pods end."""


def split_timestamp(line: str) -> tuple[datetime | None, str]:
    """``2024-01-02T03:04:05.123456789Z text`` (``timestamps=true``) -> (time, text)."""
    stamp, sep, rest = line.partition(" ")
    if sep and stamp[:1].isdigit() and "T" in stamp:
        moment = parse_time(stamp)
        if moment is not None:
            return moment, rest
    return None, line


def _main(job: Job, plan: Plan, pod: Mapping[str, Any]) -> tuple[str, ContainerSnapshot | None]:
    """The replica's framework container: its name and its status (if reported)."""
    snapshot = PodSnapshot.of(pod)
    name = main_container_name(job, plan, snapshot)
    return name, snapshot.container(name)


def open_log(
    http: Http,
    namespace: str,
    pod: str,
    container: str | None,
    *,
    follow: bool,
    since: datetime | None = None,
    asked: LogQuery | None = None,
    limit_bytes: int | None = None,
) -> Any:
    """The log response of one pod's container, or ``None`` if there is none (yet).

    ``since`` resumes a cut stream (it wins over ``asked.since``); ``asked`` is the
    user's query, passed on as the API's ``tailLines``, ``sinceSeconds``/``sinceTime``
    and ``limitBytes``. Lines always carry timestamps: a cut stream resumes after the
    last one read.
    """
    query = [("timestamps", "true")]
    if container:
        query.append(("container", container))
    if follow:
        query.append(("follow", "true"))
    if since is not None:
        query.append(("sinceTime", since.strftime("%Y-%m-%dT%H:%M:%SZ")))
    elif asked is not None:
        query += api_query(asked)
    if limit_bytes is not None:
        query.append(("limitBytes", str(limit_bytes)))
    request = Request("get", "pods", "", namespace, pod, subresource="log")
    path = api_path(group="", version="v1", plural="pods", namespace=namespace, name=pod)
    try:
        return http.send(
            request,
            "GET",
            f"{path}/log",
            query=query,
            # A followed log may be quiet for hours: no read timeout, closed by us.
            timeout=(REQUEST_TIMEOUT[0], None) if follow else REQUEST_TIMEOUT,
            stream=follow,
        )
    except KubeApiError as exc:
        # 404: the pod is gone. 400: its container is not running yet ("waiting to
        # start") or was never started: there is nothing to read, which is no error.
        if exc.status in (400, 404):
            return None
        raise


def api_query(asked: LogQuery) -> list[tuple[str, str]]:
    """``tailLines`` and ``sinceSeconds``/``sinceTime`` of the pod log API for a query."""
    query: list[tuple[str, str]] = []
    if asked.tail is not None:
        query.append(("tailLines", str(asked.tail)))
    if isinstance(asked.since, timedelta):
        # The API counts seconds back from its own clock; at least 1 (0 is refused).
        query.append(("sinceSeconds", str(max(1, math.ceil(asked.since.total_seconds())))))
    elif asked.since is not None:
        moment = asked.since_time(datetime.now(UTC))
        assert moment is not None
        query.append(("sinceTime", moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")))
    return query


def read_logs(
    http: Http,
    found: Found,
    pods: Iterable[Mapping[str, Any]],
    wanted: str | None,
    asked: LogQuery | None = None,
) -> Iterator[LogLine]:
    """Each replica's log as it is now, replica after replica (start order, then strays)."""
    job = found.job()
    plan = job_plan(job)
    by_name = {str(p["metadata"]["name"]): p for p in pods}
    order = replica_names(plan)
    order += sorted(n for n in by_name if n not in order)
    for pod_name in order:
        pod = by_name.get(pod_name)
        if pod is None or (wanted is not None and pod_name != wanted):
            continue
        container, main = _main(job, plan, pod)
        if main is None or not main.has_run:
            continue
        raw = open_log(
            http,
            found.namespace,
            pod_name,
            container,
            follow=False,
            asked=asked,
            limit_bytes=asked.limit_bytes if asked else None,
        )
        if raw is None:
            continue
        text = http.read(raw).decode("utf-8", errors="replace")
        for line in text.splitlines():
            moment, rest = split_timestamp(line)
            yield LogLine(replica=pod_name, text=rest, time=moment)


@dataclass
class _Stream:
    """One followed log: a pod's container instance, read by its own thread."""

    pod: str
    key: tuple[str, int]
    """(pod uid, restart count): a new instance of the container is a new stream."""
    since: datetime | None = None
    last: datetime | None = None
    response: Any = None
    opened: bool = False
    """Whether the API served the log (a container not started yet is tried again)."""
    thread: threading.Thread | None = None
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def close(self) -> None:
        with self.lock:
            self.closed = True
            response = self.response
        if response is not None:
            with contextlib.suppress(Exception):
                response.shutdown()  # unblocks a read in progress
            with contextlib.suppress(Exception):
                response.release_conn()


@dataclass(frozen=True)
class _Ended:
    stream: _Stream
    error: BaseException | None = None


class JobSource(Protocol):
    """What :class:`LogFollower` asks of the backend: the API, and the job and its pods as
    they are now. A protocol, so that following logs needs nothing of how the backend keeps
    its state (``KubernetesBackend`` hands in an adapter of its own)."""

    @property
    def http(self) -> Http:
        """The API the logs are read from."""
        ...

    @property
    def poll_interval(self) -> float:
        """Seconds between looks at the job and its pods."""
        ...

    def refetch(self, found: Found) -> Found:
        """The job as the API has it now; ``JobNotFound`` once it is deleted."""
        ...

    def pods(self, found: Found) -> list[dict[str, Any]]:
        """The pods the job controls."""
        ...

    def acting_deadline(self, found: Found) -> float | None:
        """The ``time.monotonic()`` by which the operator must have acted on the job (a
        condition or a pod), ``None`` when that is not watched."""
        ...

    def not_acting(self, found: Found) -> Exception:
        """The error to raise when the operator has not acted by then."""
        ...


class LogFollower:
    """Follows every replica's log at once until the job has finished.

    A thread per container instance reads its log and puts lines on a queue; the
    generator takes lines off it and, every ``poll_interval``, looks at the job and its
    pods to start streams for new pods and restarted containers. A stream cut while its
    container still runs is resumed from the last line's timestamp (lines at or before
    it are skipped). Once the job has finished, streams get :data:`FINISH_GRACE` seconds
    to end (pods the operator leaves running would otherwise be followed for ever).
    """

    def __init__(
        self,
        source: JobSource,
        found: Found,
        wanted: str | None,
        asked: LogQuery | None = None,
    ) -> None:
        self.asked = asked or LogQuery()
        self.sent: dict[str, int] = {}
        """Bytes given out per pod, against ``limit_bytes``."""
        self.source = source
        self.found = found
        self.wanted = wanted
        self.queue: queue.Queue[LogLine | _Ended] = queue.Queue()
        self.active: dict[tuple[str, int], _Stream] = {}
        self.ended: dict[tuple[str, int], _Stream] = {}

    def lines(self) -> Iterator[LogLine]:
        source = self.source
        check_at = source.acting_deadline(self.found)
        finished_at: float | None = None
        try:
            while True:
                if finished_at is None:
                    try:
                        self.found = source.refetch(self.found)
                    except JobNotFound:
                        finished_at = time.monotonic()  # deleted: its pods go too
                    else:
                        if self.found.job().status.finished:
                            finished_at = time.monotonic()
                job = self.found.job()
                pods = source.pods(self.found)
                if check_at is not None and time.monotonic() >= check_at:
                    if not job.status.conditions and not pods:
                        raise source.not_acting(self.found)
                    check_at = None
                self._start_streams(job, pods)
                yield from self._drain(source.poll_interval)
                if finished_at is not None:
                    if not self.active and self.queue.empty():
                        return
                    if time.monotonic() - finished_at >= FINISH_GRACE:
                        for stream in list(self.active.values()):
                            stream.close()
                        yield from self._drain(0.5)
                        return
        finally:
            for stream in [*self.active.values()]:
                stream.close()
            for stream in [*self.active.values(), *self.ended.values()]:
                if stream.thread is not None:
                    stream.thread.join(timeout=5)

    def _start_streams(self, job: Job, pods: Iterable[Mapping[str, Any]]) -> None:
        plan = job_plan(job)
        for pod in pods:
            meta = pod.get("metadata") or {}
            name = str(meta.get("name"))
            if self.wanted is not None and name != self.wanted:
                continue
            container, main = _main(job, plan, pod)
            if main is None or not main.has_run:
                continue
            key = (str(meta.get("uid") or name), main.restart_count)
            if key in self.active:
                continue
            previous = self.ended.get(key)
            if previous is not None:
                if not main.running:
                    continue  # read to its end already
                # Cut while the container still runs: resume after the last line read.
                del self.ended[key]
            stream = _Stream(
                pod=name,
                key=key,
                since=previous.last if previous else None,
                last=previous.last if previous else None,
            )
            stream.thread = threading.Thread(
                target=self._read,
                args=(stream, container),
                name=f"kubemill-log-{name}",
                daemon=True,
            )
            self.active[key] = stream
            stream.thread.start()

    def _read(self, stream: _Stream, container: str | None) -> None:
        error: BaseException | None = None
        try:
            limit = self.asked.limit_bytes
            if limit is not None:
                limit -= self.sent.get(stream.pod, 0)
                if limit <= 0:
                    return
            response = open_log(
                self.source.http,
                self.found.namespace,
                stream.pod,
                container,
                follow=True,
                since=stream.since,
                asked=self.asked,
                limit_bytes=limit,
            )
            if response is None:
                return
            with stream.lock:
                stream.response = response
                stream.opened = True
                closed = stream.closed
            if closed:
                return
            for line in lines(response):
                moment, text = split_timestamp(line)
                if stream.since is not None and moment is not None and moment <= stream.since:
                    continue  # read before the stream was cut
                if moment is not None:
                    stream.last = moment
                self.sent[stream.pod] = self.sent.get(stream.pod, 0) + len(text.encode()) + 1
                self.queue.put(LogLine(replica=stream.pod, text=text, time=moment))
        except Exception as exc:
            if not stream.closed and not is_connection_error(exc):
                error = exc
        finally:
            self.queue.put(_Ended(stream, error))

    def _drain(self, seconds: float) -> Iterator[LogLine]:
        """Lines that arrive within ``seconds`` (returns early once all is quiet)."""
        until = time.monotonic() + seconds
        while True:
            remaining = until - time.monotonic()
            try:
                item = (
                    self.queue.get(timeout=max(remaining, 0.0))
                    if remaining > 0
                    else (self.queue.get_nowait())
                )
            except queue.Empty:
                return
            if isinstance(item, _Ended):
                self.active.pop(item.stream.key, None)
                if item.stream.opened:
                    self.ended[item.stream.key] = item.stream
                if item.error is not None:
                    raise item.error
                continue
            yield item
