"""Operator throughput: N jobs x R replicas created at once, against the test API server
and the real control plane, side by side.

    .venv/bin/python bench/operator_throughput.py [--jobs 500] [--replicas 4] [--workers 16]
        [--server kmock|real|both] [--rounds N] [--floor-writes] [--no-floor]

``kmock``: the test API server of the operator tests (tests/support/kmock_cluster.py) on
127.0.0.1 in this process. ``real``: kube-apiserver, etcd, the controller manager and the
scheduler (tests/support/control_plane.py; built by scripts/kube-control-plane.sh). Against
each, the real operator (``python -m kubemill.substrates.kubernetes.operator``) runs in a
subprocess, N TFJobs of 1 chief and R-1 workers are created as fast as a small client pool
can, and it prints:

- jobs/s from the first job created until every pod exists;
- API writes per job against the minimum needed by then (R pods + R services + 1 status
  write for ``Created``), with Events counted apart (one per decision), and by verb and
  resource;
- the operator's CPU per job, split between its event loop's thread and the others (the API
  client's pool), user and system time;
- the operator's resident memory idle, at the end, and at its peak;
- the floor under both, measured in the same run: kopf alone (``bench/operator_floor.py``),
  with handlers that do nothing, watching the same resources with the operator's kopf
  settings, its CPU per job and resident memory (``--no-floor``: not run). What the operator
  costs above it is kubemill's, its writes included;
- the machine's load average as each run starts and ends (other work shares the cores).

``--floor-writes``: the honest floor, kopf plus the writes a job needs at a minimum. kopf
alone makes no writes, where every job needs, whatever the operator's logic, its R pods and
R services, one status write and the Events of its first pass (R=4: 12 writes), and the
operator's API client is ~13% of its CPU. So each round runs, against a fresh server each,
the operator alone and then ``bench/operator_floor.py`` with ``writes`` alone (the order
reversed every other round): on the first event of each job the writing floor makes the
operator's first pass's writes (the children's bodies and the status patch built here by the
operator's own functions, see :func:`floor_writes`) through the operator's client code
(``KubeApi`` on its thread pool, ``EventPoster``), and is measured as the operator is. Apart,
because its children and status writes would wake the operator's reconciles (and the
operator's its handlers). It prints both side by side (the floor's writes by verb and
resource against the operator's, which they must equal), and what the operator costs above
the writing floor: kubemill's reconcile logic alone. kopf alone still runs beside each
(``--no-floor``: not).

Either server shares the 2 cores with the operator (the real one also schedules the pods onto
its Node), so figures are a lower bound of what the operator does on a cluster. The real
server's writes are read from its audit log (the operator's user agent). Nothing is
asserted: this is a measurement, run on demand (never in CI).

``--operator-src SRC [SRC ...]`` runs the operator of each source tree (a ``src`` folder: the
main worktree's and this one's) against the same kind of server, one after the other, and
prints them side by side: a before/after in one period of a shared, noisy machine (CPU per job
is steadier than jobs/s). ``--rounds N`` runs each N times, in the other order every other
round (ABBA...): the later of two runs tends to cost more.

``--profile cpu|memory|malloc|py-spy --profile-dir DIR`` says where the operator's CPU goes and what
holds its memory (bench/operator_profile.py says how); for example::

    python bench/operator_throughput.py --server kmock --profile py-spy --profile-dir /tmp/p
    python bench/operator_profile.py summary /tmp/p/kmock/py-spy.txt
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
sys.path.insert(0, str(ROOT / "tests"))

from kubemill.core import CreatePod, CreateService, Observed, reconcile  # noqa: E402
from kubemill.frameworks import LABEL_JOB_NAME  # noqa: E402
from kubemill.kinds import crds, lifecycle_for, load_document  # noqa: E402
from kubemill.substrates.kubernetes.build import Owner, build_for_action  # noqa: E402
from kubemill.substrates.kubernetes.controlled import JOB_API_VERSION, JOBS  # noqa: E402
from kubemill.substrates.kubernetes.operator import handlers  # noqa: E402
from kubemill.substrates.kubernetes.operator.process import GC_YOUNG_THRESHOLD  # noqa: E402
from kubemill.substrates.kubernetes.operator.settings import OperatorSettings  # noqa: E402
from kubemill.substrates.kubernetes.operator.waves import creation_wave  # noqa: E402
from kubemill.substrates.kubernetes.operator.writes import (  # noqa: E402
    coalesce_events,
    merge_patch,
    pair_events,
)
from kubemill.substrates.kubernetes.render import plan_on_kubernetes, reconcile_options  # noqa: E402
from measure import cpu_seconds, rss_mib  # noqa: E402
from operator_smaps import describe as describe_mappings  # noqa: E402
from support.control_plane import build, running_control_plane  # noqa: E402
from support.kmock_cluster import ClusterThread, write_kubeconfig  # noqa: E402


def tfjob(name: str, replicas: int) -> dict[str, Any]:
    def replica(count: int) -> dict[str, Any]:
        container = {"name": "tensorflow", "image": "example:latest", "command": ["python"]}
        return {"replicas": count, "template": {"spec": {"containers": [container]}}}

    specs: dict[str, Any] = {"Chief": replica(1)}
    if replicas > 1:
        specs["Worker"] = replica(replicas - 1)
    return {
        "apiVersion": "kubemill.dev/v1",
        "kind": "TFJob",
        "metadata": {"name": name},
        "spec": {"tfReplicaSpecs": specs},
    }


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_healthy(port: int, process: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the operator exited with {process.returncode}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("the operator did not become healthy")


def floor_spec(health: int) -> dict[str, Any]:
    """What bench/operator_floor.py watches, and how: the operator's resources (this tree's
    handlers say which), label selectors and kopf settings."""
    labelled: list[list[Any]] = [["", "v1", "pods", LABEL_JOB_NAME]]
    labelled.append(["", "v1", "services", LABEL_JOB_NAME])
    labelled += [[g, v, p, LABEL_JOB_NAME] for g, v, p in handlers.watched_children().values()]
    if handlers.watches_controllers():
        group, _, version = JOB_API_VERSION.partition("/")
        labelled.append([group, version, JOBS, LABEL_JOB_NAME])
    jobs = [[r.group, r.version, r.plural, None] for r in OperatorSettings().job_resources()]
    return {
        "health": health,
        "idle_timeout": handlers.WORKER_IDLE_SECONDS,
        "gc_young": GC_YOUNG_THRESHOLD,
        "resources": jobs + labelled,
    }


TEMPLATE_NAME = "floor-template-job"
TEMPLATE_NAMESPACE = "floor-template-ns"
TEMPLATE_UID = "floor-template-uid"
TEMPLATE_NOW = datetime(2001, 2, 3, 4, 5, 6, tzinfo=UTC)


def floor_writes(replicas: int, workers: int) -> dict[str, Any]:
    """What the writing floor writes for each job (bench/operator_floor.py's ``writes``): what
    the operator's first pass over a new job of ``replicas`` writes, found as the operator
    finds it (the core's reconcile of the job with nothing observed, the bodies of its
    creates built by the operator's build functions with the job as owner, its first status
    as the merge patch the operator sends, its events coalesced as the operator posts them),
    for a job whose name, namespace, uid and time the floor puts in; with the operator's
    API concurrency and reconcile workers."""
    body = tfjob(TEMPLATE_NAME, replicas)
    body["metadata"].update(namespace=TEMPLATE_NAMESPACE, uid=TEMPLATE_UID)
    job, errors = load_document(body)
    if job is None:
        raise SystemExit(f"the bench's TFJob is not valid: {errors}")
    settings = OperatorSettings()
    resource = next(r for r in settings.job_resources() if r.kind == job.KIND)
    plan = plan_on_kubernetes(job)
    result = reconcile(
        job,
        plan,
        Observed(),
        TEMPLATE_NOW,
        options=reconcile_options(None),
        lifecycle=lifecycle_for(job.KIND),
    )
    owner = Owner.of(job, api_version=resource.api_version)
    steps, status_events = pair_events(result.actions)
    waves: dict[int, list[list[Any]]] = {}
    events = []
    for action, action_events in steps:
        if not isinstance(action, CreatePod | CreateService):
            raise SystemExit(f"the operator's first pass does more than the floor: {action}")
        child = build_for_action(job, plan, action, gang=None, owner=owner, progress=None)
        assert child is not None
        plural = "pods" if isinstance(action, CreatePod) else "services"
        waves.setdefault(creation_wave(action), []).append([child["apiVersion"], plural, child])
        events += action_events
    template = {
        "waves": [waves[wave] for wave in sorted(waves)],
        "status": merge_patch(job.status.to_wire(), result.status.to_wire()),
        "events": [list(event) for event in coalesce_events(events + status_events)],
    }
    return {
        "job": [resource.group, resource.version, resource.plural],
        "template": json.dumps(template),
        "name": TEMPLATE_NAME,
        "namespace": TEMPLATE_NAMESPACE,
        "uid": TEMPLATE_UID,
        "stamp": TEMPLATE_NOW.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "api_concurrency": settings.api_concurrency,
        "workers": workers,
        "identity": settings.identity,
    }


def count_pods(cluster: ClusterThread) -> int:
    async def count() -> int:
        return sum(
            1
            for (resource, _, _), obj in list(cluster.cluster.objects.items())
            if resource.plural == "pods" and not obj.deleted
        )

    result: int = cluster.call(count)
    return result


@dataclass
class Figures:
    """One run's measurements (of the operator, or of the writing floor: ``subject``)."""

    subject: str = "operator"
    submitted: float = 0.0
    elapsed: float = 0.0
    cpu_busy: float = 0.0
    cpu_split: CpuSplit | None = None
    """Where ``cpu_busy`` went: the event loop's thread or the others, user or system."""
    rss_idle: float = 0.0
    rss_end: float = 0.0
    rss_peak: float = 0.0
    mappings: str = ""
    """The resident memory at the end by kind of mapping (bench/operator_smaps.py)."""
    writes: Counter[str] = field(default_factory=Counter)
    """Writes by verb and resource (``create pods``, ``patch tfjobs/status``)."""
    errors: Counter[str] = field(default_factory=Counter)
    floor: Floor | None = None
    load: tuple[str, str] = ("", "")
    """The machine's load averages (1, 5, 15 min) as the run started and as it ended."""


def load_average() -> str:
    """The 1, 5 and 15 minute load averages (/proc/loadavg): who else shares the cores."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


@dataclass(frozen=True)
class CpuSplit:
    """A process's CPU seconds by thread and by mode (/proc/PID/task/*/stat): the main
    thread (the operator's event loop: kopf and the reconciles) and the other threads (the
    API client's pool), user and system (the kernel's part: sockets, TLS records' copies,
    the threads' wake-ups). A thread that ended is in no thread's figure."""

    main_user: float
    main_system: float
    others_user: float
    others_system: float

    @classmethod
    def of(cls, pid: int) -> CpuSplit:
        tick = os.sysconf("SC_CLK_TCK")
        seconds = [0.0, 0.0, 0.0, 0.0]
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended meanwhile
            first = 0 if task.name == str(pid) else 2
            seconds[first] += int(fields[11]) / tick
            seconds[first + 1] += int(fields[12]) / tick
        return cls(*seconds)

    def since(self, before: CpuSplit) -> CpuSplit:
        return CpuSplit(
            self.main_user - before.main_user,
            self.main_system - before.main_system,
            self.others_user - before.others_user,
            self.others_system - before.others_system,
        )

    def __str__(self) -> str:
        return (
            f"{self.main_user:.1f}+{self.main_system:.1f} loop,"
            f" {self.others_user:.1f}+{self.others_system:.1f} rest"
        )


@dataclass
class Floor:
    """kopf alone's measurements in the same run (bench/operator_floor.py)."""

    cpu_busy: float = 0.0
    cpu_split: CpuSplit | None = None
    rss_idle: float = 0.0
    rss_end: float = 0.0
    rss_peak: float = 0.0


@dataclass
class Server:
    """What a run needs of a server: where it is, how to create a job, how many pods exist,
    and which writes the operator (or the writing floor: any client but this script) made,
    with the errors it was answered."""

    kubeconfig: Path
    create: Callable[[str, dict[str, Any]], Any]
    pods: Callable[[], int]
    operator_calls: Callable[[], tuple[Counter[str], Counter[str]]]


NAMESPACE = "bench"


@contextmanager
def kmock_server(tmp: Path) -> Iterator[Server]:
    with ClusterThread() as cluster:
        for crd in crds():
            cluster.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        cluster.create("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        first_call = len(cluster.calls())

        def calls() -> tuple[Counter[str], Counter[str]]:
            made = [c for c in cluster.calls()[first_call:] if not c.from_tests]
            writes = Counter(f"{c.verb} {c.resource}" for c in made if c.is_write)
            errors = Counter(f"{c.verb} {c.resource} {c.status}" for c in made if c.status >= 400)
            return writes, errors

        yield Server(
            write_kubeconfig(tmp / "kubeconfig", cluster.url),
            cluster.create,
            lambda: count_pods(cluster),
            calls,
        )


@contextmanager
def real_server(tmp: Path) -> Iterator[Server]:
    with running_control_plane(tmp / "kube", build(ROOT)) as plane:
        for crd in crds():
            plane.request("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
        plane.request("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        plane.new_namespace()  # the bench namespace's account exists once a later one's does
        while plane.get_or_none(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/default") is None:
            time.sleep(0.1)
        for crd in crds():
            name = crd["metadata"]["name"]
            while (
                not plane.request(
                    "GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
                )
                .get("status", {})
                .get("acceptedNames", {})
                .get("kind")
            ):
                time.sleep(0.1)

        def pods() -> int:
            listing = plane.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods?limit=1")
            return len(listing["items"]) + int(listing["metadata"].get("remainingItemCount", 0))

        def calls() -> tuple[Counter[str], Counter[str]]:
            writes: Counter[str] = Counter()
            errors: Counter[str] = Counter()
            for event in plane.audit("kubemill-admin"):
                if event.get("stage") != "ResponseComplete":
                    continue
                if event.get("userAgent", "").startswith("Python-urllib"):
                    continue  # this script's own requests
                ref = event.get("objectRef", {})
                resource = ref.get("resource", "")
                if ref.get("subresource"):
                    resource += "/" + ref["subresource"]
                code = event.get("responseStatus", {}).get("code", 0)
                if event["verb"] in ("create", "update", "patch", "delete"):
                    writes[f"{event['verb']} {resource}"] += 1
                if code >= 400:
                    errors[f"{event['verb']} {resource} {code}"] += 1
            return writes, errors

        yield Server(
            plane.admin_kubeconfig,
            lambda path, body: plane.request("POST", path, body),
            pods,
            calls,
        )


OPERATOR = "operator"
WRITING_FLOOR = "floor+writes"


def run(
    server: Server,
    args: argparse.Namespace,
    tmp: Path,
    src: Path | None,
    profile: Path | None,
    subject: str = OPERATOR,
) -> Figures:
    """One run of the operator (of ``src``, else this tree's) against ``server``; with
    ``args.profile``, its profile is written to the folder ``profile``. ``subject``
    :data:`WRITING_FLOOR`: the writing floor in its place (bench/operator_floor.py with
    ``writes``), measured as the operator is."""
    figures = Figures(subject=subject)
    started_load = load_average()
    expected_pods = args.jobs * args.replicas
    health = free_port()
    log = (tmp / f"{subject}.log").open("wb")
    options = [
        "--all-namespaces", "--metrics-port", "0", "--health-port", str(health),
        "--bind-address", "127.0.0.1", "--workers", str(args.workers),
    ]  # fmt: skip
    argv = [sys.executable, "-m", "kubemill.substrates.kubernetes.operator", *options]
    if subject == WRITING_FLOOR:
        spec = floor_spec(health)
        spec["writes"] = floor_writes(args.replicas, args.workers)
        argv = [sys.executable, str(BENCH / "operator_floor.py"), json.dumps(spec)]
    elif profile is not None and args.profile in ("cpu", "memory", "malloc"):
        profile.mkdir(parents=True, exist_ok=True)
        script = str(BENCH / "operator_profile.py")
        argv = [sys.executable, script, args.profile, str(profile), "--", *options]
    env = dict(os.environ, KUBECONFIG=str(server.kubeconfig))
    env.pop("KUBERNETES_SERVICE_HOST", None)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(src), *env.get("PYTHONPATH", "").split(os.pathsep)]
        )
    operator = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
    floor: subprocess.Popen[bytes] | None = None
    if args.floor:
        figures.floor = Floor()
        floor_health = free_port()
        floor_argv = [sys.executable, str(BENCH / "operator_floor.py")]
        floor_argv.append(json.dumps(floor_spec(floor_health)))
        with (tmp / "floor.log").open("wb") as floor_log:
            floor = subprocess.Popen(
                floor_argv, env=env, stdout=floor_log, stderr=subprocess.STDOUT
            )
    sampler: subprocess.Popen[bytes] | None = None
    floor_cpu_idle = 0.0
    floor_split_idle: CpuSplit | None = None
    try:
        wait_healthy(health, operator)
        figures.rss_idle = rss_mib(operator.pid)
        cpu_idle = cpu_seconds(operator.pid)
        split_idle = CpuSplit.of(operator.pid)
        if floor is not None and figures.floor is not None:
            wait_healthy(floor_health, floor)
            figures.floor.rss_idle = rss_mib(floor.pid)
            floor_cpu_idle = cpu_seconds(floor.pid)
            floor_split_idle = CpuSplit.of(floor.pid)
        path = f"/apis/kubemill.dev/v1/namespaces/{NAMESPACE}/tfjobs"
        if profile is not None and args.profile == "py-spy":
            sampler = start_py_spy(operator.pid, profile)
        if profile is not None and args.profile in ("memory", "malloc"):
            dump_profile(operator, profile / f"{args.profile}.done")  # the idle snapshot
        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(args.clients) as pool:
            list(
                pool.map(
                    lambda i: server.create(path, tfjob(f"job-{i:04d}", args.replicas)),
                    range(args.jobs),
                )
            )
        figures.submitted = time.monotonic() - started
        while (pods := server.pods()) < expected_pods:
            if time.monotonic() - started > args.timeout:
                raise SystemExit(f"timed out: {pods}/{expected_pods} pods")
            time.sleep(0.05)
        figures.elapsed = time.monotonic() - started
        figures.cpu_busy = cpu_seconds(operator.pid) - cpu_idle
        figures.cpu_split = CpuSplit.of(operator.pid).since(split_idle)
        if floor is not None and figures.floor is not None:
            figures.floor.cpu_busy = cpu_seconds(floor.pid) - floor_cpu_idle
            if floor_split_idle is not None:
                figures.floor.cpu_split = CpuSplit.of(floor.pid).since(floor_split_idle)
        if sampler is not None:
            sampler.send_signal(signal.SIGINT)  # py-spy writes its samples on SIGINT
            sampler.wait(timeout=60)
        # Let the Created status writes and events still queued land before counting.
        time.sleep(3.0)
        figures.rss_end = rss_mib(operator.pid)
        figures.rss_peak = peak_rss_mib(operator.pid)
        figures.mappings = describe_mappings(operator.pid)
        if floor is not None and figures.floor is not None:
            figures.floor.rss_end = rss_mib(floor.pid)
            figures.floor.rss_peak = peak_rss_mib(floor.pid)
        if profile is not None and args.profile in ("cpu", "memory", "malloc"):
            dump_profile(operator, profile / f"{args.profile}.done")
    finally:
        if sampler is not None and sampler.poll() is None:
            sampler.kill()
            sampler.wait()
        for process in (operator, floor):
            if process is None:
                continue
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        log.close()
    figures.writes, figures.errors = server.operator_calls()
    figures.load = (started_load, load_average())
    return figures


def peak_rss_mib(pid: int) -> float:
    """The most resident memory ``pid`` has had, in MiB (VmHWM: what a memory limit must
    allow, where VmRSS at the end is what the operator keeps)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise SystemExit(f"no VmHWM for {pid}: the process is gone")


def start_py_spy(pid: int, folder: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling ``pid`` until SIGINT: the thread holding the GIL (the Python CPU),
    50 times a second, as folded stacks in ``DIR/py-spy.txt`` (``folder``)."""
    py_spy = shutil.which("py-spy")
    if py_spy is None:
        raise SystemExit("--profile py-spy: no py-spy on PATH (pip install py-spy, anywhere)")
    folder.mkdir(parents=True, exist_ok=True)
    argv = [
        py_spy, "record", "--pid", str(pid), "--gil", "--rate", "50",
        "--format", "raw", "--output", str(folder / "py-spy.txt"),
    ]  # fmt: skip
    sampler = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)  # attached before the first job
    return sampler


def dump_profile(operator: subprocess.Popen[bytes], done: Path) -> None:
    """Ask the operator (run by bench/operator_profile.py) to write its profile, and wait."""
    done.unlink(missing_ok=True)
    operator.send_signal(signal.SIGUSR1)
    deadline = time.monotonic() + 120
    while not done.exists():
        if time.monotonic() > deadline or operator.poll() is not None:
            raise SystemExit(f"the operator wrote no profile ({done})")
        time.sleep(0.2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--workers", type=int, default=16, help="operator reconcile workers")
    parser.add_argument("--clients", type=int, default=8, help="parallel job submitters")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--server", choices=("kmock", "real", "both"), default="both")
    parser.add_argument(
        "--operator-src",
        nargs="+",
        type=Path,
        metavar="SRC",
        help="run the operator of each of these src folders, side by side (default: this tree)",
    )
    parser.add_argument(
        "--no-floor",
        dest="floor",
        action="store_false",
        help="do not run kopf alone beside the operator (bench/operator_floor.py)",
    )
    parser.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run each operator this many times, the order of --operator-src reversed every"
        " other round",
    )
    parser.add_argument(
        "--floor-writes",
        action="store_true",
        help="each round, run the operator alone and then the writing floor alone (kopf and"
        " each job's minimal writes through the operator's client, bench/operator_floor.py),"
        " each against a fresh server with the same jobs, the order reversed every other round",
    )
    parser.add_argument("--profile", choices=("cpu", "memory", "malloc", "py-spy"))
    parser.add_argument(
        "--profile-dir", type=Path, help="where --profile writes (one folder a run)"
    )
    args = parser.parse_args()
    if args.profile and not args.profile_dir:
        parser.error("--profile needs --profile-dir")
    if args.floor_writes and len(args.operator_src or ()) > 1:
        parser.error("--floor-writes runs one operator (one --operator-src at most)")
    if args.floor_writes and args.profile not in (None, "py-spy"):
        parser.error("--floor-writes profiles with py-spy only (it samples either process)")
    servers = {"kmock": kmock_server, "real": real_server}
    chosen = list(servers) if args.server == "both" else [args.server]
    sources: list[Path | None] = list(args.operator_src or [None])
    # What each round runs: (the column's name after the server's, the src, the subject).
    runs: list[tuple[str, Path | None, str]] = [
        ("" if src is None else f" {number + 1}", src, OPERATOR)
        for number, src in enumerate(sources)
    ]
    if args.floor_writes:
        runs = [(f" {OPERATOR}", sources[0], OPERATOR), (f" {WRITING_FLOOR}", None, WRITING_FLOOR)]
    results = {}
    pairs: list[tuple[str, str]] = []  # (the operator's column, the writing floor's), a round
    for name in chosen:
        for round_ in range(args.rounds):
            # Every other round in the other order: the later run of a pair tends to cost
            # more on this machine (1-2 ms a job), whichever process it is.
            columns: dict[str, str] = {}
            for label, src, subject in runs if round_ % 2 == 0 else runs[::-1]:
                column = name + label + (f" r{round_ + 1}" if args.rounds > 1 else "")
                columns[subject] = column
                profile = args.profile_dir / column.replace(" ", "-") if args.profile else None
                with tempfile.TemporaryDirectory() as tmp, servers[name](Path(tmp)) as server:
                    results[column] = run(server, args, Path(tmp), src, profile, subject)
            if args.floor_writes:
                pairs.append((columns[OPERATOR], columns[WRITING_FLOOR]))

    minimum = args.jobs * (2 * args.replicas + 1)
    print(
        f"jobs x replicas        {args.jobs} x {args.replicas} ({args.jobs * args.replicas} pods)"
    )
    print(f"operator workers       {args.workers}")

    def objects(f: Figures) -> int:
        return sum(n for r, n in f.writes.items() if not r.endswith(" events"))

    def events(f: Figures) -> int:
        return sum(n for r, n in f.writes.items() if r.endswith(" events"))

    def ms(seconds: float) -> str:
        return f"{1000 * seconds / args.jobs:.1f}"

    def loop_and_rest(split: CpuSplit | None) -> str:
        if split is None:
            return "-"
        loop = split.main_user + split.main_system
        return f"{ms(loop)}, {ms(split.others_user + split.others_system)} ms"

    rows: list[tuple[str, Callable[[Figures], str]]] = [
        ("load average, start", lambda f: f.load[0]),
        ("load average, end", lambda f: f.load[1]),
        ("jobs submitted in", lambda f: f"{f.submitted:.1f} s"),
        ("all pods exist after", lambda f: f"{f.elapsed:.1f} s"),
        ("throughput", lambda f: f"{args.jobs / f.elapsed:.1f} jobs/s"),
        ("CPU", lambda f: f"{f.cpu_busy:.1f} s"),
        ("CPU per job", lambda f: f"{ms(f.cpu_busy)} ms"),
        ("  loop, rest per job", lambda f: loop_and_rest(f.cpu_split)),
        ("CPU user+system, s", lambda f: str(f.cpu_split or "-")),
        (
            "object writes per job",
            lambda f: f"{objects(f) / args.jobs:.2f} (ratio {objects(f) / minimum:.3f})",
        ),
        ("events per job", lambda f: f"{events(f) / args.jobs:.2f}"),
        ("RSS", lambda f: f"{f.rss_idle:.0f} MiB idle, {f.rss_end:.0f} at the end"),
        ("peak RSS", lambda f: f"{f.rss_peak:.0f} MiB"),
    ]
    if pairs:
        operator_of = {floor: operator for operator, floor in pairs}

        def against(f: Figures, count: Callable[[Figures], int]) -> str:
            column = next(c for c, g in results.items() if g is f)
            if column not in operator_of:
                return "-"
            theirs = count(results[operator_of[column]])
            return f"{count(f) / theirs:.3f}" if theirs else "-"

        rows += [
            ("objects vs operator's", lambda f: against(f, objects)),
            ("events vs operator's", lambda f: against(f, events)),
        ]
    if args.floor:

        def floor_row(show: Callable[[Floor], str]) -> Callable[[Figures], str]:
            return lambda f: show(f.floor) if f.floor is not None else "-"

        per_job = floor_row(lambda f: f"{ms(f.cpu_busy)} ms")
        resident = floor_row(lambda f: f"{f.rss_idle:.0f} MiB idle, {f.rss_end:.0f} at the end")
        rows += [
            ("kopf alone: CPU per job", per_job),
            ("  loop, rest per job", floor_row(lambda f: loop_and_rest(f.cpu_split))),
            ("kopf alone: RSS", resident),
            ("kopf alone: peak RSS", floor_row(lambda f: f"{f.rss_peak:.0f} MiB")),
        ]
    print(f"{'':24}" + "".join(f"{name:>28}" for name in results))
    for label, show in rows:
        print(f"{label:24}" + "".join(f"{show(f):>28}" for f in results.values()))
    print(f"minimum object writes per job: {minimum / args.jobs:.0f}")
    for number, src in enumerate(args.operator_src or ()):
        print(f"operator {number + 1}: {src.resolve()}")
    for operator, floor in pairs:
        mine, its = results[operator], results[floor]
        line = f"{operator}: above the writing floor {ms(mine.cpu_busy - its.cpu_busy)} ms a job"
        if mine.cpu_split is not None and its.cpu_split is not None:
            a, b = mine.cpu_split, its.cpu_split
            loop = a.main_user + a.main_system - b.main_user - b.main_system
            rest = a.others_user + a.others_system - b.others_user - b.others_system
            line += f" (loop {ms(loop)}, rest {ms(rest)})"
        same = "the same" if mine.writes == its.writes else "NOT the same"
        print(f"{line}; writes by verb and resource {same} as the operator's")
    for name, f in results.items():
        print(f"{name}: RSS at the end: {f.mappings}")
    for name, f in results.items():
        print(f"{name}: writes by verb and resource {dict(sorted(f.writes.items()))}")
        print(f"{name}: error answers {dict(f.errors) or 'none'}")


if __name__ == "__main__":
    main()
