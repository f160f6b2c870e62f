"""The chaos test of the local substrate (issue 7): 60 seconds of submits, deletes and
SIGKILLs over 20 small jobs, through the real ``kubemill`` CLI, then a check of the truth.

**What runs.** 20 job slots (``chaos-00`` .. ``chaos-19``), each a PyTorchJob (a Master
and a Worker) whose replicas run ``chaos_replica.py``: numbered lines on stdout and
stderr, each noted in a side file (fsynced) once it is in the log. A submission picks one
behaviour: ``succeed``, ``fail`` (the Master exits 3), ``flaky`` (``OnFailure``: the
Master fails twice, then succeeds), ``crashloop`` (``OnFailure``, ``backoffLimit: 2``,
always exit 3) or ``long`` (runs until stopped; the Master also starts a process in a
new session, which must not outlive the job, and the Worker ignores SIGTERM). Two driver
threads then pick, at random, for :data:`SECONDS` (60 s): ``kubemill run --detach`` into
an empty slot, ``kubemill delete``, a ``kubemill delete`` SIGKILLed after a random moment
(the job must then be gone by the next read, or untouched), a SIGKILL to a job's
detached supervisor (found by the token every process of the test carries, and its
``--job-uid``), a SIGKILL to one replica, or a read (``kubemill get``, or ``kubemill
logs``, which must hold every line noted before the call). Kills take no lock: they may
land in the middle of a delete.

**What is checked** at the end, after a bounded wait for the jobs to settle:

- every job's state is truthful, read through the SDK: a replica shown Succeeded noted
  ``exit 0`` at the end of its last run; one shown Failed exited with the code it noted,
  or 137 after the test SIGKILLed it, or is ``SupervisorLost`` after the test killed its
  supervisor; it shows no more restarts than it had failures (noted, or SIGKILLs); an
  ``OnFailure`` job never ran more restarts than its ``backoffLimit`` allows; a job is
  ``SupervisorLost`` only if its supervisor was killed (README: a dead supervisor's job
  is Failed ``SupervisorLost`` on the next read) and not after an interrupt that had
  returned, ``Interrupted`` only if interrupted, Succeeded only if its Master succeeded,
  failed for a replica only if one failed; a suspended job runs nothing; a job shown
  running has every replica's process alive; and a job nothing touched ends exactly as
  its behaviour says;
- every line a replica noted is in ``kubemill logs`` (once, in its own replica), and no
  line is there that was not written; each stream's lines come in the order written,
  with ``--timestamps`` that never go back; ``--tail N`` of a finished job is the end of
  its whole log (logs rotate every 4 KiB meanwhile: :data:`LOG_CONFIG`);
- deleted jobs are gone, with their directories and logs; ``kubemill get`` lists exactly
  the jobs not deleted;
- no process of a finished or deleted job is left (a scan of ``/proc`` for the token), and
  none at all once every job is deleted;
- the database passes ``PRAGMA integrity_check`` and ``kubemill doctor`` says it is sound.

**Replay.** The seed is printed at the start (``chaos seed: N``) and in every failure;
``KUBEMILL_CHAOS_SEED=N`` replays the same choices (threads and timing still interleave
as they will, so a replay is the same sequence of intents, not of instants);
``KUBEMILL_CHAOS_SECONDS`` changes the duration. Deselect with ``-m "not chaos"``. Its
cost: the 60 s of chaos, then about 10-20 s of checks and cleanup.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import sqlite3
import subprocess
import threading
import time
import traceback
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubemill.sdk import JobClient
from kubemill.substrates.base import JobNotFound, JobView
from kubemill.substrates.local import procinfo
from support.e2e_support import KUBEMILL, Cli, processes_with_token

pytestmark = pytest.mark.chaos

SEED_ENV = "KUBEMILL_CHAOS_SEED"
SECONDS_ENV = "KUBEMILL_CHAOS_SECONDS"
SECONDS = float(os.environ.get(SECONDS_ENV, "60"))
SLOTS = 20
THREADS = 2
SETTLE = 45.0
"""Seconds the jobs get to finish once the chaos stops (a safety net, not a bound)."""
GRACE = 1
"""terminationGracePeriodSeconds of every replica (they die on SIGTERM anyway)."""
REPLICA_SCRIPT = Path(__file__).with_name("chaos_replica.py")
SUPERVISOR_MODULE = "kubemill.substrates.local.supervisor"
SUPERVISOR_LOST = "SupervisorLost"
EXIT_KILLED = 137
REPLICAS = ("master-0", "worker-0")
LOG_CONFIG = {"containerLogMaxSize": "4Ki", "containerLogMaxFiles": 1000}
"""Logs rotate every 4 KiB (a long job's every few seconds), and nothing is dropped: every
line must still be there, across rotations cut short by a SIGKILL."""


@dataclass(frozen=True)
class Script:
    """What one replica runs: ``LINES`` pairs, the exit code per run, a daemon or not."""

    lines: int
    plan: str
    daemon: bool = False
    deaf: bool = False
    """Ignores SIGTERM: stopping it takes the grace period, then SIGKILL."""
    pad: int = 0
    """Padding at the end of each line, so that its logs rotate (see :data:`LOG_CONFIG`)."""
    interval: float = 0.2
    """Seconds between line pairs: jobs last a few seconds, long enough to be hit mid-run."""


@dataclass(frozen=True)
class Behaviour:
    restart_policy: str
    master: Script
    worker: Script
    backoff_limit: int | None = None


FOREVER = Script(lines=0, plan="forever")
BEHAVIOURS: dict[str, Behaviour] = {
    "succeed": Behaviour("Never", Script(10, "0"), Script(4, "0")),
    "fail": Behaviour("Never", Script(6, "3"), FOREVER),
    "flaky": Behaviour("OnFailure", Script(4, "3,3,0"), Script(3, "0"), backoff_limit=6),
    "crashloop": Behaviour("OnFailure", Script(3, "3"), FOREVER, backoff_limit=2),
    "long": Behaviour(
        "Never",
        Script(0, "forever", daemon=True, pad=150, interval=0.1),
        Script(0, "forever", deaf=True, pad=150, interval=0.1),
    ),
}


@dataclass
class Submission:
    """One submission of a slot's job, and what the test did to it."""

    sid: int
    name: str
    behaviour: str
    side_dir: Path
    uid: str = ""
    supervisor_killed: bool = False
    killed_since_resume: bool = False
    """A supervisor was killed, and no resume has started a new one since."""
    replica_kills: Counter[str] = field(default_factory=Counter)
    deleted: bool = False
    delete_killed: bool = False
    """A ``kubemill delete`` of it was SIGKILLed: it may be gone, or go at the next read."""
    interrupted: bool = False
    interrupt_done: float | None = None
    """When a ``kubemill interrupt`` of it returned 0 (it waits for the stop)."""
    first_kill: float | None = None
    """When its supervisor was first SIGKILLed."""
    suspended: bool = False
    """The last of ``kubemill suspend`` / ``resume`` that worked was suspend."""
    ever_suspended: bool = False

    @property
    def spec(self) -> Behaviour:
        return BEHAVIOURS[self.behaviour]

    @property
    def touched(self) -> bool:
        return (
            self.supervisor_killed
            or bool(self.replica_kills)
            or self.interrupted
            or self.ever_suspended
        )

    def side(self, replica: str) -> Path:
        return self.side_dir / f"{replica}.side"

    def manifest(self) -> dict[str, Any]:
        b = self.spec

        def replica(name: str, script: Script) -> dict[str, Any]:
            argv = [
                "python",
                str(REPLICA_SCRIPT),
                str(self.side(name)),
                str(self.sid),
                name,
                str(script.lines),
                str(script.interval),
                script.plan,
                "1" if script.daemon else "0",
                "1" if script.deaf else "0",
                str(script.pad),
            ]
            container = {"name": "pytorch", "image": "python", "command": argv}
            return {
                "replicas": 1,
                "restartPolicy": b.restart_policy,
                "template": {
                    "spec": {"containers": [container], "terminationGracePeriodSeconds": GRACE}
                },
            }

        spec: dict[str, Any] = {
            "pytorchReplicaSpecs": {
                "Master": replica("master-0", b.master),
                "Worker": replica("worker-0", b.worker),
            }
        }
        if b.backoff_limit is not None:
            spec["runPolicy"] = {"backoffLimit": b.backoff_limit}
        return {
            "apiVersion": "kubemill.dev/v1",
            "kind": "PyTorchJob",
            "metadata": {"name": self.name},
            "spec": spec,
        }


@dataclass
class Run:
    """One run of a replica, as its side file tells it."""

    lines: list[str] = field(default_factory=list)
    exit_code: int | None = None


def side_runs(path: Path) -> list[Run]:
    """The runs a replica noted (none if it never started)."""
    runs: list[Run] = []
    if not path.exists():
        return runs
    for raw in path.read_text(encoding="utf-8").splitlines():
        word, _, rest = raw.partition(" ")
        if word == "start":
            runs.append(Run())
        elif word == "exit" and runs:
            runs[-1].exit_code = int(rest)
        elif runs and raw.startswith("sub="):
            runs[-1].lines.append(raw)
    return runs


def noted_lines(sub: Submission) -> dict[str, set[str]]:
    """Every line each replica of ``sub`` has noted so far."""
    return {r: {line for run in side_runs(sub.side(r)) for line in run.lines} for r in REPLICAS}


LINE = re.compile(r"^sub=(\d+) run=(\d+) (out|err) (\d+)( x+)?$")


class Chaos:
    """The driver: slots, submissions, the random actions, and what went wrong."""

    def __init__(self, tmp_path: Path, seed: int) -> None:
        self.seed = seed
        self.root = tmp_path
        work = tmp_path / "work"
        work.mkdir()
        self.cli = Cli(state_dir=tmp_path / "state", cwd=work)
        config = tmp_path / "config" / "kubemill" / "config.yaml"  # Cli's XDG_CONFIG_HOME
        config.parent.mkdir(parents=True)
        config.write_text(yaml.safe_dump(LOG_CONFIG))
        self.slots: list[Submission | None] = [None] * SLOTS
        self.locks = [threading.Lock() for _ in range(SLOTS)]
        self.history: list[Submission] = []
        self.problems: list[str] = []
        self.timeline: list[str] = []
        self._lock = threading.Lock()
        self._next_sid = 0
        self._times: dict[tuple[int, str, str], datetime] = {}
        self._t0 = time.monotonic()

    # --- bookkeeping -------------------------------------------------------------------------

    def note(self, text: str) -> None:
        with self._lock:
            self.timeline.append(f"{time.monotonic() - self._t0:7.2f} {text}")

    def problem(self, text: str) -> None:
        with self._lock:
            self.problems.append(text)
            self.timeline.append(f"{time.monotonic() - self._t0:7.2f} PROBLEM {text}")

    def kubemill(self, *args: str, timeout: float = 60.0) -> tuple[int, str, str]:
        try:
            done = self.cli(*args, timeout=timeout)
        except Exception as exc:  # a hung CLI is a finding, not a crash of the driver
            self.problem(f"`kubemill {' '.join(args)}` did not finish: {exc}")
            return -1, "", ""
        if "Traceback" in done.stderr:
            self.problem(f"`kubemill {' '.join(args)}` printed a traceback:\n{done.stderr}")
        return done.returncode, done.stdout, done.stderr

    def job_dir(self, sub: Submission) -> Path:
        return self.cli.state_dir / "jobs" / "default" / f"{sub.name}-{sub.uid[:8]}"

    # --- the actions -------------------------------------------------------------------------

    def drive(self, rng: random.Random, until: float, who: int) -> None:
        try:
            self._drive(rng, until, who)
        except Exception:  # a bug of the test itself must not pass unseen
            self.problem(f"driver {who} crashed:\n{traceback.format_exc()}")

    def _drive(self, rng: random.Random, until: float, who: int) -> None:
        while time.monotonic() < until:
            choice = rng.random()
            if choice < 0.2:
                self.kill(rng, "supervisor", who)
            elif choice < 0.35:
                self.kill(rng, "replica", who)
            else:
                slot = rng.randrange(SLOTS)
                pause = choice < 0.45
                if pause:
                    # Suspend or resume a job that runs (or is suspended): most jobs
                    # finish within seconds, so a random slot rarely holds one.
                    slot = self.pick_running(rng, slot)
                if self.locks[slot].acquire(blocking=False):
                    try:
                        self.slot_action(rng, slot, who, pause=pause)
                    finally:
                        self.locks[slot].release()
            time.sleep(rng.uniform(0.0, 0.3))

    def pick_running(self, rng: random.Random, otherwise: int) -> int:
        """The slot of a job with a live supervisor or suspended, at random."""
        live = set()
        for pid, cmdline in processes_with_token(self.cli.token).items():
            found = self.owner(pid, cmdline)
            if found is not None and found[1] == "supervisor":
                live.add(found[0].sid)
        slots = [
            i for i, s in enumerate(self.slots) if s is not None and (s.sid in live or s.suspended)
        ]
        return rng.choice(slots) if slots else otherwise

    def slot_action(self, rng: random.Random, slot: int, who: int, *, pause: bool) -> None:
        sub = self.slots[slot]
        choice = rng.random()
        if sub is not None and sub.delete_killed:
            # Any read may finish its deletion now: a later delete must work, or find it
            # gone; nothing else is asked of it.
            if not self.gone(slot, sub, who):
                self.delete(slot, sub, who)
            return
        if sub is None:
            self.submit(slot, rng.choice(sorted(BEHAVIOURS)), who)
        elif pause:
            self.suspend_or_resume(sub, who)
        elif choice < 0.25:
            self.delete(slot, sub, who)
        elif choice < 0.33:
            self.kill_delete(sub, rng, who)
        elif choice < 0.38:
            self.interrupt(sub, who)
        elif choice < 0.75:
            self.read_logs(sub, who)
        else:
            self.read_all(who)

    def submit(self, slot: int, behaviour: str, who: int) -> None:
        with self._lock:
            sid, self._next_sid = self._next_sid, self._next_sid + 1
        sub = Submission(sid, f"chaos-{slot:02d}", behaviour, self.root / "side" / str(sid))
        sub.side_dir.mkdir(parents=True)
        path = self.root / "manifests" / f"{sid}.yaml"
        path.parent.mkdir(exist_ok=True)
        path.write_text(yaml.safe_dump(sub.manifest(), sort_keys=False))
        rc, _, err = self.kubemill("run", "--detach", str(path))
        if rc != 0:
            self.problem(f"[{who}] submit of {sub.name} (#{sid}, {behaviour}) failed: {err}")
            return
        rc, out, err = self.kubemill("get", sub.name, "-o", "json")
        if rc != 0:
            self.problem(f"[{who}] get of just-submitted {sub.name} (#{sid}) failed: {err}")
        else:
            sub.uid = json.loads(out)["metadata"]["uid"]
        with self._lock:
            self.slots[slot] = sub
            self.history.append(sub)
        self.note(f"[{who}] submit {sub.name} #{sid} {behaviour} uid {sub.uid[:8]}")

    def delete(self, slot: int, sub: Submission, who: int) -> None:
        rc, _, err = self.kubemill("delete", sub.name)
        self.note(f"[{who}] delete {sub.name} #{sub.sid} -> {rc}")
        if rc != 0 and sub.delete_killed and "no job" in err:
            rc = 0  # another read finished the deletion its killed deleter had asked for
        if rc != 0:
            self.problem(f"[{who}] delete of {sub.name} (#{sub.sid}) failed: {err}")
            return
        with self._lock:
            sub.deleted = True
            self.slots[slot] = None
        if sub.uid and self.job_dir(sub).exists():
            self.problem(f"{sub.name} (#{sub.sid}) deleted, but {self.job_dir(sub)} is still there")

    def kill_delete(self, sub: Submission, rng: random.Random, who: int) -> None:
        """``kubemill delete``, SIGKILLed at a random moment: half the time within its
        first second (often before it asked), else soon after it asked the supervisor
        (seen in the database), while it waits for it or once done. The job must end
        up gone, or untouched."""
        deleter = subprocess.Popen(
            [str(KUBEMILL), "delete", sub.name],
            env=self.cli.env,
            cwd=self.cli.cwd,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        early = rng.random() < 0.5
        delay = rng.uniform(0.0, 1.0 if early else 0.5)
        if not early:
            give_up = time.monotonic() + 30
            while deleter.poll() is None and time.monotonic() < give_up:
                if self.delete_asked(sub):
                    break
                time.sleep(0.01)
        time.sleep(delay)
        deleter.kill()
        rc = deleter.wait()
        sub.delete_killed = True
        when = "at once" if early else "once it asked"
        self.note(f"[{who}] delete {sub.name} #{sub.sid}, SIGKILLed {when} + {delay:.2f} s: {rc}")

    def interrupt(self, sub: Submission, who: int) -> None:
        sub.interrupted = True  # from the moment it is asked, it may show
        rc, _, err = self.kubemill("interrupt", sub.name)
        self.note(f"[{who}] interrupt {sub.name} #{sub.sid} -> {rc}")
        if rc == 0 and sub.interrupt_done is None:
            sub.interrupt_done = time.monotonic()
        if rc != 0:
            self.problem(f"[{who}] interrupt of {sub.name} (#{sub.sid}) failed: {err}")

    def suspend_or_resume(self, sub: Submission, who: int) -> None:
        verb = "resume" if sub.suspended else "suspend"
        if verb == "suspend":
            sub.suspended = sub.ever_suspended = True
        rc, _, err = self.kubemill(verb, sub.name)
        self.note(f"[{who}] {verb} {sub.name} #{sub.sid} -> {rc}")
        if rc == 0:
            sub.suspended = verb == "suspend"
            if verb == "resume":
                sub.killed_since_resume = False
        elif "already finished" in err:
            sub.suspended = False  # nothing changed: it had finished
        else:
            self.problem(f"[{who}] {verb} of {sub.name} (#{sub.sid}) failed: {err}")

    def delete_asked(self, sub: Submission) -> bool:
        """Whether a delete of the job has been asked for (or it is gone), read-only."""
        db = self.cli.state_dir / "kubemill.db"
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
        try:
            row = conn.execute("SELECT request FROM jobs WHERE uid = ?", (sub.uid,)).fetchone()
        finally:
            conn.close()
        return row is None or row[0] == "delete"

    def gone(self, slot: int, sub: Submission, who: int) -> bool:
        """Whether a job whose deleter was killed is gone now (the slot is then free)."""
        rc, _, err = self.kubemill("get", sub.name, "-o", "json")
        if rc == 0:
            return False
        if "no job" not in err:
            self.problem(f"[{who}] get of {sub.name} (#{sub.sid}) failed: {err}")
            return False
        self.note(f"[{who}] gone {sub.name} #{sub.sid}, after its deleter was killed")
        with self._lock:
            sub.deleted = True
            self.slots[slot] = None
        if sub.uid and self.job_dir(sub).exists():
            self.problem(f"{sub.name} (#{sub.sid}) is gone, but {self.job_dir(sub)} is not")
        return True

    def owner(self, pid: int, cmdline: str) -> tuple[Submission, str] | None:
        """The submission a token-carrying process belongs to, and what it is of it."""
        argv = cmdline.split(" ")
        with self._lock:
            history = list(self.history)
        for sub in history:
            if SUPERVISOR_MODULE in argv and sub.uid and argv[-1] == sub.uid:
                return sub, "supervisor"
            for replica in REPLICAS:
                if str(REPLICA_SCRIPT) in argv and str(sub.side(replica)) in argv:
                    return sub, replica
        return None

    def kill(self, rng: random.Random, what: str, who: int) -> None:
        """SIGKILL one live supervisor (``what``) or replica of a submitted job, at random.

        No slot lock is taken: a kill may land in the middle of a delete or a read.
        """
        with self._lock:
            # Deleted before the scan began: none of their processes may be in it.
            gone = {s.sid for s in self.history if s.deleted}
        owners = {}
        for pid, cmdline in sorted(processes_with_token(self.cli.token).items()):
            found = self.owner(pid, cmdline)
            if found is not None:
                owners[pid] = found
        targets = []
        for pid, (sub, role) in owners.items():
            # A child forked by a supervisor (or a replica), not yet exec'd, has its
            # parent's command line: it is the replica (or daemon) being started, not the
            # process it looks like. Killing it as such would credit the wrong kill.
            info = procinfo.stat(pid)
            if info is not None and owners.get(info.ppid) == (sub, role):
                continue
            if sub.sid in gone:
                self.problem(f"{sub.name} (#{sub.sid}) was deleted; its {role} {pid} runs")
            elif (role == "supervisor") == (what == "supervisor"):
                targets.append((pid, sub, role))
        if not targets:
            return
        pid, sub, role = rng.choice(targets)
        ident = procinfo.identify(pid)
        if ident is None or not procinfo.is_alive(ident):
            return
        # Recorded first: from the moment of the signal, kubemill may show its effect.
        with self._lock:
            if role == "supervisor":
                sub.supervisor_killed = sub.killed_since_resume = True
                if sub.first_kill is None:
                    sub.first_kill = time.monotonic()
            else:
                sub.replica_kills[role] += 1
        procinfo.kill_process(ident, signal.SIGKILL)
        self.note(f"[{who}] SIGKILL {role} of {sub.name} #{sub.sid} (pid {pid})")

    def read_logs(self, sub: Submission, who: int) -> None:
        # Every line noted before the call must be in what it prints.
        noted = noted_lines(sub)
        rc, out, err = self.kubemill("logs", sub.name)
        self.note(f"[{who}] logs {sub.name} #{sub.sid} -> {rc}")
        if rc != 0:
            self.problem(f"[{who}] logs of {sub.name} (#{sub.sid}) failed: {err}")
            return
        printed = parse_logs(out)
        for replica, lines in noted.items():
            missing = lines - set(printed.get(replica, []))
            if missing:
                self.problem(
                    f"`kubemill logs {sub.name}` (#{sub.sid}) lacks {len(missing)} lines"
                    f" {replica} had written, e.g. {sorted(missing)[:3]}"
                )

    def read_all(self, who: int) -> None:
        rc, _, err = self.kubemill("get")
        self.note(f"[{who}] get -> {rc}")
        if rc != 0:
            self.problem(f"[{who}] `kubemill get` failed: {err}")

    # --- the end ------------------------------------------------------------------------------

    def current(self) -> list[Submission]:
        return [s for s in self.slots if s is not None]

    def settle(self, client: JobClient) -> dict[int, JobView]:
        """Wait (bounded) until every job that can finish has; the views then."""
        deadline = time.monotonic() + SETTLE
        while True:
            views: dict[int, JobView] = {}
            for slot, sub in enumerate(self.slots):
                if sub is None:
                    continue
                try:
                    views[sub.sid] = client.get(sub.name)
                except JobNotFound:
                    if not sub.delete_killed:
                        self.problem(f"{sub.name} (#{sub.sid}) was never deleted, yet it is gone")
                    sub.deleted = True
                    self.slots[slot] = None
            waiting = [s.name for s in self.current() if s.sid in views and unsettled(s, views)]
            if not waiting or time.monotonic() >= deadline:
                for name in waiting:
                    self.problem(f"{name} has not settled {SETTLE:.0f} s after the chaos")
                return views
            time.sleep(0.2)

    def judge(self, sub: Submission, view: JobView) -> None:
        """Is what kubemill says of this job what its replicas and the test did?"""
        who = f"{sub.name} (#{sub.sid}, {sub.behaviour})"
        b = sub.spec
        runs = {r: side_runs(sub.side(r)) for r in REPLICAS}
        replicas = {r.name[len(sub.name) + 1 :]: r for r in view.replicas}
        failed = [c for c in view.status.conditions if c.type == "Failed" and c.status == "True"]
        reason = failed[0].reason if failed else ""

        for name, r in replicas.items():
            noted = runs[name]
            last = noted[-1].exit_code if noted else None
            kills = sub.replica_kills[name]
            what = f"{who} {name}: {r.phase} {r.reason} exit {r.exit_code}, side file {last}"
            if r.phase == "Succeeded":
                if r.exit_code != 0 or last != 0:
                    self.problem(f"{what}: Succeeded, but it did not exit 0 at the end")
            elif r.phase == "Failed" and r.reason == SUPERVISOR_LOST:
                if not sub.supervisor_killed:
                    self.problem(f"{what}: SupervisorLost, but its supervisor was not killed")
            elif r.phase == "Failed":
                explained = r.exit_code == last or (r.exit_code == EXIT_KILLED and kills)
                if not r.exit_code or not explained:
                    self.problem(f"{what}: this failure is not what the replica did")
            elif r.phase == "Stopped":
                if not view.finished and view.phase != "Suspended":
                    self.problem(f"{what}: Stopped, but the job has not finished")
            elif r.phase == "Running":
                if view.finished or r.pid is None:
                    self.problem(f"{what}: Running with pid {r.pid} in a finished job")
            else:
                self.problem(f"{what}: unexpected phase")
            # A restart is counted when a failure (an exit it noted, or a SIGKILL from the
            # test) calls for it; a run stopped by a suspend or a delete is none.
            failures = sum(1 for run in noted if run.exit_code not in (None, 0)) + kills
            if r.restarts > failures:
                self.problem(f"{what}: {r.restarts} restarts for {failures} failures")
            # Each run after the first was a restart, unless a suspend came in between
            # (or a killed supervisor's records lag behind).
            quiet = not sub.supervisor_killed and not sub.ever_suspended
            if quiet and r.restarts < len(noted) - 1:
                self.problem(f"{what}: {r.restarts} restarts for {len(noted)} runs")
        if b.backoff_limit is not None and not sub.ever_suspended:
            restarted = sum(max(0, len(n) - 1) for n in runs.values())
            if restarted > b.backoff_limit:
                self.problem(
                    f"{who}: {restarted} restarts ran, over backoffLimit {b.backoff_limit}"
                )

        master = replicas["master-0"]
        if not view.finished and sub.suspended:
            if view.phase != "Suspended":
                self.problem(f"{who}: suspended, yet it is {view.phase}")
            for name, r in replicas.items():
                if r.phase == "Running" or (r.pid is not None and alive(r.pid)):
                    self.problem(f"{who}: Suspended, but {name} is {r.phase} (pid {r.pid})")
        elif not view.finished:
            if sub.behaviour != "long":
                return  # reported by settle
            if sub.killed_since_resume:
                self.problem(f"{who}: its supervisor was killed, yet it is {view.phase}")
            # A job shown running runs: every replica of a long job, each process alive.
            for name, r in replicas.items():
                if r.phase != "Running" or r.pid is None or not alive(r.pid):
                    self.problem(f"{who}: {view.phase}, but {name} is {r.phase} (pid {r.pid})")
        elif view.phase == "Succeeded":
            if master.phase != "Succeeded":
                self.problem(f"{who}: Succeeded, but its Master is {master.phase}")
        elif reason == SUPERVISOR_LOST:
            if not sub.supervisor_killed:
                self.problem(f"{who}: SupervisorLost, but its supervisor was not killed")
            # README: a job asked to stop before its supervisor died is Interrupted.
            stopped = sub.interrupt_done
            if stopped is not None and (sub.first_kill is None or stopped < sub.first_kill):
                self.problem(f"{who}: SupervisorLost, but it was interrupted before that")
        elif reason == "Interrupted":
            if not sub.interrupted:
                self.problem(f"{who}: Interrupted, but it was not interrupted")
        elif reason == "PyTorchJobFailed":
            if not any(
                r.phase == "Failed" and r.reason != SUPERVISOR_LOST for r in replicas.values()
            ):
                self.problem(f"{who}: {reason}, but no replica failed")
        elif reason == "BackoffLimitExceeded":
            # Over the limit counting the restarts it would take next (the core's rule):
            # an in-place one is counted at its exit, but the recreation of a pod that
            # ended Failed never happens, so it is not in the restarts shown (one per
            # replica at most).
            total = sum(r.restarts for r in replicas.values())
            if b.backoff_limit is None or total + len(replicas) <= b.backoff_limit:
                self.problem(f"{who}: {reason} with {total} restarts, limit {b.backoff_limit}")
        else:
            self.problem(f"{who}: unexpected verdict {view.phase} {reason!r}")

        if not sub.touched:
            self.expect_untouched(sub, view, reason, replicas, runs)

    def expect_untouched(
        self,
        sub: Submission,
        view: JobView,
        reason: str,
        replicas: dict[str, Any],
        runs: dict[str, list[Run]],
    ) -> None:
        """A job the test did not kill anything of ends as its behaviour says."""
        who = f"{sub.name} (#{sub.sid}, {sub.behaviour}, untouched)"
        master = replicas["master-0"]
        got = (view.phase, reason, master.phase, master.exit_code, len(runs["master-0"]))
        expected: dict[str, tuple[Any, ...]] = {
            "succeed": ("Succeeded", "", "Succeeded", 0, 1),
            "fail": ("Failed", "PyTorchJobFailed", "Failed", 3, 1),
            "flaky": ("Succeeded", "", "Succeeded", 0, 3),
            "crashloop": ("Failed", "BackoffLimitExceeded", "Failed", 3, 3),
            "long": ("Running", "", "Running", None, 1),
        }
        if got != expected[sub.behaviour]:
            self.problem(
                f"{who}: (job, reason, master, exit, master runs) is {got},"
                f" expected {expected[sub.behaviour]}"
            )

    def check_logs(self, sub: Submission, finished: bool) -> None:
        """Every noted line is in ``kubemill logs``, once, and nothing never written is;
        each stream's lines come in the order written, with times that never go back;
        ``--tail N`` of a finished job is the end of the whole log."""
        # A running job goes on writing: noted before the call, checked against after it.
        before = noted_lines(sub)
        rc, out, err = self.kubemill("logs", sub.name, "--timestamps")
        if rc != 0:
            self.problem(f"logs of {sub.name} (#{sub.sid}) failed: {err}")
            return
        printed: dict[str, list[str]] = {}
        for replica, stamped in parse_logs(out).items():
            for text in stamped:
                stamp, _, line = text.partition(" ")
                printed.setdefault(replica, []).append(line)
                self.check_time(sub, replica, stamp, line)
        for replica in REPLICAS:
            runs = side_runs(sub.side(replica))
            noted = before[replica]
            lines = printed.get(replica, [])
            where = f"`kubemill logs {sub.name}` (#{sub.sid}) {replica}"
            if noted - set(lines):
                missing = sorted(noted - set(lines))
                self.problem(f"{where} lacks {len(missing)} noted lines, e.g. {missing[:3]}")
            dupes = [line for line, n in Counter(lines).items() if n > 1]
            if dupes:
                self.problem(f"{where} repeats lines, e.g. {dupes[:3]}")
            # A line may be in the log without its note (killed in between): at most the
            # next one after the last noted of its run and stream.
            highest: dict[tuple[int, str], int] = {}
            for run_no, run in enumerate(runs):
                for line in run.lines:
                    m = LINE.match(line)
                    assert m is not None
                    key = (run_no, m.group(3))
                    highest[key] = max(highest.get(key, -1), int(m.group(4)))
            last: dict[str, tuple[int, int]] = {}
            for line in lines:
                m = LINE.match(line)
                if m is None or int(m.group(1)) != sub.sid:
                    self.problem(f"{where} holds a line it never wrote: {line!r}")
                    continue
                run_no, stream, n = int(m.group(2)), m.group(3), int(m.group(4))
                if n > highest.get((run_no, stream), -1) + 1:
                    self.problem(f"{where} holds a line beyond what it wrote: {line!r}")
                if (run_no, n) <= last.get(stream, (-1, -1)):
                    self.problem(f"{where}: {line!r} comes after {last[stream]} of its stream")
                last[stream] = (run_no, n)
        unknown = sorted(set(printed) - set(REPLICAS))
        if unknown:
            self.problem(f"`kubemill logs {sub.name}` shows unknown replicas {unknown}")
        if finished and sub.sid % 3 == 0:  # a third of them: each check is a CLI call
            self.check_tail(sub, printed)

    def check_time(self, sub: Submission, replica: str, stamp: str, line: str) -> None:
        """A stream's line times never go back (marks, rotation, a new supervisor)."""
        m = LINE.match(line)
        if m is None:
            return
        when = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
        key = (sub.sid, replica, m.group(3))
        with self._lock:
            earlier = self._times.get(key)
            self._times[key] = when
        if earlier is not None and when < earlier:
            self.problem(
                f"`kubemill logs {sub.name} --timestamps` (#{sub.sid}) {replica}: {line!r}"
                f" at {stamp}, before the stream's previous line ({earlier.isoformat()})"
            )

    def check_tail(self, sub: Submission, printed: dict[str, list[str]]) -> None:
        count = 1 + sub.sid % 17
        rc, out, err = self.kubemill("logs", sub.name, "--tail", str(count))
        if rc != 0:
            self.problem(f"logs --tail of {sub.name} (#{sub.sid}) failed: {err}")
            return
        tailed = parse_logs(out)
        for replica in REPLICAS:
            whole = printed.get(replica, [])
            if tailed.get(replica, []) != whole[-count:]:
                self.problem(
                    f"`kubemill logs {sub.name} --tail {count}` (#{sub.sid}) {replica}:"
                    f" {tailed.get(replica, [])}, but the log ends {whole[-count:]}"
                )

    def leftovers(self, live_uids: set[str]) -> dict[int, str]:
        """Token-carrying processes that belong to no unfinished job."""
        found = {}
        for pid, cmdline in processes_with_token(self.cli.token).items():
            mark = procinfo.mark_of(pid) or ""
            uid = mark.partition("/")[0] or cmdline.rpartition("--job-uid ")[2]
            if uid not in live_uids:
                found[pid] = f"{cmdline} [{mark}]"
        return found


def unsettled(sub: Submission, views: dict[int, JobView]) -> bool:
    """A job that will finish by itself and has not, or has finished and is still
    stopping what ran (its verdict is out before its last replica is gone)."""
    view = views[sub.sid]
    if view.finished:
        return any(r.phase == "Running" for r in view.replicas)
    return sub.behaviour != "long" and not sub.suspended


def final_delete(client: JobClient, name: str) -> str:
    """Delete a job; what went wrong, if anything."""
    try:
        client.delete(name)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def alive(pid: int) -> bool:
    info = procinfo.stat(pid)
    return info is not None and info.state != "Z"


def parse_logs(out: str) -> dict[str, list[str]]:
    """``kubemill logs`` output (``replica | text``) as each replica's lines."""
    printed: dict[str, list[str]] = {}
    for raw in out.splitlines():
        replica, sep, text = raw.partition(" | ")
        if sep:
            printed.setdefault(replica.strip(), []).append(text)
    return printed


@pytest.mark.timeout(SECONDS + 300)
def test_sixty_seconds_of_chaos(tmp_path: Path) -> None:
    seed = int(os.environ.get(SEED_ENV) or random.SystemRandom().randrange(2**32))
    print(f"chaos seed: {seed} (replay: {SEED_ENV}={seed})")
    chaos = Chaos(tmp_path, seed)
    client = JobClient(state_dir=chaos.cli.state_dir)
    try:
        until = time.monotonic() + SECONDS
        threads = [
            threading.Thread(target=chaos.drive, args=(random.Random(f"{seed}/{i}"), until, i))
            for i in range(THREADS)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        chaos.note("-- the chaos is over")
        views = chaos.settle(client)
        chaos.note("-- settled")
        verdicts: Counter[str] = Counter()
        judged = [s for s in chaos.current() if s.sid in views]
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(chaos.check_logs, judged, [views[s.sid].finished for s in judged]))
        for sub in judged:
            chaos.judge(sub, views[sub.sid])
            view = views[sub.sid]
            failed = [c.reason for c in view.status.conditions if c.type == "Failed"]
            touches = {
                "supervisor-killed": sub.supervisor_killed,
                "replica-killed": bool(sub.replica_kills),
                "interrupted": sub.interrupted,
                "suspended": sub.ever_suspended,
            }
            touched = ",".join(k for k, v in touches.items() if v)
            verdict = f"{sub.behaviour} {view.phase} {''.join(failed)} {touched}".strip()
            verdicts[verdict] += 1
            chaos.note(f"verdict {sub.name} #{sub.sid}: {verdict}")
        print("verdicts:", dict(sorted(verdicts.items())))
        chunks = list((chaos.cli.state_dir / "jobs").glob("*/*/logs/*.log.[0-9]*"))
        print(f"rotated log chunks of the jobs left: {len(chunks)}")
        listed = {v.name for v in client.list()}
        if listed != {s.name for s in chaos.current()}:
            expected = sorted(s.name for s in chaos.current())
            chaos.problem(f"jobs listed {sorted(listed)}, expected {expected}")
        live = {s.uid for s in chaos.current() if s.sid in views and not views[s.sid].finished}
        left = chaos.leftovers(live)
        if left:
            chaos.problem(f"processes of finished or deleted jobs are left: {left}")
    finally:
        chaos.note("-- checked; deleting what is left")
        # Delete everything still there (the SDK: no interpreter to start per job; the
        # CLI's deletes had their turn) and prove nothing is left.
        with ThreadPoolExecutor(8) as pool:
            done = list(pool.map(lambda s: final_delete(client, s.name), chaos.current()))
        for sub, err in zip(chaos.current(), done, strict=True):
            if err:
                chaos.problem(f"final delete of {sub.name} (#{sub.sid}) failed: {err}")
            else:
                sub.deleted = True
        left = processes_with_token(chaos.cli.token)
        for pid in left:
            procinfo.kill_process(procinfo.identify(pid) or procinfo.ProcessId(pid, 0, ""))
    chaos.note("-- deleted")
    if left:
        chaos.problem(f"processes left once every job was deleted: {left}")
    for sub in chaos.history:
        if sub.uid and chaos.job_dir(sub).exists():
            chaos.problem(f"{sub.name} (#{sub.sid}) was deleted; {chaos.job_dir(sub)} is not")
    if any((chaos.cli.state_dir / "jobs").glob("*/*")):
        found = sorted(p.name for p in (chaos.cli.state_dir / "jobs").glob("*/*"))
        chaos.problem(f"job directories left once every job was deleted: {found}")

    db = chaos.cli.state_dir / "kubemill.db"
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        integrity = [row[0] for row in conn.execute("PRAGMA integrity_check")]
    finally:
        conn.close()
    if integrity != ["ok"]:
        chaos.problem(f"PRAGMA integrity_check: {integrity}")
    rc, out, err = chaos.kubemill("doctor")
    if rc != 0 or "OK" not in out:
        chaos.problem(f"kubemill doctor: exit {rc}: {out}{err}")

    counts = Counter(line.split()[2] for line in chaos.timeline if line.split()[1].startswith("["))
    print(f"{len(chaos.history)} submissions; actions: {dict(counts)}")
    print("\n".join(chaos.timeline))
    assert not chaos.problems, (
        f"chaos seed {seed} ({SEED_ENV}={seed} replays it): {len(chaos.problems)} problems:\n"
        + "\n".join(chaos.problems)
    )
