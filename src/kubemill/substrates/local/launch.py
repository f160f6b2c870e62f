"""From a replica of the Plan to a process: argv, environment, working directory, spawn.

This is the local stand-in for the container runtime:

- argv is the container's ``command`` + ``args`` after ``$(VAR)`` expansion
  (:mod:`.expansion`), never a shell string. A container without ``command`` (none, or
  the seed's ``command: [""]``) cannot run here: there is no image to take an entrypoint
  from. The one exception is a replica its framework plans *host only*
  (``ReplicaPlan.host_only``, e.g. an MPI worker in exec mode): it runs
  :func:`host_argv`, an idle process that lives until the job ends, and other
  replicas run commands in it through the supervisor's exec service
  (:mod:`.exec_service`), as ``kubectl exec`` does in a pod.
- the environment is this process's environment (minus variables that would tie the
  replica to the wrong Python), the chosen environment's ``bin/`` first on PATH,
  ``HOSTNAME`` set to the pod name as Kubernetes does, then the container's ``env``
  (``value`` with expansion over the variables listed before it; ``valueFrom.fieldRef``
  for the pod's own fields) and last the Plan's environment contract.
- each replica has a private temporary directory, ``<job dir>/tmp/<replica>`` (created
  0700 when the process starts, kept with the job's logs until ``delete``): ``TMPDIR``
  points at it unless the container's ``env`` sets it; on Kubernetes each pod has a /tmp
  of its own. For host replicas ``OMPI_MCA_btl_vader_backing_directory`` points there
  too (unless set): two hosts on one machine are two "hosts" to MPI, and OpenMPI's
  shared-memory transport (vader) crashes when their ranks share backing files (by
  default in /dev/shm, named by machine, job and local rank). Only hosts get it, because
  ``mpirun`` passes every ``OMPI_MCA_*`` variable of its own environment on to the
  ``orted`` it starts: set on the launcher, it would put every host's ranks in the
  launcher's directory again.
- ``KUBEMILL_EXEC_SOCKET`` names the job's exec service (:mod:`.exec_service`), the
  local stand-in for ``kubectl exec``.
- ``KUBEMILL_PROGRESS_FILE`` names the file the replica's program appends its progress
  reports to (:mod:`kubemill.progress`): ``<job dir>/progress/<replica>.jsonl``, read by
  the supervisor (:mod:`.progress`).
- the working directory is ``workingDir`` (relative ones resolve against the job's base
  directory), or the base directory itself.
- each process leads its own session and process group, and asks the kernel to
  SIGKILL it when the thread that started it dies (``PR_SET_PDEATHSIG``), so a
  supervisor that dies leaves no replica behind.
- the main container's ``resources`` (:func:`local_resources`): ``limits.cpu`` pins the
  process to that many cores (rounded up, at least 1; the kubelet chooses which when it
  starts the process) and sets ``OMP_NUM_THREADS``/``MKL_NUM_THREADS`` to that number unless
  the container's ``env`` sets them; ``limits.memory`` is watched by the supervisor
  (OOMKilled past it). A request or limit larger than this machine (cores this process
  may use, ``MemTotal``) cannot run here.
- ``terminationMessagePolicy: FallbackToLogsOnError`` on the main container: a failed
  run's message is the tail of its log (``LaunchSpec.message_from_logs``, read by the
  kubelet stand-in), which the core puts in the job's failure message.

:func:`prepare` checks all of this for every replica before anything starts and raises
one :class:`NotRunnableLocally` listing every problem with its field path; first it asks
the job's engine what it knows cannot run here (``LocalSupport.refusals``).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import stat
import tempfile
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from kubemill.api import Container, EnvVar, FieldError, Job, ManifestError
from kubemill.frameworks import Plan, ReplicaPlan
from kubemill.kinds import engine_for
from kubemill.progress import PROGRESS_FILE_ENV
from kubemill.substrates.base import SubstrateError
from kubemill.substrates.local import procinfo
from kubemill.substrates.local.expansion import expand
from kubemill.substrates.local.images import Environment, image_note
from kubemill.substrates.local.network import LOCAL_HOST
from kubemill.substrates.local.resources import THREAD_VARIABLES, local_resources

if TYPE_CHECKING:
    from kubemill.substrates.local.probes import ExecProbe

DEFAULT_GRACE_SECONDS = 5.0
"""SIGTERM-to-SIGKILL grace when the pod sets no ``terminationGracePeriodSeconds``.

