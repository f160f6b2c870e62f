"""Reading and following the replicas' pod logs (``pods/log``, the framework container's).

Which container is a replica's and whether it has run yet are decided from the same pod
snapshot the operator judges (:mod:`kubemill.substrates.kubernetes.observe`). Lines are
asked for with ``timestamps=true``, so a followed stream that is cut can be resumed after
the last line read.

A replica run through a child controller (a batch/v1 Job, ``ReplicaPlan.controller``) is
read from its Job's newest pod, and its lines carry the replica's name, not that pod's: the
pods the Job retried are earlier attempts of the same replica, which ``logs`` does not read
(``kubectl logs`` of such a pod does), while ``logs -f``, looking at the Job again every
``poll_interval``, reads each newest pod in turn, so an attempt it followed is read to its
end and the retry after it follows under the same name.
"""

from __future__ import annotations

import contextlib
import math
import queue
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from kubemill.api import Job
from kubemill.frameworks import Plan
from kubemill.substrates.base import JobNotFound, LogLine, LogQuery
from kubemill.substrates.kubernetes.client.connection import REQUEST_TIMEOUT, Http
from kubemill.substrates.kubernetes.client.errors import KubeApiError, Request
from kubemill.substrates.kubernetes.client.kinds import Found
from kubemill.substrates.kubernetes.client.views import ReplicaPods, job_plan
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


@dataclass(frozen=True)
class LogSource:
    """Where one replica's lines are read: a pod's framework container, and the name the
    lines carry (the pod's, or the replica's for a replica run through a Job)."""

    replica: str
    pod: Mapping[str, Any]
    container: str
    main: ContainerSnapshot | None
    """The container's status (None before it is reported)."""

    @property
    def pod_name(self) -> str:
        return str((self.pod.get("metadata") or {}).get("name"))


def log_sources(job: Job, plan: Plan, seen: ReplicaPods) -> list[LogSource]:
    """The pod of each replica that has one, in start order, then the pods the Plan no
    longer asks for, by name; a replica run through a Job is its newest pod."""
    by_name = {str((p.get("metadata") or {}).get("name")): p for p in seen.pods}
    sources = []
    for replica in plan.replicas:
        controller = replica.controller
        run = seen.controlled.get(controller.name) if controller is not None else None
        if run is not None:
            by_name.pop(replica.name, None)
            if run.pod is not None:
                main = PodSnapshot.of(run.pod).container(replica.container)
                sources.append(LogSource(replica.name, run.pod, replica.container, main))
            continue
        pod = by_name.pop(replica.name, None)
        if pod is not None:
            sources.append(_own(job, plan, replica.name, pod))
    sources.extend(_own(job, plan, name, pod) for name, pod in sorted(by_name.items()))
    return sources


def _own(job: Job, plan: Plan, name: str, pod: Mapping[str, Any]) -> LogSource:
    """A pod the job controls: its framework container as the operator judges it."""
    snapshot = PodSnapshot.of(pod)
    container = main_container_name(job, plan, snapshot)
    return LogSource(name, pod, container, snapshot.container(container))


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
    seen: ReplicaPods,
    wanted: str | None,
    asked: LogQuery | None = None,
) -> Iterator[LogLine]:
    """Each replica's log as it is now, replica after replica (start order, then strays);
    ``wanted`` (a replica's name) reads that one only."""
    job = found.job()
    plan = seen.plan or job_plan(job)
    for source in log_sources(job, plan, seen):
        if wanted is not None and source.replica != wanted:
            continue
        if source.main is None or not source.main.has_run:
            continue
        raw = open_log(
            http,
            found.namespace,
            source.pod_name,
            source.container,
            follow=False,
            asked=asked,
            limit_bytes=asked.limit_bytes if asked else None,
        )
        if raw is None:
            continue
        text = http.read(raw).decode("utf-8", errors="replace")
        for line in text.splitlines():
            moment, rest = split_timestamp(line)
            yield LogLine(replica=source.replica, text=rest, time=moment)


@dataclass
class _Stream:
    """One followed log: a pod's container instance, read by its own thread."""

    replica: str
    """The name its lines carry (see :class:`LogSource`)."""
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
    reads_current: bool = False
    """Whether it may be reading the pod's current container instance rather than its own
    (see :meth:`LogFollower._given_out`)."""

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

    def replica_pods(self, found: Found) -> ReplicaPods:
        """The pods the job controls, and the Jobs its replicas run through."""
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

    A resumed stream asks for the container's log, which the API serves from the instance
    running *now*: if the kubelet restarted the container before the pod's status said
    so, the resumed stream reads the new instance, whose own stream (started once the
    status shows the restart) reads the same lines. Those two share a watermark per pod
    (:meth:`_given_out`), so each line is given once; a pod's other streams are bound to
    their own instance and need none.
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
        self.resumed_pods: set[str] = set()
        """Uids of the pods a cut stream was resumed on."""
        self.newest_given: dict[str, datetime] = {}
        """Per pod uid, the newest line given out by a stream that may read its current
        container instance."""
        self.watermark_lock = threading.Lock()

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
                seen = source.replica_pods(self.found)
                if check_at is not None and time.monotonic() >= check_at:
                    if not job.status.conditions and not seen.pods and not seen.controlled:
                        raise source.not_acting(self.found)
                    check_at = None
                self._start_streams(job, seen)
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

    def _start_streams(self, job: Job, seen: ReplicaPods) -> None:
        plan = seen.plan or job_plan(job)
        for source in log_sources(job, plan, seen):
            name, container, main = source.pod_name, source.container, source.main
            if self.wanted is not None and source.replica != self.wanted:
                continue
            if main is None or not main.has_run:
                continue
            meta = source.pod.get("metadata") or {}
            key = (str(meta.get("uid") or name), main.restart_count)
            if key in self.active:
                continue
            previous = self.ended.get(key)
            if previous is not None:
                if not main.running:
                    continue  # read to its end already
                # Cut while the container still runs: resume after the last line read.
                del self.ended[key]
                self.resumed_pods.add(key[0])
            stream = _Stream(
                replica=source.replica,
                pod=name,
                key=key,
                since=previous.last if previous else None,
                last=previous.last if previous else None,
                reads_current=key[0] in self.resumed_pods,
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
                limit -= self.sent.get(stream.replica, 0)
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
                if stream.reads_current and moment is not None and self._given_out(stream, moment):
                    continue
                if moment is not None:
                    stream.last = moment
                self.sent[stream.replica] = (
                    self.sent.get(stream.replica, 0) + len(text.encode()) + 1
                )
                self.queue.put(LogLine(replica=stream.replica, text=text, time=moment))
        except Exception as exc:
            if not stream.closed and not is_connection_error(exc):
                error = exc
        finally:
            self.queue.put(_Ended(stream, error))

    def _given_out(self, stream: _Stream, moment: datetime) -> bool:
        """Whether another stream of the pod's current container instance gave out the line
        at ``moment`` already (else it is this stream's to give, and the watermark moves).
        Both read the instance in order, so a line at or before the newest one given is one
        of those."""
        pod = stream.key[0]
        with self.watermark_lock:
            newest = self.newest_given.get(pod)
            if newest is not None and moment <= newest:
                return True
            self.newest_given[pod] = moment
            return False

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
