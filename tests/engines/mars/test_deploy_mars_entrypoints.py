"""The in-pod entrypoints' decisions, without Mars: what they read from the pod's
environment, the arguments they give Mars, and where they look for the supervisors.
(tests/e2e/test_mars_local.py runs them with the real Mars.)"""

from __future__ import annotations

import asyncio
import faulthandler
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubemill.engines.mars.pod import entrypoint as entry
from kubemill.engines.mars.pod import service
from kubemill.engines.mars.pod.entrypoint import PodSettings, SeenPod, SettingsError

POD = {
    "MARS_K8S_POD_NAME": "c-worker-abc",
    "MARS_K8S_POD_NAMESPACE": "team",
    "MARS_K8S_POD_IP": "10.0.0.7",
}


def settings(role: str = "worker", **env: str) -> PodSettings:
    return PodSettings.from_env(role, {**POD, **env})


def test_importing_the_entrypoints_needs_no_mars() -> None:
    probe = "import sys, kubemill.engines.mars.pod.entrypoint; print('mars' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_the_pods_environment_is_read_with_defaults() -> None:
    worker = settings(
        MARS_CPU_TOTAL="0.5", MARS_MEMORY_TOTAL="1073741824", MARS_SUPERVISOR_SERVICE="c-web"
    )
    assert worker.address == "10.0.0.7:7103"
    assert (worker.cpu, worker.memory, worker.web_port) == (1, 1073741824, 7104)
    assert worker.service == "c-web"
    assert worker.ready_file == Path("/tmp/kubemill-mars-ready")
    moved = settings(KUBEMILL_MARS_READY_FILE="/run/ready", MARS_SERVICE_PORT="9000")
    assert moved.ready_file == Path("/run/ready") and moved.address == "10.0.0.7:9000"
    assert settings(MARS_CPU_TOTAL="3").cpu == 3


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"MARS_K8S_POD_IP": ""}, "MARS_K8S_POD_IP: not set"),
        ({"MARS_CPU_TOTAL": "lots"}, "MARS_CPU_TOTAL: expected a number"),
        ({"MARS_MEMORY_TOTAL": "-5"}, "MARS_MEMORY_TOTAL: expected a positive number"),
        ({"KUBEMILL_MARS_SUPERVISORS": "10.0.0.1"}, "KUBEMILL_MARS_SUPERVISORS: expected host"),
    ],
)
def test_a_bad_environment_names_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(SettingsError, match=named):
        settings(**env)


def test_an_unknown_role_is_refused_with_usage() -> None:
    with pytest.raises(SettingsError, match="role"):
        PodSettings.from_env("scheduler", POD)
    assert entry.main(["scheduler"]) == 2


def test_mars_gets_the_pods_address_resources_and_supervisors() -> None:
    worker = settings(MARS_CPU_TOTAL="2", MARS_MEMORY_TOTAL="4096")
    assert entry.mars_argv(worker, ["10.0.0.1:7103", "10.0.0.2:7103"]) == [
        "-H", "10.0.0.7", "-p", "7103",
        "-s", "10.0.0.1:7103,10.0.0.2:7103",
        "--n-cpu", "2", "--mem-bytes", "4096",
    ]  # fmt: skip
    supervisor = PodSettings.from_env("supervisor", {**POD, "MARS_K8S_POD_IP": "10.0.0.1"})
    # Its own address is not among the others; alone, it still gets an (empty) list, so
    # Mars never adopts supervisors it finds in TMPDIR.
    assert entry.mars_argv(supervisor, ["10.0.0.1:7103", "10.0.0.2:7103"])[-2:] == [
        "-s",
        "10.0.0.2:7103",
    ]
    assert entry.mars_argv(supervisor, ["10.0.0.1:7103"])[-6:] == [
        "-p", "7103", "-w", "7104", "-s", "",
    ]  # fmt: skip


def test_supervisor_pods_give_addresses_once_usable() -> None:
    starting = [SeenPod("s-0", "10.0.0.1", ready=False), SeenPod("s-1", "", ready=False)]
    assert entry.supervisors_from_pods(starting, "supervisor", 7103) is None
    assert entry.supervisors_from_pods(starting, "worker", 7103) is None
    placed = [
        SeenPod("s-1", "10.0.0.2", ready=False),
        SeenPod("s-0", "10.0.0.1", ready=True),
        SeenPod("s-old", "", ready=False, deleting=True),
    ]
    assert entry.supervisors_from_pods(placed, "supervisor", 7103) == [
        "10.0.0.1:7103",
        "10.0.0.2:7103",
    ]
    assert entry.supervisors_from_pods(placed, "worker", 7103) == ["10.0.0.1:7103"]