Kubernetes defaults to 30 s; a local job is stopped by someone waiting at a terminal,
so kubemill waits less unless the manifest asks for more."""

_DROPPED = ("PYTHONHOME", "VIRTUAL_ENV", "__PYVENV_LAUNCHER__", "PYTHONEXECUTABLE")
"""Variables that would make a replica's ``python`` load another environment's stdlib."""

_LABEL_REF = re.compile(r"^metadata\.(labels|annotations)\[(?:'([^']*)'|\"([^\"]*)\")\]$")


class NotRunnableLocally(ManifestError, SubstrateError):
    """The job is valid but cannot run as local processes; ``errors`` says where and why."""


@dataclass(frozen=True)
class LaunchSpec:
    """Everything needed to start one replica's process."""

    replica: str
    argv: tuple[str, ...]
    env: Mapping[str, str]
    cwd: str
    log_path: str
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    cpus: int | None = None
    """Cores to pin the process to (from ``limits.cpu``), or ``None`` for all."""
    memory_limit: int | None = None
    """Resident bytes of its process tree past which it is OOMKilled (``limits.memory``)."""
    tmp_dir: str | None = None
    """The replica's private temporary directory, created (0700) when it starts."""
    host: bool = False
    """A host replica: it runs :func:`host_argv` and waits for exec'd commands."""
    message_from_logs: bool = False
    """The container's ``terminationMessagePolicy`` is ``FallbackToLogsOnError``: a failed
    run's message is the tail of its log, as the kubelet makes it."""
    readiness: ExecProbe | None = None
    """The container's exec ``readinessProbe``: the pod is ready only while it passes."""


@dataclass(frozen=True)
class PodContext:
    """What a replica's pod would know about itself (for ``valueFrom.fieldRef``), and
    where the job keeps its replicas' private directories and its exec socket ("" for
    none)."""

    job_uid: str
    namespace: str
    base_dir: str
    log_dir: str
    tmp_root: str = ""
    """Parent of the replicas' private temporary directories ("" leaves TMPDIR as it is)."""
    exec_socket: str = ""
    """The job's exec service socket, given to every replica ("" for none)."""
    progress_dir: str = ""
    """Where the replicas' progress files are (:mod:`.progress`; "" for none)."""

    @classmethod
    def for_job(cls, *, job_uid: str, namespace: str, base_dir: str, job_dir: str) -> PodContext:
        """The context of a job whose files live under ``job_dir``."""
        return cls(
            job_uid=job_uid,
            namespace=namespace,
            base_dir=base_dir,
            log_dir=str(Path(job_dir) / "logs"),
            tmp_root=str(Path(job_dir) / "tmp"),
            exec_socket=exec_socket_path(job_dir, job_uid),
            progress_dir=progress_dir(job_dir),
        )


def progress_dir(job_dir: str) -> str:
    """Where a job's replicas write their progress reports."""
    return str(Path(job_dir) / "progress")


def progress_file(directory: str, replica: str) -> str:
    """The progress file of one replica (its ``KUBEMILL_PROGRESS_FILE``)."""
    return str(Path(directory) / f"{replica}.jsonl")


EXEC_SOCKET_ENV = "KUBEMILL_EXEC_SOCKET"
"""The variable naming the job's exec service socket in every replica's environment."""
TMPDIR_VARIABLES = ("TMPDIR",)
"""Set to the replica's private temporary directory unless the container sets them."""
HOST_TMPDIR_VARIABLES = ("OMPI_MCA_btl_vader_backing_directory",)
"""Set to a host replica's private temporary directory too, unless the container sets
them (see the module's docstring: not on the launcher, whose mpirun passes them on)."""
SUN_PATH_MAX = 107
"""Longest unix socket path in bytes (``sun_path`` is 108 bytes with its NUL)."""


