"""In-pod entrypoints of a Mars cluster:
``python -m kubemill.engines.mars.pod.entrypoint supervisor|worker``.

The Deployments of ``kubemill.deploy.kubernetes`` (and of the ``MarsCluster`` kind) run this
in every pod. It reads the pod's environment, finds the supervisors, starts the real Mars
service in this process (Mars's own supervisor or worker command runner) and, only once that
service is really up, writes the readiness file the pod's probe tests
(``test -f /tmp/kubemill-mars-ready``):

- a supervisor once its web API answers;
- a worker once a supervisor lists it as a ready worker (it has registered).

The file is removed when the service stops. Importing this module needs no Mars; running
it does.

**A worker waits for its supervisors.** On Kubernetes a worker's pod often starts before
the supervisors' pods serve, and Mars's worker never gets over that: when no supervisor
answers as it starts, its locator never asks again (it spins, and the worker is never
registered). So before starting Mars's worker services, the entrypoint waits until every
supervisor it was given answers and is listed ready by the supervisors, whichever way they
were found (``KUBEMILL_MARS_SUPERVISORS`` too), logging once that it waits. Both waits are
bounded: finding and waiting for the supervisors by ``KUBEMILL_MARS_SUPERVISOR_WAIT``
seconds (default 600), the started service's readiness (a worker registered, a
supervisor's web API answering) by ``KUBEMILL_MARS_START_WAIT`` (default 180). Past
either, the entrypoint stops what it started and exits 1 with the reason on stderr, so
the pod restarts rather than stay unready. The same spin starves a worker whose supervisor
stops first (a stop that never ends): :func:`patch_worker_locator` makes Mars's locator
nap and ask again instead, and Mars's services get 10 s to stop before the actor pool is
stopped anyway. SIGTERM and SIGINT cancel the runner's main task from its event loop (Mars's
own stop path; the actor pool stops recovering its sub pools, which a local pod's SIGTERM
ends too, and its monitor of them ends without finishing its nap), and a stop that still
takes over 25 s ends the process with every thread's stack on stderr. Once Mars has
stopped, the process ends without the interpreter's teardown.

**Storage, as Mars's own Kubernetes deployment.** A worker runs with Mars's Kubernetes
config (``mars/deploy/kubernetes/config.yml``: ``storage: backends: [plasma]``), its
cluster backend set back to ``fixed`` since kubemill finds the supervisors itself: a
plasma store (``pyarrow==11.0.0``, the last pyarrow with plasma) of ``MARS_CACHE_MEM_SIZE``
bytes (Mars takes 95% of it), in /dev/shm, which the Deployment makes a memory emptyDir of
the cache's size. A worker without pyarrow's plasma, or whose /dev/shm cannot hold the
store, exits 1 saying so before Mars starts. Supervisors keep Mars's default config.
The local substrate's replicas of a cluster (``kubemill cluster create``, and the local
``new_cluster``, which runs its cluster as such a job) run them too, with a plasma store
each in this machine's /dev/shm.

**The environment** (set by the Deployments; all but the first three have defaults):

``MARS_K8S_POD_NAME``, ``MARS_K8S_POD_NAMESPACE``, ``MARS_K8S_POD_IP`` (downward API);
``MARS_CPU_TOTAL`` (CPUs; Mars's sub-pools, a fraction counts as one), ``MARS_MEMORY_TOTAL``
(bytes; a worker's ``--mem-bytes``), ``MARS_SPILL_DIRS`` (colon-separated) and
``MARS_CACHE_MEM_SIZE`` (bytes), which Mars's worker reads itself (the spill dirs add its
disk storage; the cache size is its plasma store's);
``MARS_SERVICE_PORT`` (7103) and ``MARS_WEB_PORT`` (7104); ``MARS_SUPERVISOR_SERVICE``, the
Service in front of the supervisors' web port; ``KUBEMILL_MARS_READY_FILE`` to put the
readiness file elsewhere; ``KUBEMILL_MARS_SUPERVISOR_WAIT`` and ``KUBEMILL_MARS_START_WAIT``
(seconds, see above).

**Finding the supervisors**, first that answers:

1. ``KUBEMILL_MARS_SUPERVISORS``: explicit ``host:port`` addresses, comma-separated (for
   running the entrypoints outside Kubernetes, as the tests do);
2. the Kubernetes API with the pod's service account (the cluster's Role grants get, list
   and watch on pods): this pod's ``kubemill.dev/mars-cluster`` label, then the pods
   labelled ``kubemill.dev/mars-role=supervisor`` of that cluster. A supervisor waits
   until every such pod has an IP (they find each other); a worker until at least one is
   ready;
3. the supervisors' web Service (``MARS_SUPERVISOR_SERVICE``): the supervisors a ready one
   lists (``/api/cluster/nodes``).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import signal
import sys
import time
from collections.abc import Mapping, Sequence

# The contract with the Deployments, from their builders (kubemill is in the image).
from kubemill.engines.mars.framework import (
    ENV_CACHE_MEM_SIZE,
    ENV_READY_FILE,
    ENV_SERVICE_PORT,
    ENV_SUPERVISORS,
    ENV_WEB_PORT,
    READY_FILE,
    SHM_PATH,
)
from kubemill.engines.mars.pod.discovery import (
    SeenPod,
    find_supervisors,
    ready_nodes,
    supervisors_from_pods,
    supervisors_not_up,
    wait_for_supervisors,
)
from kubemill.engines.mars.pod.service import (
    LINK_DIR,
    LINK_PREFIX,
    clear_ready,
    drop_short_tmpdir,
    runner,
    short_tmpdir,
)
from kubemill.engines.mars.pod.settings import (
    LABEL_CLUSTER,
    LABEL_ROLE,
    PLASMA_SHARE,
    ROLES,
    START_WAIT,
    SUPERVISOR_WAIT,
    PodSettings,
    SettingsError,
    StartFailure,
    mars_argv,
)
from kubemill.process_exit import exit_at_once

log = logging.getLogger(__name__)


def shm_problem(cache: int, shm_total: int, shm_path: str = SHM_PATH) -> str | None:
    """Why a /dev/shm (``shm_path``) of ``shm_total`` bytes cannot hold the plasma store of a
    ``cache`` of that many bytes (Mars writes the store's objects there: past its end,
    SIGBUS), or None when it can."""
    store = int(cache * PLASMA_SHARE)
    if store <= shm_total:
        return None
    return (
        f"{ENV_CACHE_MEM_SIZE}={cache}: the plasma store ({store} bytes) does not fit in"
        f" {shm_path} ({shm_total} bytes); mount a memory-backed emptyDir of at least the"
        " cache's size there (the Deployments of kubemill.deploy.kubernetes do), or give a"
        " smaller worker_cache_mem"
    )


def check_plasma(environ: Mapping[str, str], shm_path: str = SHM_PATH) -> None:
    """:class:`StartFailure` if this worker's plasma store cannot run: no ``pyarrow.plasma``
    here, or a /dev/shm smaller than the store."""
    if importlib.util.find_spec("pyarrow") is None or (
        importlib.util.find_spec("pyarrow.plasma") is None
    ):
        raise StartFailure(
            "a worker's storage is a plasma store (Mars's Kubernetes config), which needs"
            f" pyarrow==11.0.0, not installed in {sys.prefix}: `kubemill env create mars`"
            " installs it (the kubemill-mars image has it)"
        )
    cache = environ.get(ENV_CACHE_MEM_SIZE, "").strip()
    if not cache.isdigit():
        return  # not set, or a percentage: Mars sizes the store itself
    try:
        stat = os.statvfs(shm_path)
    except OSError as exc:
        raise StartFailure(f"{shm_path}: {exc.strerror}; the plasma store lives there") from exc
    problem = shm_problem(int(cache), stat.f_blocks * stat.f_frsize, shm_path)
    if problem:
        raise StartFailure(problem)


def run(role: str, environ: Mapping[str, str] | None = None) -> int:
    """Start the Mars service of ``role`` in this process; return when it stops."""
    environ = os.environ if environ is None else environ
    settings = PodSettings.from_env(role, environ)
    clear_ready(settings.ready_file)  # a restarted container is not ready yet
    deadline = time.monotonic() + settings.supervisor_wait
    try:
        if role == "worker":
            check_plasma(environ)
        supervisors = find_supervisors(settings, deadline=deadline)
        argv = mars_argv(settings, supervisors)
        log.warning("starting the Mars %s: %s", role, " ".join(argv))
        # As PID 1 of a container, SIGTERM would be ignored (no handler): make it stop Mars
        # the way Ctrl-C does (Mars's runner cancels its services on KeyboardInterrupt).
        signal.signal(signal.SIGTERM, signal.default_int_handler)
        with short_tmpdir(os.environ):
            runner(settings, supervisors, deadline)(argv)
    except KeyboardInterrupt:
        pass
    except StartFailure as exc:
        log.error("the Mars %s %s gives up: %s", role, settings.address, exc)
        sys.stderr.write(f"kubemill.engines.mars.pod.entrypoint: {exc}\n")
        return 1
    finally:
        clear_ready(settings.ready_file)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    if len(args) != 1 or args[0] not in ROLES:
        sys.stderr.write(
            "usage: python -m kubemill.engines.mars.pod.entrypoint supervisor|worker\n"
        )
        return 2
    try:
        return run(args[0])
    except SettingsError as exc:
        sys.stderr.write(f"kubemill.engines.mars.pod.entrypoint: {exc}\n")
        return 2


# What the entrypoint offers its tests and the local cluster (some from its layers below).
__all__ = [
    "ENV_READY_FILE",
    "ENV_SERVICE_PORT",
    "ENV_SUPERVISORS",
    "ENV_WEB_PORT",
    "LABEL_CLUSTER",
    "LABEL_ROLE",
    "LINK_DIR",
    "LINK_PREFIX",
    "PLASMA_SHARE",
    "READY_FILE",
    "START_WAIT",
    "SUPERVISOR_WAIT",
    "PodSettings",
    "SeenPod",
    "SettingsError",
    "StartFailure",
    "check_plasma",
    "drop_short_tmpdir",
    "find_supervisors",
    "main",
    "mars_argv",
    "ready_nodes",
    "run",
    "shm_problem",
    "short_tmpdir",
    "supervisors_from_pods",
    "supervisors_not_up",
    "wait_for_supervisors",
]


if __name__ == "__main__":
    code = main()
    # Mars has stopped (or never started): what is left is the interpreter's teardown, whose
    # collection of Mars's many objects took ~2.7 s of each stop on a busy machine, longer
    # than the stop itself. The exit handlers still run (logging's, multiprocessing's).
    exit_at_once(code)
    sys.exit(code)