def test_supervisors_are_looked_for_explicitly_then_by_api_then_by_service() -> None:
    asked: list[str] = []
    naps: list[float] = []
    answers: dict[str, list[list[str] | None]] = {"api": [[], ["10.0.0.1:7103"]], "svc": [[]]}

    def api(_settings: PodSettings) -> list[str] | None:
        asked.append("api")
        return answers["api"].pop(0)

    def service(_settings: PodSettings) -> list[str]:
        asked.append("service")
        found = answers["svc"].pop(0)
        return found or []

    explicit = settings(KUBEMILL_MARS_SUPERVISORS="1.2.3.4:7103, 1.2.3.5:7103")
    got = entry.find_supervisors(explicit, sleep=naps.append, kubernetes=api, service=service)
    assert got == ["1.2.3.4:7103", "1.2.3.5:7103"] and not asked

    got = entry.find_supervisors(settings(), sleep=naps.append, kubernetes=api, service=service)
    assert got == ["10.0.0.1:7103"]
    assert asked == ["api", "service", "api"] and len(naps) == 1

    # No API to ask: the web Service lists the ready supervisors.
    got = entry.find_supervisors(
        settings(),
        sleep=naps.append,
        kubernetes=lambda _s: None,
        service=lambda _s: ["10.0.0.9:7103"],
    )
    assert got == ["10.0.0.9:7103"]
    # A supervisor with nobody to ask and nobody serving starts alone.
    alone = PodSettings.from_env("supervisor", POD)
    got = entry.find_supervisors(
        alone, sleep=naps.append, kubernetes=lambda _s: None, service=lambda _s: []
    )
    assert got == ["10.0.0.7:7103"]


# --- a TMPDIR short enough for Mars's unix sockets ------------------------------------------


def test_a_short_tmpdir_is_kept_as_it_is(tmp_path: Path) -> None:
    environ = {"TMPDIR": "/tmp/x"}
    with entry.short_tmpdir(environ, link_dir=str(tmp_path)) as link:
        assert link is None
        assert environ["TMPDIR"] == "/tmp/x"
    assert list(tmp_path.iterdir()) == []


def test_a_long_tmpdir_is_stood_for_by_a_short_link_while_inside(tmp_path: Path) -> None:
    real = tmp_path / ("deep-" * 20)
    real.mkdir()
    environ = {"TMPDIR": str(real)}
    links = tmp_path / "links"
    links.mkdir()
    with entry.short_tmpdir(environ, link_dir=str(links)) as link:
        assert link is not None
        assert Path(link).parent == links
        # Under the default /tmp, a Mars socket path (+ "/mars/" + 32 hex digits) fits.
        assert len(f"{entry.LINK_DIR}/{Path(link).name}/mars/{'0' * 32}") <= 107
        assert environ["TMPDIR"] == link
        assert Path(link).resolve() == real.resolve()
        (Path(link) / "f").write_text("x")  # the files live in the real directory
        assert (real / "f").read_text() == "x"
    assert environ["TMPDIR"] == str(real)
    assert list(links.iterdir()) == []
    # The same directory gets the same link (a restarted replica).
    with entry.short_tmpdir(environ, link_dir=str(links)) as again:
        assert again == link


def test_a_stopping_service_drops_its_link_and_a_start_sweeps_dangling_ones(
    tmp_path: Path,
) -> None:
    links = tmp_path / "links"
    links.mkdir()
    gone = links / (entry.LINK_PREFIX + "0123456789ab")
    gone.symlink_to(tmp_path / "deleted-job")  # a killed replica's link, its job deleted
    other = links / "someone-elses"
    other.symlink_to(tmp_path / "deleted-too")
    real = tmp_path / ("deep-" * 20)
    real.mkdir()
    environ = {"TMPDIR": str(real)}
    with entry.short_tmpdir(environ, link_dir=str(links)) as link:
        assert not gone.is_symlink()  # swept
        assert other.is_symlink()  # not ours
        entry.drop_short_tmpdir(environ, link_dir=str(links))
        assert link is not None and not Path(link).is_symlink()
    entry.drop_short_tmpdir({"TMPDIR": str(real)}, link_dir=str(links))  # not a link: kept
    assert real.is_dir()