def exec_socket_path(job_dir: str, job_uid: str) -> str:
    """Where the exec service of the job in ``job_dir`` listens.

    ``<job dir>/exec/exec.sock`` when that fits in a socket address; otherwise (a deep
    state directory) a private directory of this user with a short path:
    ``$XDG_RUNTIME_DIR/kubemill/<job uid>/`` or ``/tmp/kubemill-<uid>/<job uid>/``. The
    supervisor creates it (0700) and removes it when it lets go of the job.
    """
    preferred = Path(job_dir) / "exec" / "exec.sock"
    if len(os.fsencode(preferred)) <= SUN_PATH_MAX:
        return str(preferred)
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    private = f"kubemill-{os.getuid()}"
    bases = [Path(runtime) / "kubemill"] if runtime else []
    # /tmp last: short whatever TMPDIR is; the service refuses a directory there that is
    # not this user's own (exec_service.prepare_socket_dir).
    bases += [Path(tempfile.gettempdir()) / private, Path("/tmp") / private]  # noqa: S108
    for base in bases:
        candidate = base / job_uid / "exec.sock"
        if len(os.fsencode(candidate)) <= SUN_PATH_MAX:
            return str(candidate)
    raise SubstrateError(
        f"no short enough path for the exec socket of job {job_uid} ({preferred} is longer"
        f" than a unix socket address allows, {SUN_PATH_MAX} bytes)"
    )


HOST_SECONDS = str(2**31 - 1)
"""How long a host's ``sleep`` lasts: longer than any job (and a number every ``sleep``
takes, GNU's and BusyBox's)."""


def remove_socket(path: str) -> None:
    """Remove a job's socket and its directory, if a supervisor that died left them (a
    short path outside the job's directory is not removed with it)."""
    socket_path = Path(path)
    with contextlib.suppress(OSError):
        if stat.S_ISSOCK(os.lstat(socket_path).st_mode):
            socket_path.unlink()
    with contextlib.suppress(OSError):
        socket_path.parent.rmdir()  # only if empty


def host_argv() -> tuple[str, ...]:
    """What a host replica runs: nothing, until a signal ends it (``sleep`` for 68 years,
    the system's own from ``/bin`` or ``/usr/bin``).

    SIGTERM ends it as it ends most programs (exit code 143), not with exit 0: stopped by
    kubemill (the job's end, a delete, a suspend) the replica is shown ``Stopped`` as any
    other, and killed by anything else mid-run it has failed, so an MPI job whose worker is
    killed fails naming that worker (exit 0 would count as a success, and the launcher
    would only fail later, retrying a worker that is gone; a suspended job's resume would
    count a restart).

    Not a Python interpreter, which took 10 ms of a core per host just as the job's next
    stage (an MPI launcher's mpirun) starts beside it, and 8 MiB more of memory each.
    """
    return (shutil.which("sleep", path=os.defpath) or "sleep", HOST_SECONDS)


def container_path(job: Job, rep: ReplicaPlan, index: int) -> str:
    """The manifest path of a container of ``rep``'s pod template."""
    return f"spec.{job.REPLICA_SPECS_FIELD}.{rep.replica_type}.template.spec.containers[{index}]"


def main_container(rep: ReplicaPlan) -> tuple[int, Container]:
    """The container that runs locally: the one receiving the Plan's env."""
    for i, container in enumerate(rep.template.spec.containers):
        if container.name == rep.container:
            return i, container
    raise SubstrateError(f"{rep.name}: the pod template has no container {rep.container!r}")


def pod_labels(rep: ReplicaPlan) -> dict[str, str]:
    """The pod's labels: the template's plus kubemill's."""
    return {**rep.template.metadata.labels, **rep.labels}


