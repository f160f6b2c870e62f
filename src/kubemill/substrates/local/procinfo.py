"""Facts about processes from ``/proc``, and stopping process groups without hitting strangers.

A pid alone does not identify a process: once it exits, the kernel may hand the same
number to an unrelated one. Every process kubemill records is therefore identified by
its pid *and* its start time (clock ticks since boot, field 22 of ``/proc/<pid>/stat``)
*and* the boot id, so a check after a crash or a reboot never mistakes a stranger for
one of ours.

Process groups: each replica leads its own group (``start_new_session``), so its pgid is
its pid. Linux keeps a pid out of reuse while any process still belongs to the group of
that number, so if the leader's pid is gone, whatever is still in group ``pgid`` is ours
(left-over children); if the pid is alive with a *different* start time, our group has
died out completely and the number now belongs to someone else.

Process trees: a replica may leave its group (``setsid``, a double fork). A supervisor is
a child subreaper (:func:`become_subreaper`), so such orphans re-parent to it and stay
findable by parent (:class:`ProcessTree`); every replica also carries
:data:`REPLICA_MARK` in its environment, which its descendants inherit (:func:`mark_of`).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

_PROC = Path("/proc")


@dataclass(frozen=True)
class ProcessId:
    """A process as kubemill records it: pid, start time and the boot it started in."""

    pid: int
    start_ticks: int
    boot_id: str


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` kubemill needs."""

    state: str
    """``R``, ``S``, ``D``, ``Z`` (zombie: exited, not yet reaped), ..."""
    ppid: int
    pgid: int
    start_ticks: int


def boot_id() -> str:
    """This boot's random id; differs after every reboot."""
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


STAT_BYTES = 4096
"""More than a ``/proc/<pid>/stat`` line holds (its command name is at most 64 bytes)."""


