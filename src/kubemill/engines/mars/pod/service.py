"""Mars's own supervisor or worker service, run in this process: its command runner, made
to wait for the supervisors, to write the readiness file once really up, and to stop in
bounded time; the worker locator patch; and a ``TMPDIR`` short enough for Mars's sockets.
See :mod:`kubemill.engines.mars.pod.entrypoint`."""

from __future__ import annotations

import asyncio
import contextlib
import faulthandler
import hashlib
import logging
import os
import signal
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

# The contract with the Deployments, from their builders (kubemill is in the image).
from kubemill.engines.mars.pod.discovery import (
    ready_supervisors,
    wait_for_supervisors,
    web_answers,
)
from kubemill.engines.mars.pod.settings import (
    ENV_START_WAIT,
    POLL,
    TMPDIR_MAX,
    PodSettings,
    StartFailure,
)

log = logging.getLogger(__name__)


def mars_kubernetes_config() -> str:
    """Mars's own Kubernetes config file (its workers' plasma storage)."""
    import mars  # type: ignore[import-not-found]

    return str(Path(mars.__file__).parent / "deploy" / "kubernetes" / "config.yml")


def patch_worker_locator() -> None:
    """Make Mars's worker locator nap and ask again when its supervisor is unreachable.

    pymars 0.10.0's ``WorkerSupervisorLocatorActor`` watches the supervisors through the
    collector of node info on one of them; when that supervisor does not answer (not up
    yet, or gone first at shutdown) it drops the reference and reads the fixed list again,
    which yields at once, unchanged, so nothing asks for the reference again: the watch
    spins without ever suspending, starving the worker's event loop (no registration, no
    timeout, a stop that never ends; seen as a worker at 50-100% CPU). Between two such
    turns this naps :data:`POLL` and asks for the reference again. Idempotent."""
    from mars import oscar as mo
    from mars.services.cluster.supervisor.node_info import (  # type: ignore[import-not-found]
        NodeInfoCollectorActor,
    )
    from mars.services.cluster.worker.locator import (  # type: ignore[import-not-found]
        WorkerSupervisorLocatorActor as Locator,
    )

    if getattr(Locator, "_kubemill_patched", False):
        return
    spinning = Locator._watch_supervisors_from_backend

    async def watch(self: Any) -> Any:
        async for supervisors in spinning(self):
            yield supervisors
            if self._node_info_ref is None:
                await asyncio.sleep(POLL)
                address = self.get_supervisor(NodeInfoCollectorActor.default_uid())
                with contextlib.suppress(Exception):
                    self._node_info_ref = await mo.actor_ref(
                        NodeInfoCollectorActor.default_uid(), address=address
                    )

    Locator._watch_supervisors_from_backend = watch
    Locator._kubemill_patched = True


