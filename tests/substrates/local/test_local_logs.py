"""Replica logs on the local substrate: kept apart per stream, private, rotated without
loss, and read with ``tail``, ``since``, ``limit_bytes`` and timestamps (real processes)."""

from __future__ import annotations

import os
import stat
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from local_support import container, pytorch_job

from kubemill.sdk import JobClient
from kubemill.substrates.base import LogQuery, SubmitOptions, SubstrateError
from kubemill.substrates.local import LocalBackend, procinfo
from kubemill.substrates.local.log_keeper import KEEPER, LogKeeper
from kubemill.substrates.local.log_reads import ReplicaLog, follow, read_all
from kubemill.substrates.local.logs import LogPolicy, stream_paths
from support.waiting import eventually


def run(backend: LocalBackend, name: str, master: str) -> None:
    backend.submit(pytorch_job(name, master=master), SubmitOptions(detach=False))
    view = backend.wait(name, timeout=120)
    assert view.finished, view.status


def texts(backend: LocalBackend, name: str, query: LogQuery | None = None) -> list[str]:
    return [line.text for line in backend.logs(name, query=query)]


def disk_usage(directory: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in directory.iterdir() if p.is_file())


def test_a_stdout_line_without_newline_and_the_next_stderr_line_stay_apart(
    backend: LocalBackend,
) -> None:
    run(
        backend,
        "apart",
        "import sys\n"
        "sys.stdout.write('no newline yet'); sys.stdout.flush()\n"
        "sys.stderr.write('an error\\n'); sys.stderr.flush()\n",
    )

    assert sorted(texts(backend, "apart")) == ["an error", "no newline yet"]