def stat(pid: int | str) -> ProcStat | None:
    """The stat of ``pid``, or ``None`` if there is no such process.

    Read with bare ``os`` calls: a scan of every process (:func:`process_table`) reads one
    per process, several times as a job ends, and pathlib and a text file made each scan
    three times dearer.
    """
    try:
        fd = os.open(f"{_PROC}/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    try:
        raw = os.read(fd, STAT_BYTES)
    except ProcessLookupError:  # exited and reaped since the open
        return None
    finally:
        os.close(fd)
    # The command name (field 2) is in parentheses and may itself hold ") ", so split
    # after the *last* parenthesis.
    fields = raw[raw.rindex(b")") + 2 :].split()
    # fields[0] is field 3 (state); field N is fields[N - 3].
    return ProcStat(
        state=fields[0].decode(),
        ppid=int(fields[1]),
        pgid=int(fields[2]),
        start_ticks=int(fields[19]),
    )


def identify(pid: int) -> ProcessId | None:
    """The full identity of a running process, or ``None`` if it is gone."""
    info = stat(pid)
    if info is None:
        return None
    return ProcessId(pid=pid, start_ticks=info.start_ticks, boot_id=boot_id())


def is_alive(process: ProcessId) -> bool:
    """Whether this very process (not a later one with the same pid) still runs.

    A zombie has exited: it counts as dead.
    """
    if process.boot_id and process.boot_id != boot_id():
        return False
    info = stat(process.pid)
    return info is not None and info.start_ticks == process.start_ticks and info.state != "Z"


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    members: list[int] = []
    for entry in _PROC.iterdir():
        if not entry.name.isdigit():
            continue
        info = stat(int(entry.name))
        if info is not None and info.pgid == pgid and info.state != "Z":
            members.append(int(entry.name))
    return members


def group_is_ours(leader: ProcessId) -> bool:
    """Whether process group ``leader.pid`` can still only hold processes of ours.

    True when the leader itself is alive, or its pid is unused (the kernel does not reuse
    a pid while a group of that number exists, so remaining members are its children).
    False when the pid now belongs to another process, or after a reboot.
    """
    if leader.boot_id and leader.boot_id != boot_id():
        return False
    info = stat(leader.pid)
    return info is None or info.start_ticks == leader.start_ticks


def signal_group(leader: ProcessId, sig: signal.Signals) -> bool:
    """Send ``sig`` to the group led by ``leader`` if it is still ours; True if delivered."""
    if not group_is_ours(leader):
        return False
    try:
        os.killpg(leader.pid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return False
    return True


def stop_group(leader: ProcessId, *, grace: float, poll: float = 0.02) -> bool:
    """SIGTERM the group, wait up to ``grace`` seconds, then SIGKILL; verify it is empty.

    Returns True when no process of the group is left (the check scans ``/proc``).
    Used where the processes are not our children (after a supervisor died, on delete
    from another shell), so waiting is by observation, not ``waitpid``.
    """
    if not group_is_ours(leader):
        return True
    if signal_group(leader, signal.SIGTERM):
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if not group_members(leader.pid):
                return True
            time.sleep(poll)
    return kill_group(leader)


def kill_group(leader: ProcessId, *, timeout: float = 5.0, poll: float = 0.02) -> bool:
    """SIGKILL the group (if still ours) and wait until no member is left."""
    if not group_is_ours(leader):
        return True
    deadline = time.monotonic() + timeout
    while True:
        signal_group(leader, signal.SIGKILL)
        if not group_members(leader.pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)


def kill_process(process: ProcessId, sig: signal.Signals = signal.SIGKILL) -> None:
    """Signal one process if it is still the one recorded."""
    if is_alive(process):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(process.pid, sig)


def wait_gone(process: ProcessId, *, timeout: float, poll: float = 0.02) -> bool:
    """Wait until ``process`` has exited (or ``timeout`` passes); True if it is gone."""
    deadline = time.monotonic() + timeout
    while is_alive(process):
        if time.monotonic() >= deadline:
            return False
        time.sleep(poll)
    return True


# --- process trees: what a replica leaves behind -------------------------------------------

PR_SET_CHILD_SUBREAPER = 36
REPLICA_MARK = "KUBEMILL_REPLICA_ID"
"""Set in every replica's environment to ``<job uid>/<replica>``; inherited by whatever it
starts, so a process that left the tree (a daemon re-parented away) is still known."""


def become_subreaper() -> bool:
    """Make this process a child subreaper: orphans below it re-parent to it, not to init.

    Per process, not per thread, and it lasts for the life of the process. True if set.
    """
    import ctypes  # only here: the rest of this module needs no libc

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def has_children() -> bool:
    """Whether this process has a child, alive or a zombie (one system call, no scan)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def process_table() -> dict[int, ProcStat]:
    """Every process visible in ``/proc`` with its stat (one scan)."""
    table: dict[int, ProcStat] = {}
    with os.scandir(_PROC) as entries:
        for entry in entries:
            if entry.name.isdigit():
                info = stat(entry.name)
                if info is not None:
                    table[int(entry.name)] = info
    return table


class ProcessTree:
    """One scan of ``/proc``: each process's stat and children."""

    def __init__(self, table: dict[int, ProcStat] | None = None) -> None:
        self.table = process_table() if table is None else table
        self.children: dict[int, list[int]] = {}
        for pid, info in self.table.items():
            self.children.setdefault(info.ppid, []).append(pid)

    def below(self, root: int, *, zombies: bool = False) -> set[int]:
        """Processes whose parent chain leads to ``root`` (not ``root`` itself); zombies
        (exited, not yet reaped) only if ``zombies``."""
        found: set[int] = set()
        todo = [root]
        while todo:
            for child in self.children.get(todo.pop(), []):
                if child not in found:
                    found.add(child)
                    todo.append(child)
        if zombies:
            return found
        return {pid for pid in found if self.table[pid].state != "Z"}


def mark_of(pid: int, name: str = REPLICA_MARK) -> str | None:
    """The value of :data:`REPLICA_MARK` (or the variable ``name``) in ``pid``'s environment
    (``None`` if absent or unreadable: another user's process, or gone)."""
    try:
        raw = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return None
    prefix = name.encode() + b"="
    for item in raw.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix) :].decode("utf-8", "replace")
    return None


def marked(prefix: str, name: str = REPLICA_MARK) -> set[int]:
    """Live processes anywhere (of this user: others' environments cannot be read) whose
    :data:`REPLICA_MARK` (or variable ``name``) starts with ``prefix``; for when no
    supervisor is left to ask."""
    found: set[int] = set()
    me = os.getpid()
    for entry in _PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        seen = mark_of(pid, name)
        if seen is not None and seen.startswith(prefix):
            info = stat(pid)
            if info is not None and info.state != "Z":
                found.add(pid)
    return found