def runner(settings: PodSettings, supervisors: Sequence[str], deadline: float) -> Any:
    """Mars's own command runner for the role, which writes the readiness file once up; a
    worker's waits first for its ``supervisors`` (until ``deadline``, monotonic)."""
    if settings.role == "supervisor":
        from mars.deploy.oscar.supervisor import (  # type: ignore[import-not-found]
            SupervisorCommandRunner as Base,
        )
    else:
        from mars.deploy.oscar.worker import (  # type: ignore[import-not-found]
            WorkerCommandRunner as Base,
        )

    class Runner(Base):  # type: ignore[misc]
        @classmethod
        def get_default_config_file(cls) -> str:
            # Mars looks for config.yml next to the runner's module: Mars's, not this one.
            # A worker's is Mars's Kubernetes config, for its plasma storage.
            if settings.role == "worker":
                return mars_kubernetes_config()
            return str(Base.get_default_config_file())

        def create_loop(self) -> Any:
            self.kubemill_loop = super().create_loop()
            return self.kubemill_loop

        def __call__(self, argv: Any = None) -> Any:
            done = super().__call__(argv)
            # The loop's default executor (asyncio.to_thread's threads) outlives Mars's run:
            # ended here, no thread is left and the process may end at once (the entrypoint).
            loop = self.kubemill_loop
            if not loop.is_closed():
                loop.run_until_complete(loop.shutdown_default_executor())
            return done

        def parse_args(self, parser: Any, argv: Any, environ: Any = None) -> Any:
            args = super().parse_args(parser, argv, environ=environ)
            # The Kubernetes config's cluster backend finds supervisors by Mars's own pod
            # labels; kubemill found them and passes them (-s), as the fixed backend takes.
            self.config.setdefault("cluster", {})["backend"] = "fixed"
            return args

        async def _main(self, argv: Any) -> Any:
            # A signal handled by raising KeyboardInterrupt lands in whichever task the loop
            # is stepping (an uploader's, the locator's): that task ends with it, the main
            # one is never cancelled, nothing is stopped, and the process outlives its
            # SIGTERM (seen: a worker still running 60 s on). Cancelling the main task from
            # the loop runs Mars's own stop path (services, then the actor pool).
            loop = asyncio.get_running_loop()
            main = asyncio.current_task()
            assert main is not None
            for signum in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(signum, _stop_requested, settings, main, self)
            return await super()._main(argv)

        async def start_services(self) -> Any:
            started = None
            try:
                if settings.role == "worker":
                    await wait_for_supervisors(
                        supervisors,
                        ask=ready_supervisors,
                        deadline=deadline,
                        wait=settings.supervisor_wait,
                    )
                started = await super().start_services()
                if settings.role == "supervisor":
                    await _wait(
                        lambda: web_answers(settings.ip, settings.web_port),
                        settings.start_wait,
                        f"the supervisor's web API ({settings.ip}:{settings.web_port}) did"
                        " not answer",
                    )
                else:
                    await _wait_registered(self.args.endpoint, settings.start_wait, supervisors)
            except StartFailure:
                await self._give_up(started_services=started is not None)
                raise
            write_ready(settings.ready_file)
            log.warning("%s %s is ready", settings.role, settings.address)
            return started

        async def _give_up(self, *, started_services: bool) -> None:
            """Stop what was started (Mars's own loop stops it only when cancelled)."""
            if started_services:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.stop_services(), _STOP_WAIT)
            if self.pool is not None:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(self.pool.stop(), _STOP_WAIT)

        async def stop_services(self) -> Any:
            clear_ready(settings.ready_file)
            # Its sockets are bound and connected: the link is not needed to stop, and a
            # worker whose supervisor went first may hang stopping until it is killed.
            drop_short_tmpdir(os.environ)
            try:
                return await asyncio.wait_for(super().stop_services(), _SERVICES_STOP_WAIT)
            except TimeoutError:
                # The pool is stopped next anyway: its processes end with it.
                log.warning(
                    "stopping the Mars %s's services took over %.0f s",
                    settings.role,
                    _SERVICES_STOP_WAIT,
                )
                return None

    if settings.role == "worker":
        patch_worker_locator()
    return Runner()


def _stop_requested(settings: PodSettings, main: asyncio.Task[Any], runner: Any) -> None:
    """Cancel the runner's main task (Mars then stops its services and actor pool), and
    bound the whole stop: past :data:`_STOP_DEADLINE` every thread's stack goes to stderr
    and the process exits 1, so a hang is both ended and explained. The actor pool stops
    recovering and monitoring its sub pools first (see :func:`_stop_monitoring`)."""
    if main.cancelling():
        return
    log.warning("stopping the Mars %s %s", settings.role, settings.address)
    _stop_monitoring(runner.pool)
    faulthandler.dump_traceback_later(_STOP_DEADLINE, exit=True)
    main.cancel()


def _stop_monitoring(pool: Any) -> None:
    """Make Mars's main actor pool leave its dead sub pools dead from now on, and end its
    monitor of them now.

    The local substrate signals a pod's whole process group (Kubernetes its first process
    only), so the sub pools, which ignore only SIGINT, end with the same SIGTERM. The main
    pool's monitor (every 0.5 s) would then start new ones while the pod stops, and its stop
    waits for that monitor: each stop took ~2 s longer than Mars's own, its worker waiting on
    a sub pool that never started. Mars's own stop turns recovery off too, but only once the
    services have stopped. Its stop then waits for the monitor to end, which it does only
    after its current half-second nap: ~0.25 s of each worker's stop, on average, spent
    waiting (seen with timings of the stop's steps); cancelled, the monitor ends at once
    (as Mars's monitor does when cancelled) and the stop goes on to the sub pools. ``pool`` is
    None before the pool is created, its monitor before the pool has started."""
    if pool is None:
        return
    if hasattr(pool, "_auto_recover"):
        pool._auto_recover = False
    monitor = getattr(pool, "_monitor_task", None)
    if monitor is not None:
        monitor.cancel()


_STOP_DEADLINE = 25.0
"""Seconds a stop may take before the process ends itself (a pod's grace period is 30 s by
default; Mars's own graceful stop takes a few seconds)."""
_STOP_WAIT = 30.0
"""Seconds to stop what a failed start left, before exiting anyway."""
_SERVICES_STOP_WAIT = 10.0
"""Seconds Mars's services may take to stop on SIGTERM (a pod's grace period is 30 s by
default): then the actor pool is stopped anyway, and its processes with it."""