def test_log_files_are_0600_in_private_directories(backend: LocalBackend) -> None:
    run(backend, "private", "import sys; print('out'); print('err', file=sys.stderr)")

    rec = backend.store.job("default", "private")
    logs_dir = rec.logs_dir
    assert stat.S_IMODE(backend.state_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(logs_dir.stat().st_mode) == 0o700
    files = sorted(p.name for p in logs_dir.iterdir())
    assert "private-master-0.log" in files and "private-master-0.stderr.log" in files
    for path in logs_dir.iterdir():
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path.name


PRINT_50_MB = (
    "import sys\n"
    "w = sys.stdout.write\n"
    "for i in range(500_000):\n"
    "    w('%08d %s\\n' % (i, 'y' * 90))\n"  # 100 bytes a line
    "sys.stdout.flush()\n"
    "print('done', file=sys.stderr)\n"
)


def test_a_replica_printing_50_mb_keeps_a_bounded_log_without_gaps(
    backend: LocalBackend, isolated: Path
) -> None:
    # The isolated fixture points KUBEMILL_CONFIG at this file.
    (isolated / "no-config.yaml").write_text("containerLogMaxSize: 1Mi\ncontainerLogMaxFiles: 3\n")

    run(backend, "loud", PRINT_50_MB)
    KEEPER.flush()  # the keeper's last look at the exited replica, done now

    logs_dir = backend.store.job("default", "loud").logs_dir
    out, _ = stream_paths(logs_dir / "loud-master-0.log")
    assert out.stat().st_size == 50_000_000  # every byte went through the live file
    # Kept: 2 chunks of 1 MiB and what is live; without rotation it would be 50 MB.
    assert disk_usage(logs_dir) < 4 * 2**20
    chunks = [p for p in logs_dir.iterdir() if p.name.startswith("loud-master-0.log.0")]
    assert 1 <= len(chunks) <= 2
    lines = texts(backend, "loud")
    assert lines[-1] == "done"
    # Chunks are cut where lines end: the oldest kept line is whole too.
    assert all(len(text) == 99 for text in lines[:-1])
    numbers = [int(text.split()[0]) for text in lines[:-1]]
    assert numbers[-1] == 499_999
    # What is kept is the newest output, whole: no line lost inside it.
    assert numbers == list(range(numbers[0], 500_000))
    assert len(numbers) * 100 >= 2**20  # at least the newest chunk, whole


@dataclass
class _Proc:
    returncode: int | None = None


def test_rotation_loses_nothing_a_writer_appends_or_a_follower_reads_meanwhile(
    tmp_path: Path,
) -> None:
    logs_dir = tmp_path / "logs"
    LogPolicy(max_size=64 * 1024, max_files=400).save(logs_dir)
    log_path = str(logs_dir / "r-0.log")
    out_path, _ = stream_paths(log_path)
    keeper = LogKeeper(tick=0.001)
    proc = _Proc()
    fd = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    keeper.watch(log_path, proc)
    total = 200_000
    written = threading.Event()

    def write() -> None:
        for i in range(0, total, 100):
            os.write(fd, b"".join(b"%07d\n" % n for n in range(i, i + 100)))
        written.set()

    followed: list[str] = []

    def read_along() -> None:
        log = ReplicaLog("r-0", log_path, LogQuery())
        followed.extend(line.text for line in follow([log], finished=written.is_set))

    writer = threading.Thread(target=write)
    reader = threading.Thread(target=read_along)
    reader.start()
    writer.start()
    writer.join()
    reader.join(timeout=120)
    os.close(fd)
    proc.returncode = 0
    keeper.flush()

    chunks = [p for p in logs_dir.iterdir() if p.name.startswith("r-0.log.0")]
    assert len(chunks) > 10  # it did rotate, many times, while the writer wrote
    numbers = [int(line.text) for line in read_all([ReplicaLog("r-0", log_path, LogQuery())])]
    assert numbers == list(range(total))
    # The follower read through the rotations: every line once, in order, no NULs.
    assert followed == [f"{n:07d}" for n in range(total)]


def test_a_forgotten_directory_gets_no_more_marks_so_its_removal_leaves_nothing(
    tmp_path: Path,
) -> None:
    # The supervisor removes a deleted job's directory as its replicas end: the keeper's last
    # look at an ended replica must not mark a file into it meanwhile (a marks file created
    # while the directory is removed leaves the directory behind).
    job_dir = tmp_path / "job"
    logs_dir = job_dir / "logs"
    LogPolicy(max_size=64 * 1024, max_files=2).save(logs_dir)
    log_path = str(logs_dir / "r-0.log")
    out_path, _ = stream_paths(log_path)
    Path(out_path).write_text("up\n")
    keeper = LogKeeper(tick=3600)  # its thread sleeps: the looks are this test's
    keeper.watch(log_path, _Proc(returncode=0))
    before = sorted(p.name for p in logs_dir.iterdir())
    keeper.forget(str(job_dir))
    keeper.flush()
    assert sorted(p.name for p in logs_dir.iterdir()) == before  # no marks file
    keeper.watch(log_path, _Proc(returncode=0))  # a directory watched again is kept again
    keeper.flush()
    assert len(list(logs_dir.iterdir())) == len(before) + 1


def test_a_detached_supervisor_rotates_with_the_policy_of_submit_time(
    backend: LocalBackend, isolated: Path
) -> None:
    (isolated / "no-config.yaml").write_text("containerLogMaxSize: 64Ki\ncontainerLogMaxFiles: 2\n")
    backend.submit(
        pytorch_job(
            "detached",
            master="import time\nfor i in range(40_000): print('%08d' % i)\ntime.sleep(0.5)",
        ),
        SubmitOptions(detach=True),
    )
    (isolated / "no-config.yaml").unlink()  # the job keeps the policy it was given
    assert backend.wait("detached", timeout=120).finished

    logs_dir = backend.store.job("default", "detached").logs_dir
    assert disk_usage(logs_dir) < 2**20  # 360 KB printed, 64 KiB chunks, one kept
    numbers = [int(text) for text in texts(backend, "detached")]
    assert numbers[-1] == 39_999
    assert numbers == list(range(numbers[0], 40_000))
    assert numbers[0] > 0


def test_tail_and_limit_bytes_apply_to_each_replica(backend: LocalBackend) -> None:
    code = (
        "import os, sys\n"
        "me = os.environ['HOSTNAME'][-8:]\n"
        "for i in range(5): print(f'{me} line-{i}', flush=True)\n"
    )
    backend.submit(
        pytorch_job("tails", master=code, worker=code, workers=1), SubmitOptions(detach=False)
    )
    assert backend.wait("tails", timeout=120).finished

    tail = [(line.replica, line.text) for line in backend.logs("tails", query=LogQuery(tail=2))]
    assert tail == [
        ("tails-master-0", "master-0 line-3"),
        ("tails-master-0", "master-0 line-4"),
        ("tails-worker-0", "worker-0 line-3"),
        ("tails-worker-0", "worker-0 line-4"),
    ]
    # 16 bytes is the first line and its newline; 20 cuts the second line after 4 bytes.
    assert texts(backend, "tails", LogQuery(limit_bytes=16)) == [
        "master-0 line-0",
        "worker-0 line-0",
    ]
    limited = list(backend.logs("tails", replica="master-0", query=LogQuery(limit_bytes=20)))
    assert [line.text for line in limited] == ["master-0 line-0", "mast"]
    assert texts(backend, "tails", LogQuery(tail=0)) == []


def test_since_and_timestamps_tell_lines_apart_by_when_they_were_written(
    backend: LocalBackend, tmp_path: Path
) -> None:
    go = tmp_path / "go"
    code = (
        "import os, sys, time\n"
        "print('before', flush=True)\n"
        f"while not os.path.exists({str(go)!r}): time.sleep(0.01)\n"
        "print('after', flush=True)\n"
        "print('after on stderr', file=sys.stderr, flush=True)\n"
    )
    backend.submit(pytorch_job("when", master=code), SubmitOptions(detach=False))
    marks = stream_paths(backend.store.job("default", "when").logs_dir / "when-master-0.log")[0]
    marks = marks.with_name(marks.name + ".marks")

    # Once the keeper has marked the first line, its time is settled (and before now).
    def before_marked() -> bool:
        text = marks.read_text() if marks.exists() else ""
        return any(int(line.split()[0]) >= len("before\n") for line in text.splitlines())

    eventually(before_marked, what="a mark after the first line")
    between = datetime.now(UTC)
    time.sleep(0.05)
    go.touch()
    assert backend.wait("when", timeout=120).finished

    everything = list(backend.logs("when"))
    assert [line.text for line in everything] == ["before", "after", "after on stderr"]
    before, after, _ = (line.time for line in everything)
    assert before is not None and after is not None
    assert before <= between < after

    assert texts(backend, "when", LogQuery(since=between)) == ["after", "after on stderr"]
    assert texts(backend, "when", LogQuery(since=timedelta(hours=1))) == [
        "before",
        "after",
        "after on stderr",
    ]

    client = JobClient("local", state_dir=backend.state_dir)
    stamped = list(client.logs("when", timestamps=True, tail=1))
    stamp, _, text = stamped[0].text.partition(" ")
    assert text == "after on stderr"
    assert datetime.fromisoformat(stamp) == stamped[0].time


def test_bad_log_options_are_refused_with_the_argument_named(backend: LocalBackend) -> None:
    run(backend, "opts", "print('x')")
    client = JobClient("local", state_dir=backend.state_dir)
    with pytest.raises(ValueError, match="tail"):
        client.logs("opts", tail=-2)
    with pytest.raises(ValueError, match="limit_bytes"):
        client.logs("opts", limit_bytes=0)
    with pytest.raises(ValueError, match="since"):
        client.logs("opts", since="5m")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("config", "key"),
    [
        pytest.param("containerLogMaxSize: lots\n", "containerLogMaxSize", id="size-text"),
        pytest.param("containerLogMaxSize: 10\n", "containerLogMaxSize", id="size-tiny"),
        pytest.param("containerLogMaxFiles: 1\n", "containerLogMaxFiles", id="files-one"),
        pytest.param("containerLogMaxFiles: two\n", "containerLogMaxFiles", id="files-text"),
    ],
)
def test_a_bad_log_policy_in_the_config_is_an_error_at_submit(
    backend: LocalBackend, isolated: Path, config: str, key: str
) -> None:
    (isolated / "no-config.yaml").write_text(config)
    with pytest.raises(SubstrateError, match=f"no-config.yaml: {key}"):
        backend.submit(pytorch_job("bad", master="print(1)"), SubmitOptions(detach=False))