def base_environment(environment: Environment, pod_name: str) -> dict[str, str]:
    """The inherited part of a replica's environment."""
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED}
    if not environment.is_default:
        # Another interpreter: our PYTHONPATH would shadow its packages.
        env.pop("PYTHONPATH", None)
    path = [p for p in env.get("PATH", os.defpath).split(os.pathsep) if p]
    env["PATH"] = os.pathsep.join(
        [environment.bin_dir, *(p for p in path if p != environment.bin_dir)]
    )
    if environment.is_venv:
        env["VIRTUAL_ENV"] = str(environment.prefix)
    env["HOSTNAME"] = pod_name
    return env


def field_ref_value(field_path: str, *, rep: ReplicaPlan, ctx: PodContext) -> str | None:
    """The value of a pod field as the downward API gives it, or ``None`` if unsupported."""
    simple: dict[str, Callable[[], str]] = {
        "metadata.name": lambda: rep.name,
        "metadata.namespace": lambda: ctx.namespace,
        "metadata.uid": lambda: str(uuid.uuid5(uuid.NAMESPACE_URL, f"{ctx.job_uid}/{rep.name}")),
        "spec.nodeName": socket.gethostname,
        "spec.serviceAccountName": lambda: (
            rep.template.spec.service_account_name or rep.template.spec.service_account or "default"
        ),
        "status.podIP": lambda: LOCAL_HOST,
        "status.podIPs": lambda: LOCAL_HOST,
        "status.hostIP": lambda: LOCAL_HOST,
        "status.hostIPs": lambda: LOCAL_HOST,
    }
    if field_path in simple:
        return simple[field_path]()
    match = _LABEL_REF.match(field_path)
    if match:
        source = pod_labels(rep) if match[1] == "labels" else rep.template.metadata.annotations
        return source.get(match[2] if match[2] is not None else match[3], "")
    return None


SUPPORTED_FIELD_REFS = (
    "metadata.name, metadata.namespace, metadata.uid, metadata.labels['KEY'], "
    "metadata.annotations['KEY'], spec.nodeName, spec.serviceAccountName, status.podIP, "
    "status.podIPs, status.hostIP, status.hostIPs"
)


