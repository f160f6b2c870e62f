"""The in-pod entrypoints' decisions, without Mars: what they read from the pod's
environment, the arguments they give Mars, and where they look for the supervisors.
(tests/e2e/test_mars_local.py runs them with the real Mars.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kubemill.deploy import mars as entry
from kubemill.deploy.mars import PodSettings, SeenPod, SettingsError

POD = {
    "MARS_K8S_POD_NAME": "c-worker-abc",
    "MARS_K8S_POD_NAMESPACE": "team",
    "MARS_K8S_POD_IP": "10.0.0.7",
}


def settings(role: str = "worker", **env: str) -> PodSettings:
    return PodSettings.from_env(role, {**POD, **env})


def test_importing_the_entrypoints_needs_no_mars() -> None:
    probe = "import sys, kubemill.deploy.mars; print('mars' in sys.modules)"
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
    from kubemill.frameworks import mars as builders

    assert entry.READY_FILE == builders.READY_FILE
    assert (entry.LABEL_ROLE, entry.LABEL_CLUSTER) == (
        builders.LABEL_MARS_ROLE,
        builders.LABEL_MARS_CLUSTER,
    )
    assert (entry.ENV_SUPERVISORS, entry.ENV_READY_FILE) == (
        builders.ENV_SUPERVISORS,
        builders.ENV_READY_FILE,
    )