def test_the_log_policy_is_read_from_the_config_with_kubelet_defaults(tmp_path: Path) -> None:
    assert LogPolicy.load(tmp_path / "missing.yaml") == LogPolicy(10 * 2**20, 5)
    config = tmp_path / "config.yaml"
    config.write_text("images: {}\ncontainerLogMaxSize: 20Mi\ncontainerLogMaxFiles: 2\n")
    assert LogPolicy.load(config) == LogPolicy(20 * 2**20, 2)


def test_a_replica_restarted_in_place_appends_to_the_same_logs(backend: LocalBackend) -> None:
    code = (
        "import os, sys\n"
        "print('run', flush=True)\n"
        "sys.exit(0 if os.path.exists('marker') else open('marker', 'w').close() or 3)\n"
    )
    backend.submit(
        pytorch_job("again", master=container(code, workingDir="."), restart_policy="OnFailure"),
        SubmitOptions(detach=False, base_dir=str(backend.state_dir.parent)),
    )
    assert backend.wait("again", timeout=120).finished
    assert texts(backend, "again") == ["run", "run"]


def test_every_line_kept_before_a_supervisor_sigkill_is_still_there(
    backend: LocalBackend, isolated: Path
) -> None:
    (isolated / "no-config.yaml").write_text("containerLogMaxSize: 64Ki\ncontainerLogMaxFiles: 4\n")
    forever = (
        "import itertools, sys\n"
        "for i in itertools.count():\n"
        "    print('%08d' % i, flush=True)\n"
        "    if i % 1000 == 0: print('e%07d' % i, file=sys.stderr, flush=True)\n"
    )
    backend.submit(pytorch_job("killed", master=forever), SubmitOptions(detach=True))
    rec = eventually(
        lambda: (r := backend.store.job("default", "killed")).supervisor_state == "running" and r,
        what="the detached supervisor",
    )
    supervisor = rec.supervisor
    assert supervisor is not None
    logs_dir = rec.logs_dir
    eventually(
        lambda: len([p for p in logs_dir.iterdir() if ".log.0" in p.name]) >= 2,
        what="a few rotations",
    )
    seen = texts(backend, "killed")

    procinfo.kill_process(supervisor)
    assert procinfo.wait_gone(supervisor, timeout=30)
    assert backend.wait("killed", timeout=60).finished

    after = texts(backend, "killed")
    out = [int(t) for t in after if not t.startswith("e")]
    err = [int(t[1:]) for t in after if t.startswith("e")]
    assert out == list(range(out[0], out[-1] + 1))  # no line lost inside what is kept
    assert err == list(range(err[0], err[-1] + 1, 1000))
    last_seen = max(int(t) for t in seen if not t.startswith("e"))
    # The replica died with its supervisor; what it wrote last is there (lines read
    # before the kill may have been rotated away since, as the policy says).
    assert out[-1] >= last_seen