async def _wait(check: Callable[[], bool], wait: int, failure: str) -> None:
    """Until ``check`` passes; after ``wait`` seconds, :class:`StartFailure`."""
    give_up = time.monotonic() + wait
    while not await asyncio.to_thread(check):
        if time.monotonic() >= give_up:
            raise StartFailure(f"{failure} within {wait} s ({ENV_START_WAIT})")
        await asyncio.sleep(0.2)


async def _wait_registered(endpoint: str, wait: int, supervisors: Sequence[str]) -> None:
    """Until a supervisor lists this worker as ready (asked through Mars's cluster API);
    after ``wait`` seconds, :class:`StartFailure`."""
    from mars.services.cluster import ClusterAPI, NodeRole  # type: ignore[import-not-found]
    from mars.services.cluster.core import NodeStatus  # type: ignore[import-not-found]

    give_up = time.monotonic() + wait
    api = await ClusterAPI.create(endpoint)
    while True:
        with contextlib.suppress(Exception):
            nodes = await api.get_nodes_info(
                nodes=[endpoint], role=NodeRole.WORKER, statuses={NodeStatus.READY}
            )
            if endpoint in nodes:
                return
        if time.monotonic() >= give_up:
            raise StartFailure(
                f"the Mars worker {endpoint} was not registered with the supervisor(s)"
                f" {', '.join(supervisors)} within {wait} s ({ENV_START_WAIT})"
            )
        await asyncio.sleep(0.2)


def write_ready(path: Path) -> None:
    """Say this pod is ready: the file its readiness probe tests, written atomically."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(path.name + ".tmp")
    temp.write_text(f"{os.getpid()}\n", encoding="utf-8")
    temp.replace(path)


def clear_ready(path: Path) -> None:
    """No longer ready (a restarted container is not ready yet, nor one stopping)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


LINK_PREFIX = "kubemill-mars-"
LINK_DIR = "/tmp"  # noqa: S108 - a short directory on purpose (see short_tmpdir)


@contextlib.contextmanager
def short_tmpdir(
    environ: dict[str, str] | os._Environ[str], link_dir: str = LINK_DIR
) -> Iterator[str | None]:
    """Make ``TMPDIR`` short enough for Mars's sockets (:data:`TMPDIR_MAX`) while inside.

    A pod's /tmp is short; a local replica's private TMPDIR under the job's directory often
    is not. Then a symlink with a short name, ``/tmp/kubemill-mars-<digest of the path>``,
    stands for it: the files stay in the replica's own directory (removed with the job),
    a restarted replica takes the same link again, and the link is removed on the way out.
    A link left by a killed process dangles once its job is deleted; every start removes
    such dangling links of ours. Yields the link, or None when TMPDIR was short enough.
    """
    real = environ.get("TMPDIR", "")
    if not real or len(os.fsencode(real)) <= TMPDIR_MAX:
        yield None
        return
    _sweep_links(link_dir)
    link = Path(link_dir) / (LINK_PREFIX + hashlib.sha256(os.fsencode(real)).hexdigest()[:12])
    with contextlib.suppress(FileNotFoundError):
        if link.is_symlink() and str(link.readlink()) != real:
            link.unlink()  # not ours to take: another path with the same digest prefix
    if not link.is_symlink():
        link.symlink_to(real)
    environ["TMPDIR"] = str(link)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    try:
        yield str(link)
    finally:
        environ["TMPDIR"] = real
        tempfile.tempdir = None
        with contextlib.suppress(FileNotFoundError):
            link.unlink()


def drop_short_tmpdir(environ: Mapping[str, str], link_dir: str = LINK_DIR) -> None:
    """Remove the link :func:`short_tmpdir` made, if ``TMPDIR`` is one (early, on stop)."""
    link = Path(environ.get("TMPDIR", ""))
    if link.parent == Path(link_dir) and link.name.startswith(LINK_PREFIX) and link.is_symlink():
        with contextlib.suppress(FileNotFoundError):
            link.unlink()


def _sweep_links(link_dir: str) -> None:
    """Remove our links whose directory is gone (their replicas were killed)."""
    with contextlib.suppress(OSError):
        for entry in Path(link_dir).glob(LINK_PREFIX + "*"):
            if entry.is_symlink() and not entry.exists():
                with contextlib.suppress(OSError):
                    entry.unlink()
