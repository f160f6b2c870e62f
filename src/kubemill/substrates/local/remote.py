"""The local supervisor's reader of a Plan's remote run (a Ray job on the job's Ray head):
the substrate-neutral :class:`~kubemill.substrates.remote.RemoteWatch`, asked at the address
every replica has here, the loopback one.

The supervisor asks once a turn (:meth:`LocalRemote.read`); the watch asks the service only
when due (every ``interval``) and while its ``after`` replica is Running and ready. Every
URL is built from :data:`~kubemill.substrates.local.network.LOCAL_HOST` and the Plan's port,
so nothing here sends traffic off the machine. A run whose service wants a credential
(:attr:`~kubemill.frameworks.RemoteRun.bearer_token`) is sent the secret the supervisor
generated in the job's files directory.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path

from kubemill.core import ObservedPod
from kubemill.frameworks import RemoteReport, SecretFile
from kubemill.substrates.local.network import LOCAL_HOST
from kubemill.substrates.local.prepared import Prepared
from kubemill.substrates.remote import RemoteWatch


def remote_watch(prepared: Prepared, interval: float) -> LocalRemote | None:
    """The reader of the prepared job's remote run (None: its Plan has none), whose
    credential is read from the job's files directory, where the supervisor wrote it."""
    remote = prepared.plan.remote
    if remote is None:
        return None
    token, files_dir = remote.bearer_token, Path(prepared.network.files_root)
    credential = None if token is None else partial(read_secret, files_dir, token)
    return LocalRemote(RemoteWatch(remote, interval=interval, credential=credential))


def followed(before: LocalRemote | None, prepared: Prepared, interval: float) -> LocalRemote | None:
    """The reader of the remote run of ``prepared``, planned again: ``before`` while the
    run is the same; else a new reader, which keeps ``before``'s last report (the same run
    whose service moved, e.g. another job's cluster found again)."""
    if before is not None and prepared.plan.remote == before.watch.remote:
        return before
    reader = remote_watch(prepared, interval)
    if before is not None and reader is not None:
        reader.watch.report = before.watch.report
    return reader


def read_secret(files_dir: Path, secret: SecretFile) -> str | None:
    """The content of a generated secret file (None until the supervisor has written it):
    read each time, as the file is the one the job's processes read."""
    try:
        return (files_dir / secret.file_set / secret.file).read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None


class LocalRemote:
    """One Plan's remote run, asked after on loopback."""

    def __init__(self, watch: RemoteWatch) -> None:
        self.watch = watch

    def read(self, pods: tuple[ObservedPod, ...]) -> RemoteReport | None:
        """The latest report, asked for now if due and the service is up (its ``after``
        replica Running and ready among ``pods``)."""
        remote = self.watch.remote
        if remote.serving_elsewhere:
            source: str | None = ""  # another job's service: no pod of this job to stamp it
        else:
            up = [p for p in pods if p.name == remote.after and p.phase == "Running" and p.ready]
            source = up[0].uid if up else None
        if source is not None and self.watch.due(time.monotonic()):
            return self.watch.ask_status(LOCAL_HOST, source)
        return self.watch.report

    def submit(self) -> str | None:
        """POST the run to the service; why it failed (None: it was taken)."""
        return self.watch.submit(LOCAL_HOST)