def memory_bytes(pids: set[int]) -> int:
    """Memory of ``pids`` together, each page counted once: the sum of their proportional
    set sizes (``Pss`` of ``/proc/<pid>/smaps_rollup``), as a container's memory cgroup
    charges a page once however many of its processes map it. Summed resident sizes would
    count every shared page again in each process: a Mars worker's sub-pools and its plasma
    store all map the same shared memory, and were killed as over a limit they were within.
    Where ``smaps_rollup`` cannot be read, the resident size (``statm``) stands in; gone
    processes count 0."""
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in pids:
        try:
            rollup = (_PROC / str(pid) / "smaps_rollup").read_text()
        except OSError:
            rollup = ""
        pss = next((line for line in rollup.splitlines() if line.startswith("Pss:")), None)
        if pss is not None:
            total += int(pss.split()[1]) * 1024
            continue
        try:
            fields = (_PROC / str(pid) / "statm").read_text().split()
        except OSError:
            continue
        total += int(fields[1]) * page
    return total


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
"""The unit of ``/proc/<pid>/stat``'s times, per second."""


def cpu_ticks(pids: set[int]) -> int:
    """CPU time ``pids`` used, in :data:`CLOCK_TICKS`: each one's own (user and system) and
    that of the children it waited for, which left the tree as they were reaped (their time
    counts in their parent's from then on, so none is counted twice). Gone processes count
    0."""
    total = 0
    for pid in pids:
        try:
            fd = os.open(f"{_PROC}/{pid}/stat", os.O_RDONLY | os.O_CLOEXEC)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
        try:
            raw = os.read(fd, STAT_BYTES)
        except ProcessLookupError:
            continue
        finally:
            os.close(fd)
        fields = raw[raw.rindex(b")") + 2 :].split()
        # utime, stime, cutime and cstime: fields 14 to 17 (fields[N - 3], as in stat()).
        total += sum(int(field) for field in fields[11:15])
    return total


_waited_for: set[int] = set()
"""Children that a thread of this process waits for itself (see :func:`waited_for`)."""


@contextlib.contextmanager
def waited_for(pid: int) -> Iterator[None]:
    """Keep :func:`reap` off child ``pid`` while its owner waits for it.

    A process exec'd into a replica (:mod:`.exec_service`) is a child of the supervisor's
    process and carries the replica's mark, so the supervisor's sweep finds it among the
    job's processes; reaping it there would take its exit code from the thread that
    reports it (``Popen.wait`` then sees 0).
    """
    _waited_for.add(pid)
    try:
        yield
    finally:
        _waited_for.discard(pid)


def reap(pids: set[int]) -> None:
    """Collect the exit of those ``pids`` that are our children and have exited.

    Orphans re-parented to a subreaper become its children; once they die they stay
    zombies until their new parent waits for them. Only named pids are waited for, so
    children that others in this process manage (``subprocess.Popen``) are untouched,
    and so are those held by :func:`waited_for`.
    """
    for pid in pids - _waited_for:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def stop_processes(
    find: Callable[[], set[int]], *, grace: float, poll: float = 0.02, timeout: float = 5.0
) -> set[int]:
    """SIGTERM what ``find`` returns, SIGKILL what is left after ``grace``; wait for the end.

    ``find`` is asked again on every round, so processes started meanwhile are caught
    too. Zombies among them that are our children are reaped. Returns the pids still
    alive after SIGKILL and ``timeout`` (normally none).
    """
    termed: set[int] = set()
    kill_at = time.monotonic() + grace
    give_up = kill_at + timeout
    while True:
        found = find()
        reap(found)
        live = {pid for pid in found if (info := stat(pid)) is not None and info.state != "Z"}
        if not live:
            return set()
        now = time.monotonic()
        sig = signal.SIGKILL if now >= kill_at else signal.SIGTERM
        for pid in live if sig == signal.SIGKILL else live - termed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        termed |= live
        if now >= give_up:
            return live
        time.sleep(poll)
