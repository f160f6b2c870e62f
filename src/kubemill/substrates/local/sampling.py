"""Each replica's CPU and memory over time: sampled by the supervisor, kept with the job.

Every :data:`SAMPLE_SECONDS` the supervisor reads ``/proc`` for each running replica's
processes (its main process, everything below it and its marked orphans, as its memory
limit is watched): the CPU time they used since the last sample, per second (cores busy),
and their memory, each page counted once (:func:`.procinfo.memory_bytes`). A sample is one
JSON line appended to ``<job dir>/resources/<replica>.jsonl``, so the series outlives the
supervisor as the logs do, and is deleted with the job. It is bounded: a file that holds
:data:`KEEP` samples becomes ``<replica>.1.jsonl`` (replacing the one before), so a replica
keeps between :data:`KEEP` and twice as many, the newest.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from kubemill.substrates.local import procinfo
from kubemill.substrates.reads import ResourceSample

if TYPE_CHECKING:
    # What the supervisor samples with; a reader of the samples imports neither.
    from kubemill.substrates.local.kubelet import ReplicaPod
    from kubemill.substrates.local.strays import JobProcesses

SAMPLE_SECONDS = 3.0
"""How often each running replica is sampled: a scan of its processes costs about a
millisecond, and a plot over minutes needs no more."""
KEEP = 1200
"""Samples per file: an hour at :data:`SAMPLE_SECONDS` (two files: two hours)."""


def resources_dir(job_dir: str) -> Path:
    """Where a job's resource samples are kept."""
    return Path(job_dir) / "resources"


@dataclass
class _Baseline:
    """The CPU time a replica's processes had used at the previous sample."""

    pid: int
    ticks: int
    at: float


class ResourceSampler:
    """Samples the running replicas of one job (called from the supervisor's loop)."""

    def __init__(
        self,
        directory: Path,
        processes: JobProcesses,
        pods: Callable[[], Mapping[str, ReplicaPod]],
        *,
        interval: float = SAMPLE_SECONDS,
    ) -> None:
        self.directory = directory
        self.processes = processes
        self._pods = pods
        self.interval = interval
        self._next = 0.0
        self._baselines: dict[str, _Baseline] = {}
        self._lines: dict[str, int] = {}
        """Samples in each replica's current file, once counted."""

    def sample(self, now: float) -> None:
        """Append a sample of each running replica, if one is due."""
        if now < self._next:
            return
        self._next = now + self.interval
        for name, pod in list(self._pods().items()):
            if pod.popen is None or not pod.alive:
                self._baselines.pop(name, None)
                continue
            main = pod.popen.pid
            tree = {main} | self.processes.of_pod(pod)
            ticks = procinfo.cpu_ticks(tree)
            known = self._baselines.get(name)
            if known is not None and known.pid == main:
                used, seconds = ticks - known.ticks, now - known.at
            else:  # a new process (the first sample, or a restart): since it started
                used, seconds = ticks, _age(main)
            self._baselines[name] = _Baseline(main, ticks, now)
            cores = max(0.0, used / procinfo.CLOCK_TICKS / seconds) if seconds > 0 else 0.0
            self._append(name, ResourceSample(now, cores, procinfo.memory_bytes(tree)))

    def _append(self, replica: str, sample: ResourceSample) -> None:
        path = self.directory / f"{replica}.jsonl"
        lines = self._lines.get(replica)
        if lines is None:  # a supervisor that took the job over: count what is there
            try:
                lines = path.read_bytes().count(b"\n")
            except OSError:
                lines = 0
        if lines >= KEEP:
            with contextlib.suppress(FileNotFoundError):
                path.replace(self.directory / f"{replica}.1.jsonl")
            lines = 0
        record = {"t": round(sample.time, 3), "cpu": round(sample.cpu_cores, 4)}
        record["mem"] = sample.memory_bytes
        self.directory.mkdir(parents=True, exist_ok=True)
        with path.open("a") as out:
            out.write(json.dumps(record) + "\n")
        self._lines[replica] = lines + 1


def _age(pid: int) -> float:
    """Seconds since ``pid`` started (0 if it cannot be told)."""
    info = procinfo.stat(pid)
    try:
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0
    if info is None:
        return 0.0
    return max(0.0, uptime - info.start_ticks / procinfo.CLOCK_TICKS)


def resource_history(job_dir: str) -> dict[str, list[ResourceSample]]:
    """Every replica's samples kept with the job, oldest first (none for a job that never
    ran a replica). A line cut short by a supervisor's end is left out."""
    directory = resources_dir(job_dir)
    found: dict[str, list[ResourceSample]] = {}
    try:
        names = sorted(path.name for path in directory.iterdir())
    except OSError:
        return found
    replicas = sorted({n.removesuffix(".jsonl").removesuffix(".1") for n in names})
    for replica in replicas:
        samples: list[ResourceSample] = []
        for file in (f"{replica}.1.jsonl", f"{replica}.jsonl"):
            try:
                text = (directory / file).read_text()
            except OSError:
                continue
            for line in text.splitlines():
                try:
                    record = json.loads(line)
                    samples.append(
                        ResourceSample(float(record["t"]), float(record["cpu"]), int(record["mem"]))
                    )
                except (ValueError, KeyError, TypeError):
                    continue
        found[replica] = samples
    return found


__all__ = ["KEEP", "SAMPLE_SECONDS", "ResourceSampler", "resource_history", "resources_dir"]