def build_launch(
    job: Job,
    rep: ReplicaPlan,
    *,
    ctx: PodContext,
    environment: Environment,
    engine_env: Mapping[str, str] | None = None,
) -> tuple[LaunchSpec | None, list[FieldError]]:
    """The launch spec of one replica, or the problems that prevent it.

    A host-only replica (``rep.host_only``) runs :func:`host_argv`. ``engine_env`` is
    what the job's engine needs on this machine (``LocalSupport.env``), set unless the
    container's ``env`` sets it.
    """
    errors: list[FieldError] = []
    index, container = main_container(rep)
    path = container_path(job, rep, index)
    host = rep.host_only
    if not host and not container.has_command:
        what = (
            "has `args` but no `command`"
            if container.args
            else "has an empty `command`"
            if container.command
            else "has no `command`"
        )
        errors.append(
            FieldError(
                f"{path}.command",
                f"container {container.name!r} {what}: a local run has no container image to"
                " take an entrypoint from",
                'add the program to run, e.g. command: ["python", "train.py"]'
                + (" (args stay as they are)" if container.args else ""),
            )
        )
    if container.env_from:
        errors.append(
            FieldError(
                f"{path}.envFrom",
                "envFrom (ConfigMaps and Secrets) is not available on the local substrate",
                "set the variables with env[].value, or run on kubernetes",
            )
        )

    env = base_environment(environment, rep.name)
    declared: dict[str, str] = {}
    for i, var in enumerate(container.env or []):
        value = _env_value(var, rep=rep, ctx=ctx, declared=declared)
        if isinstance(value, FieldError):
            errors.append(FieldError(f"{path}.env[{i}].{value.path}", value.message, value.hint))
        else:
            declared[var.name] = value
    # The Plan's contract comes last, so it wins over a user variable of the same name,
    # as the later entry does in a Kubernetes env list.
    for var in rep.env:
        declared[var.name] = expand(var.value or "", declared)
    limits, problems = local_resources(container, path)
    errors.extend(problems)
    if limits.cpus is not None:
        for name in THREAD_VARIABLES:
            if name not in declared:
                env[name] = str(limits.cpus)
    for name, value in (engine_env or {}).items():
        if name not in declared:
            env[name] = value
    env.update(declared)
    tmp_dir = None
    if ctx.tmp_root:
        tmp_dir = str(Path(ctx.tmp_root) / rep.name)
        for name in TMPDIR_VARIABLES + (HOST_TMPDIR_VARIABLES if rep.host_only else ()):
            if name not in declared:
                env[name] = tmp_dir
    # Inherited by whatever the replica starts: how its orphans are known (procinfo).
    env[procinfo.REPLICA_MARK] = f"{ctx.job_uid}/{rep.name}"
    if ctx.exec_socket:
        env[EXEC_SOCKET_ENV] = ctx.exec_socket
    if ctx.progress_dir:
        env[PROGRESS_FILE_ENV] = progress_file(ctx.progress_dir, rep.name)

    cwd = _working_dir(container, ctx.base_dir)
    if not Path(cwd).is_dir():
        field = f"{path}.workingDir" if container.working_dir else f"{path}"
        errors.append(
            FieldError(
                field,
                f"working directory {cwd} does not exist",
                "create it, or fix workingDir (relative paths start at the manifest's directory)",
            )
        )
    if host:
        argv = host_argv()
    else:
        words = [*(container.command or []), *(container.args or [])]
        argv = tuple(expand(a, declared) for a in words)
    if argv and not errors:
        problem = _executable_problem(argv[0], env["PATH"], cwd)
        if problem:
            errors.append(
                FieldError(
                    f"{path}.command[0]",
                    f"replica {rep.name}: {problem}",
                    f"install it into {environment.prefix} (environment chosen by"
                    f" {environment.source}) or map the image {container.image!r} to an"
                    " environment that has it",
                )
            )
    if not host and not errors:
        errors.extend(_missing_image_files(container, path, rep.name))
    readiness: ExecProbe | None = None
    if container.readiness_probe:
        # The probe's module (and its record) is loaded for a container that has one only.
        from kubemill.substrates.local.probes import exec_probe

        readiness, problems = exec_probe(
            container.readiness_probe, f"{path}.readinessProbe", {**env, **declared}
        )
        errors.extend(problems)
    if errors:
        return None, errors
    grace = rep.template.spec.termination_grace_period_seconds
    return (
        LaunchSpec(
            replica=rep.name,
            argv=argv,
            env=env,
            cwd=cwd,
            log_path=str(Path(ctx.log_dir) / f"{rep.name}.log"),
            grace_seconds=DEFAULT_GRACE_SECONDS if grace is None else float(grace),
            cpus=limits.cpus,
            memory_limit=limits.memory_limit,
            tmp_dir=tmp_dir,
            host=host,
            message_from_logs=container.termination_message_policy == FALLBACK_TO_LOGS,
            readiness=readiness,
        ),
        [],
    )


FALLBACK_TO_LOGS = "FallbackToLogsOnError"
"""The ``terminationMessagePolicy`` whose failed runs take their message from the log."""

SCRIPT_SUFFIXES = (".py", ".sh")
"""Absolute paths with these endings in a command are scripts the image would hold."""