def test_the_contract_constants_are_the_builders() -> None:
    from kubemill.engines.mars import framework as builders

    assert entry.READY_FILE == builders.READY_FILE
    assert (entry.LABEL_ROLE, entry.LABEL_CLUSTER) == (
        builders.LABEL_MARS_ROLE,
        builders.LABEL_MARS_CLUSTER,
    )
    assert (entry.ENV_SUPERVISORS, entry.ENV_READY_FILE) == (
        builders.ENV_SUPERVISORS,
        builders.ENV_READY_FILE,
    )


# --- a worker waits, boundedly, for its supervisors ----------------------------------------


class Clock:
    """A clock the waits read, moved on by their naps."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now

    def nap(self, seconds: float) -> None:
        self.now += seconds


def test_the_waits_are_read_from_the_environment() -> None:
    assert (settings().supervisor_wait, settings().start_wait) == (
        entry.SUPERVISOR_WAIT,
        entry.START_WAIT,
    )
    given = settings(KUBEMILL_MARS_SUPERVISOR_WAIT="30", KUBEMILL_MARS_START_WAIT="7")
    assert (given.supervisor_wait, given.start_wait) == (30, 7)
    with pytest.raises(SettingsError, match="KUBEMILL_MARS_START_WAIT: expected a positive"):
        settings(KUBEMILL_MARS_START_WAIT="0")


def test_finding_the_supervisors_gives_up_at_the_deadline_naming_the_setting() -> None:
    clock = Clock()
    waiting = settings(KUBEMILL_MARS_SUPERVISOR_WAIT="5", MARS_SUPERVISOR_SERVICE="c-web")
    with pytest.raises(entry.StartFailure, match=r"c-web within 5 s \(KUBEMILL_MARS_SUPERVISOR"):
        entry.find_supervisors(
            waiting,
            sleep=clock.nap,
            kubernetes=lambda _s: [],
            service=lambda _s: [],
            clock=clock,
        )
    assert clock.now == pytest.approx(105.0)  # it asked until the deadline, not past it


@pytest.mark.parametrize(
    ("answers", "not_up"),
    [
        ({"a:1": None, "b:1": None}, ["a:1", "b:1"]),
        ({"a:1": set(), "b:1": None}, ["a:1", "b:1"]),  # a answers, but lists no one ready
        ({"a:1": {"a:1"}, "b:1": None}, ["b:1"]),
        ({"a:1": {"a:1", "b:1"}, "b:1": set()}, []),  # b's info is held by a's collector
        ({"a:1": {"b:1"}, "b:1": {"a:1"}}, []),
    ],
)
def test_supervisors_are_up_once_they_answer_and_are_listed_ready(
    answers: dict[str, set[str] | None], not_up: list[str]
) -> None:
    assert entry.supervisors_not_up(["a:1", "b:1"], answers) == not_up


def test_a_worker_waits_until_its_supervisors_answer_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    replies: list[set[str] | None] = [None, None, set(), {"s:7103"}]
    asked: list[str] = []

    async def ask(address: str) -> set[str] | None:
        asked.append(address)
        clock.nap(1)
        return replies.pop(0)

    with caplog.at_level("WARNING", logger="kubemill.engines.mars.pod"):
        asyncio.run(
            entry.wait_for_supervisors(
                ["s:7103"], ask=ask, deadline=clock() + 60, wait=60, clock=clock, nap=0
            )
        )
    assert asked == ["s:7103"] * 4 and not replies
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 2, said
    assert said[0].startswith("waiting up to") and "s:7103" in said[0]
    assert said[1] == "the supervisors answered after 4 s"


def test_a_worker_whose_supervisor_never_answers_gives_up_at_the_deadline() -> None:
    clock = Clock()

    async def ask(address: str) -> set[str] | None:
        clock.nap(1)
        return {"other:1"} if address == "up:1" else None

    with pytest.raises(entry.StartFailure) as failed:
        asyncio.run(
            entry.wait_for_supervisors(
                ["up:1", "down:1"], ask=ask, deadline=clock() + 10, wait=10, clock=clock, nap=0
            )
        )
    message = str(failed.value)
    assert "up:1, down:1" in message  # up:1 answers, but nobody lists it ready
    assert "within 10 s (KUBEMILL_MARS_SUPERVISOR_WAIT)" in message
    assert clock.now >= 110


def test_the_entrypoint_exits_1_with_the_reason_when_it_gives_up(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    def fail(_environ: object) -> None:
        raise entry.StartFailure("no plasma here")

    monkeypatch.setattr(entry, "check_plasma", fail)
    ready = tmp_path / "ready"
    ready.write_text("stale")
    environ = {**POD, "KUBEMILL_MARS_READY_FILE": str(ready)}
    assert entry.run("worker", environ) == 1
    assert "kubemill.engines.mars.pod.entrypoint: no plasma here" in capsys.readouterr().err
    assert not ready.exists()


# --- the worker's plasma store ---------------------------------------------------------------


def test_a_shm_that_cannot_hold_the_plasma_store_is_named_with_both_sizes() -> None:
    cache = 1 << 30
    store = int(cache * entry.PLASMA_SHARE)
    assert entry.shm_problem(cache, store) is None
    assert entry.shm_problem(cache, 1 << 31) is None
    problem = entry.shm_problem(cache, 64 << 20)
    assert problem is not None
    assert f"MARS_CACHE_MEM_SIZE={cache}" in problem and "/dev/shm" in problem
    assert f"({store} bytes)" in problem and f"({64 << 20} bytes)" in problem


def test_a_worker_without_pyarrows_plasma_is_refused_before_mars_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(entry.importlib.util, "find_spec", lambda _name: None)
    with pytest.raises(entry.StartFailure, match=r"needs pyarrow==11\.0\.0"):
        entry.check_plasma({})


def test_the_cache_is_checked_against_the_shm_it_would_live_in(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(entry.importlib.util, "find_spec", lambda name: object())
    disk = os.statvfs(tmp_path)
    total = disk.f_blocks * disk.f_frsize
    entry.check_plasma({"MARS_CACHE_MEM_SIZE": str(total // 2)}, shm_path=str(tmp_path))
    entry.check_plasma({"MARS_CACHE_MEM_SIZE": "40%"}, shm_path=str(tmp_path))  # Mars's to size
    entry.check_plasma({}, shm_path=str(tmp_path))
    with pytest.raises(entry.StartFailure, match=f"does not fit in {tmp_path} "):
        entry.check_plasma({"MARS_CACHE_MEM_SIZE": str(total * 2)}, shm_path=str(tmp_path))
    with pytest.raises(entry.StartFailure, match="No such file"):
        entry.check_plasma({"MARS_CACHE_MEM_SIZE": "1"}, shm_path=str(tmp_path / "none"))


def test_a_stop_request_cancels_the_service_and_ends_the_pools_recovery_and_monitor() -> None:
    # The local substrate's SIGTERM reaches Mars's sub pools too: a pool still recovering
    # them would start new ones while it stops (and its stop waits for that). Its stop also
    # waits for its monitor of the sub pools, which ends by itself only after its nap.
    naps: list[str] = []

    async def monitor() -> None:
        # As Mars's MainActorPool.monitor_sub_pools: look, nap, until stopped or cancelled.
        try:
            while True:
                naps.append("nap")
                await asyncio.sleep(60)
        except asyncio.CancelledError:
            naps.append("ended")

    class Pool:
        _auto_recover: bool | str = "actor"
        _monitor_task: asyncio.Task[None] | None = None

    class Runner:
        pool: Pool | None = None

    async def stop(runner: Runner, *, monitored: bool) -> bool:
        if runner.pool is not None and monitored:
            runner.pool._monitor_task = asyncio.create_task(monitor())
        main = asyncio.create_task(asyncio.sleep(60))
        await asyncio.sleep(0)
        service._stop_requested(settings(), main, runner)
        service._stop_requested(settings(), main, runner)  # a second signal changes nothing
        with pytest.raises(asyncio.CancelledError):
            await main
        if runner.pool is not None and runner.pool._monitor_task is not None:
            # What the pool's stop awaits: over already, not napping (cancelled first).
            assert runner.pool._monitor_task.done()
        return main.cancelled()

    try:
        before_the_pool = Runner()
        assert asyncio.run(stop(before_the_pool, monitored=False))
        not_monitoring_yet = Runner()
        not_monitoring_yet.pool = Pool()
        assert asyncio.run(stop(not_monitoring_yet, monitored=False))
        assert not_monitoring_yet.pool._auto_recover is False
        running = Runner()
        running.pool = Pool()
        assert asyncio.run(stop(running, monitored=True))
        assert running.pool._auto_recover is False
        assert naps == ["nap", "ended"]
    finally:
        faulthandler.cancel_dump_traceback_later()
