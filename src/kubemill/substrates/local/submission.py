"""Submitting a job to the local substrate, the parts that need no running backend: the
checked namespace, the job's directory inside the state directory, the environments of
its images, the records written before anything starts, a controller's record, and
starting a detached supervisor (``python -m kubemill.substrates.local.supervisor``, or
``...local.schedules`` for a controller's loop).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from kubemill.api import Job
from kubemill.frameworks import Plan
from kubemill.kinds import controller_for, entry_for, is_controller
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.local import procinfo
from kubemill.substrates.local.images import (
    CONFIG_ENV,
    MAX_REPLICAS_KEY,
    Environment,
    ImageConfig,
    config_path,
)
from kubemill.substrates.local.launch import NotRunnableLocally, main_container
from kubemill.substrates.local.network import replica_address
from kubemill.substrates.local.prepared import Prepared
from kubemill.substrates.local.store import (
    STATE_DIR_ENV,
    NewJob,
    ReplicaRecord,
    Store,
    checked_namespace,
    listing_fields,
)


def inside_state_dir(state_dir: Path, path: Path) -> Path:
    """``path``, if it stays inside the state directory once resolved; else refuse it.

    Names are validated before this, so this is the last guard, for a job model whose
    name or namespace was changed after validation (a job directory elsewhere would be
    written, and later deleted, outside kubemill's own directory).
    """
    root = state_dir.resolve()
    if not path.resolve().is_relative_to(root):
        raise SubstrateError(
            f"refusing to write {path}: it is outside the state directory {root};"
            " check the job's metadata.name and namespace"
        )
    return path


def set_namespace(job: Job, namespace: str | None) -> None:
    """Put the job in ``namespace`` (checked), unless its manifest names another."""
    for candidate in (namespace, job.metadata.namespace):
        if candidate is not None:
            checked_namespace(candidate)
    if namespace is None:
        return
    given = job.metadata.namespace
    if given and given != namespace:
        raise SubstrateError(
            f"the manifest says namespace {given!r} but {namespace!r} was asked for;"
            " remove metadata.namespace or ask for the same one"
        )
    job.metadata.namespace = namespace


def environments_for(
    job: Job, config_file: str | os.PathLike[str] | None
) -> dict[str, Environment]:
    """The environment each image of the job resolves to in the local config."""
    config = ImageConfig.load(config_file)
    _check_replica_cap(job, config)
    images: dict[str, Environment] = {}
    # Every container's image: which container runs is the kind's choice, made by the
    # Plan after this (by name, or the first one for kinds without a fixed name: MPI).
    for spec in job.replica_specs.values():
        for container in spec.template.spec.containers:
            image = container.image or ""
            if image not in images:
                images[image] = config.resolve(image)
    return images


def warn_ignored_containers(store: Store, uid: str, job: Job, plan: Plan) -> None:
    """Say so when a pod template has containers that do not run locally."""
    for rtype, spec in job.replica_specs.items():
        runs = next((r.container for r in plan.replicas if r.replica_type == rtype), None)
        if runs is None:
            continue  # no replica of the type
        pod = spec.template.spec
        others = [c.name for c in pod.containers if c.name != runs]
        others += [f"{c.name} (init)" for c in pod.init_containers or []]
        if others:
            store.add_event(
                uid,
                type="Warning",
                reason="ContainersIgnored",
                message=f"{rtype}: only container {runs!r} runs on the"
                f" local substrate; not run: {', '.join(others)}",
            )


def record_controller(
    store: Store, state_dir: Path, job: Job, uid: str, base_dir: str, job_dir: Path
) -> None:
    """Record a controller's object (a job with no replicas: a schedule) and start its
    loop, always detached: it never ends, so no foreground process could see it through.

    Its template is checked as a run's job would be (a file not on this machine), at
    the controller's field paths: a run refused at every due time helps no one."""
    sample = controller_for(job.KIND).rules.sample_run(job)
    if sample is not None:
        run = sample.job
        refused = entry_for(run.KIND).local.refused(
            run, lambda path: (Path(base_dir) / path).exists()
        )
        if refused:
            where = f"{sample.spec_path}."
            raise NotRunnableLocally(
                [replace(e, path=e.path.replace("spec.", where, 1)) for e in refused]
            )
    wanted, ttl = listing_fields(job)
    store.insert_job(
        NewJob(
            uid=uid,
            namespace=job.namespace,
            name=job.name,
            kind=job.KIND,
            manifest=manifest_of(job),
            status=type(job.status)().to_wire(),
            base_dir=base_dir,
            job_dir=str(job_dir),
            environments={},
            replicas=[],
            ports={},
            supervisor=None,
            supervisor_mode="detached",
            wanted=wanted,
            ttl=ttl,
        )
    )
    try:
        job_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        store.remove_job(uid)
        raise SubstrateError(
            f"cannot create the directory of {job.KIND} {job.name}, {job_dir}:"
            f" {exc.strerror or exc};"
            f" make {state_dir} writable, or set {STATE_DIR_ENV} to a writable directory"
        ) from exc


def start_detached(
    store: Store,
    uid: str,
    job_dir: Path,
    *,
    config_file: str | os.PathLike[str] | None,
    started: list[subprocess.Popen[bytes]],
    hand_over: bool = False,
    kind: str = "",
) -> None:
    """Start the job's supervisor (or a controller's loop) as a process of its own session.

    ``started`` holds the detached processes the caller started so far, which it reaps
    (they are its children); the new one is added.
    """
    # A controller's loop is its own module: it submits and deletes jobs, it runs none.
    module = "schedules" if is_controller(kind) else "supervisor"
    argv = [
        sys.executable,
        "-m",
        f"kubemill.substrates.local.{module}",
        "--state-dir",
        str(store.state_dir),
        "--job-uid",
        uid,
    ]
    env = None
    if config_file is not None:
        # The detached supervisor reads the start limits (replicaStarts) itself, from
        # the config this backend was given, not the user's default one.
        env = {**os.environ, CONFIG_ENV: str(Path(config_file).absolute())}
    with (job_dir / "supervisor.log").open("ab") as out:
        proc = subprocess.Popen(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            close_fds=True,
            start_new_session=True,
        )
    # Reap supervisors that already ended, so a long-lived SDK process collects no zombies.
    started[:] = [p for p in started if p.poll() is None]
    started.append(proc)
    ident = procinfo.identify(proc.pid)
    if hand_over:
        # Resuming a job whose supervisor is gone: the new one waits for this.
        if ident is None or not store.hand_over(uid, ident):
            proc.kill()
            proc.wait()
            raise SubstrateError(
                "the job changed while a new supervisor was started for it (it finished,"
                " or another process resumed it); see `kubemill get`"
            )
    elif ident is not None:
        # The supervisor claims the job itself too; whichever comes first wins the same.
        store.claim_supervisor(uid, ident, mode="detached")


def _check_replica_cap(job: Job, config: ImageConfig) -> None:
    """Refuse a job with more replicas than this machine is configured to start at once."""
    total = sum(job.replica_count(rtype) for rtype in job.replica_specs)
    cap = config.max_replicas_per_job
    if total > cap:
        where = config.path or config_path(None)
        raise SubstrateError(
            f"job {job.name} asks for {total} replicas, over the local cap of {cap} per job"
            f" (each replica is a process on this machine); to allow more, set"
            f" `{MAX_REPLICAS_KEY}: {total}` in {where}"
        )


def manifest_of(job: Job) -> dict[str, object]:
    """The job as recorded: its wire form without the status."""
    wire = job.to_wire()
    wire.pop("status", None)
    return wire


def replica_records(uid: str, prepared: Prepared) -> list[ReplicaRecord]:
    """The records of a planned job's replicas, before any has started."""
    records = []
    ports = prepared.network.ports
    for position, rep in enumerate(prepared.plan.replicas):
        main_container(rep)  # fails early if the template lost its main container
        records.append(
            ReplicaRecord(
                job_uid=uid,
                name=rep.name,
                replica_type=rep.replica_type,
                index=rep.index,
                position=position,
                log_path=prepared.specs[rep.name].log_path,
                address=replica_address(
                    rep.ports,
                    ports,
                    replica=rep.name,
                    preferred=prepared.job.DEFAULT_PORT_NAME,
                ),
            )
        )
    return records