def _missing_image_files(container: Container, path: str, replica: str) -> list[FieldError]:
    """Scripts named by absolute path in the command that this machine does not have.

    In a pod such a path is inside the image; locally the image only picks a Python
    environment, so the path must exist here. Without this check the replica would start,
    fail with "can't open file" and be restarted until its backoff limit.
    """
    errors = []
    for field in ("command", "args"):
        for index, word in enumerate(getattr(container, field) or []):
            if word.startswith("/") and word.endswith(SCRIPT_SUFFIXES) and not Path(word).exists():
                note = image_note(container.image or "")
                errors.append(
                    FieldError(
                        f"{path}.{field}[{index}]",
                        f"replica {replica}: {word} does not exist on this machine; in a pod it"
                        f" would come from the image {container.image!r}, but locally an image"
                        " only picks a Python environment" + (f". {note}" if note else ""),
                        "put the file there, or use a path on this machine (relative paths"
                        " start at the manifest's directory); or run the job on kubernetes",
                    )
                )
    return errors


def prepare(
    job: Job,
    plan: Plan,
    *,
    ctx: PodContext,
    environments: Mapping[str, Environment],
) -> dict[str, LaunchSpec]:
    """Launch specs for every replica, or :class:`NotRunnableLocally` with every problem.

    Replicas of one type share a template, so a problem is reported once per field.
    """
    specs: dict[str, LaunchSpec] = {}
    support = engine_for(job.KIND).local
    # What the engine knows cannot run here (a file the job names that this machine does
    # not have) says more than any replica's symptom of it, at the field the user wrote.
    refused = support.refused(job, lambda path: (Path(ctx.base_dir) / path).exists())
    if refused:
        raise NotRunnableLocally(refused)
    errors: list[FieldError] = []
    seen: set[str] = set()
    engine_env = dict(support.env)
    for rep in plan.replicas:
        _, container = main_container(rep)
        environment = environments[container.image or ""]
        spec, found = build_launch(
            job, rep, ctx=ctx, environment=environment, engine_env=engine_env
        )
        for err in found:
            if err.path not in seen:
                seen.add(err.path)
                errors.append(replace(err, path=job.source_path(err.path)))
        if spec is not None:
            specs[rep.name] = spec
    if errors:
        raise NotRunnableLocally(errors)
    return specs


def _env_value(
    var: EnvVar,
    *,
    rep: ReplicaPlan,
    ctx: PodContext,
    declared: Mapping[str, str],
) -> str | FieldError:
    source = var.value_from
    if source is None:
        # Kubernetes expands a value over the variables defined before it.
        return expand(var.value or "", declared)
    if source.field_ref is not None:
        value = field_ref_value(source.field_ref.field_path, rep=rep, ctx=ctx)
        if value is None:
            return FieldError(
                "valueFrom.fieldRef.fieldPath",
                f"{source.field_ref.field_path!r} is not a field the local substrate can provide",
                f"supported: {SUPPORTED_FIELD_REFS}",
            )
        return value
    for attr, wire, what in (
        ("secret_key_ref", "secretKeyRef", "Secrets"),
        ("config_map_key_ref", "configMapKeyRef", "ConfigMaps"),
        ("resource_field_ref", "resourceFieldRef", "resource limits"),
    ):
        if getattr(source, attr) is not None:
            return FieldError(
                f"valueFrom.{wire}",
                f"{var.name}: the local substrate has no {what} to read from",
                "set env[].value instead, or run on kubernetes",
            )
    return FieldError("valueFrom", f"{var.name}: no value source given", "set value or valueFrom")


def _working_dir(container: Container, base_dir: str) -> str:
    if not container.working_dir:
        return base_dir
    return str(Path(base_dir) / container.working_dir)  # an absolute workingDir wins


def _executable_problem(program: str, path: str, cwd: str) -> str:
    """Why ``program`` cannot be executed, or "" if it can."""
    if "/" in program:
        target = Path(cwd) / program
        if not target.is_file():
            return f"executable {program!r} does not exist (looked in {cwd})"
        if not os.access(target, os.X_OK):
            return f"{program!r} is not executable (chmod +x it, or run it with an interpreter)"
        return ""
    if shutil.which(program, path=path) is None:
        first = path.split(os.pathsep)[0]
        return f"executable {program!r} not found on PATH (which starts with {first})"
    return ""