def test_reading_lines_looks_at_the_files_once_a_read_not_once_a_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A follower of a 1 MB/s log reads 10,000 lines a second: a stat or two a line (the
    # marks file, the log's modification time) held it to a fraction of them.
    out, err = stream_paths(tmp_path / "r.log")
    err.write_bytes(b"")
    lines = [f"line {i}" for i in range(3000)]
    out.write_text("".join(f"{line}\n" for line in lines))
    # Marks (offset, time) for the first 2,000 lines; the last 1,000 are not marked yet.
    Path(f"{out}.marks").write_text(f"{sum(len(t) + 1 for t in lines[:2000])} 1000.0\n")
    stats: list[str] = []
    real_stat = Path.stat

    def counted(self: Path, **kwargs: bool) -> os.stat_result:
        stats.append(self.name)
        return real_stat(self, **kwargs)

    monkeypatch.setattr(Path, "stat", counted)
    read = list(ReplicaLog("r", out, LogQuery()).backlog(final=True))
    assert [line.text for line in read] == lines
    assert {line.time.timestamp() for line in read[:2000] if line.time} == {1000.0}
    assert all(line.time and line.time.timestamp() >= 1000.0 for line in read[2000:])
    assert len(stats) < 30, f"{len(stats)} stats to read {len(lines)} lines"


def test_a_follower_behind_the_rotation_is_told_how_many_bytes_it_lost(tmp_path: Path) -> None:
    # As the keeper leaves them: a chunk holding bytes [100, 200) of the stream (the bytes
    # before it deleted), and the live file holding what follows, a hole before.
    out, err = stream_paths(tmp_path / "r.log")
    err.write_bytes(b"")
    early = b"".join(b"%03d-------\n" % i for i in range(10))  # rotated away, unread
    kept = b"".join(b"%03d-------\n" % i for i in range(10, 20))
    Path(f"{out}.{len(early):016d}").write_bytes(kept)
    with out.open("wb") as live:
        live.seek(len(early) + len(kept))
        live.write(b"live line\n")
    log = ReplicaLog("r", out, LogQuery())
    for tail in log.tails:
        tail.offset = 0  # a follower that read nothing since the start
    read = list(log.new_lines())
    assert [line.text for line in read] == [f"{i:03d}-------" for i in range(10, 20)] + [
        "live line"
    ]
    assert [line.rotated_away for line in read] == [len(early)] + [0] * 10
    # A follower that kept up is told of no loss.
    again = ReplicaLog("r", out, LogQuery())
    assert all(line.rotated_away == 0 for line in again.backlog(final=True))
