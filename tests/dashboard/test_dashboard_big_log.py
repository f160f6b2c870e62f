"""A 150 MB replica log through the dashboard: the logs stream starts from its tail and
follows on without the server reading the file, and the download streams it whole in
bounded memory.

The log is written as the local substrate writes every log: by the replica itself, its
stdout going straight from the kernel into its file. The job's rotation policy is raised
above 150 MB for this test so the file holds all of it (the defaults keep 50 MB).

What is asserted is what the server process did, not how long it took: the bytes it read
(``rchar`` of ``/proc/self/io``, counted by the kernel at each ``read`` of a file) while
the stream sent the tail, and its peak resident memory (``VmHWM`` of ``/proc/self/status``,
reset through ``/proc/self/clear_refs``) while the download sent 150 MB. The server runs
in this test's process (aiohttp's test server), the replica and its supervisor in
processes of their own (a detached job), so the job's own reading and writing is not
counted.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp.test_utils import TestClient
from dashboard_support import eventually_async, pytorch_manifest, sse_events

from kubemill.dashboard import pages
from kubemill.sdk import JobClient

pytestmark = pytest.mark.asyncio

Web = TestClient[Any, Any]

MiB = 1 << 20
LINE_BYTES = 200
LINES = 150 * MiB // LINE_BYTES
"""786,432 numbered lines of 200 bytes: 150 MiB."""

BIG_WRITER = """
import os, sys, time
lines, width, ready, go = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
out = sys.stdout.buffer
filler = b"x" * (width - 10)
for start in range(0, lines, 8192):
    out.write(b"".join(b"%08d %s\\n" % (i, filler) for i in range(start, min(lines, start + 8192))))
out.flush()
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.05)
print("after the big write", flush=True)
"""
"""Writes ``lines`` numbered lines of ``width`` bytes to stdout, says so with the file
``ready``, waits for the file ``go``, then writes one more line and ends."""


def numbered(index: int) -> str:
    return f"{index:08d} " + "x" * (LINE_BYTES - 10)


def rchar() -> int:
    """Bytes this process has read through read(2) and its kin (files, pipes; asyncio's
    socket receives are recv(2) calls, not counted)."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/self/io")


def peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/self/status")


def reset_peak_rss() -> None:
    """Start the peak (VmHWM) again from the current resident size (Linux >= 4.0)."""
    Path("/proc/self/clear_refs").write_text("5")


async def test_a_150_mb_log_is_tailed_and_followed_without_reading_it_and_downloaded_streaming(
    web: Web, jobs: JobClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "logs.yaml"
    config.write_text("containerLogMaxSize: 256Mi\ncontainerLogMaxFiles: 2\n")
    monkeypatch.setenv("KUBEMILL_CONFIG", str(config))  # read when the job is submitted
    ready, go = tmp_path / "written", tmp_path / "go-on"
    argv = [str(LINES), str(LINE_BYTES), str(ready), str(go)]
    log_path = await asyncio.to_thread(_submit, jobs, pytorch_manifest("big", BIG_WRITER), argv)
    await eventually_async(ready.exists, timeout=300, what="the replica wrote 150 MiB")
    log_size = Path(log_path).stat().st_size
    assert log_size == LINES * LINE_BYTES

    # The stream: the last lines first, then what comes after, then the end.
    tail: list[str] = []
    after: list[str] = []
    read_by_the_tail: int | None = None
    read_before = rchar()
    async with web.get("/api/jobs/default/big/logs/stream?replica=master-0") as stream:
        async for event, data in sse_events(stream):
            if event == "lines":
                (after if go.exists() else tail).extend(line["text"] for line in data)
                if len(tail) == pages.LOG_TAIL and not go.exists():
                    read_by_the_tail = rchar() - read_before
                    go.touch()  # the replica writes one more line and ends
            elif event == "end":
                break
    assert tail == [numbered(i) for i in range(LINES - pages.LOG_TAIL, LINES)]
    assert after == ["after the big write"]
    # Sending the last 2,000 lines (400 kB) of a 150 MiB file read a few MiB at most
    # (whole chunks from the end): reading the file, or most of it, could not stay under.
    assert read_by_the_tail is not None
    assert read_by_the_tail < 16 * MiB, f"{read_by_the_tail} bytes read to send the tail"

    # The download: every byte, sent in chunks as it is read, never held whole.
    reset_peak_rss()
    floor = peak_rss()
    read_before = rchar()
    received = 0
    last = b""
    async with web.get("/jobs/default/big/logs.txt?replica=master-0") as download:
        assert download.status == 200
        assert download.headers.get("Transfer-Encoding") == "chunked"
        assert "Content-Length" not in download.headers
        async for chunk in download.content.iter_chunked(MiB):
            received += len(chunk)
            last = (last + chunk)[-400:]
    grown = peak_rss() - floor
    # The meter counts the server's reads of the file (asyncio's socket receives are not
    # among them): sending every byte read every byte.
    assert rchar() - read_before >= log_size
    assert received == log_size + len("after the big write\n")
    assert last.decode().splitlines()[-2:] == [numbered(LINES - 1), "after the big write"]
    assert grown < 64 * MiB, f"the download grew the server's memory by {grown} bytes"


def _submit(jobs: JobClient, manifest: str, argv: list[str]) -> str:
    """Submit the writer (detached: its supervisor is another process), ``python -c CODE``
    with ``argv`` after the code, and return its replica's stdout file."""
    doc = yaml.safe_load(manifest)
    container = doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]
    container["command"] = [*container["command"], *argv]
    jobs.submit(doc, detach=True)
    backend: Any = jobs.backend
    rec = backend.store.job("default", "big")
    return str(backend.store.replicas(rec.uid)[0].log_path)
