"""The supervisor: the loop that runs one local job from submit to its end.

It watches the replica processes (woken by pidfds the moment one exits, and at least
every ``poll_interval``), turns them into :class:`~kubemill.core.Observed`, asks
:func:`kubemill.core.reconcile` what to do, does it, and writes the status and replica
rows to SQLite only when they changed. Actions map as follows:

- ``CreatePod`` creates the replica's pod (:class:`~.kubelet.ReplicaPod`), whose process
  starts at once or, past the start rate (:class:`~..start_rate.StartLimits`, from the
  config file's ``replicaStarts``), stays Pending until its turn;
- ``DeletePod`` SIGTERMs its process group and SIGKILLs it after the grace period;
- there are no services locally (replicas reach each other on 127.0.0.1 ports), so the
  local Plan asks for none; a PodGroup is admitted at once (no scheduler to wait for);
- ``DeleteJob`` (ttlSecondsAfterFinished) stops everything and removes the job;
- ``RecordEvent`` goes to the events table.

Once the job has finished, anything still running is stopped (locally no process
outlives its job) and the supervisor lets go of the job.

No process outlives its job, even a daemonised one: the supervisor is a child subreaper,
and the job's processes beyond its replicas' main ones are found, signalled and swept as
:mod:`.strays` describes. No cgroup is created or moved.

It runs either inside the submitting process, in a thread (``detach=False``: no
interpreter start-up on the way to the first replica), or as its own process in a new
session: ``python -m kubemill.substrates.local.supervisor --state-dir D --job-uid U``
(:mod:`.__main__`).
That process stops the job cleanly on SIGTERM or SIGINT (a second one kills at once).

The supervisor writes no outcome of its own. Other processes reach it through the
job's recorded manifest, which it reads again on every request check (every
``request_interval``), and through the ``request`` column:

- an interrupt (Ctrl-C, a signal to the supervisor, ``JobClient.interrupt``) sets the
  stop annotation (:data:`~kubemill.api.STOP_ANNOTATION`) on the recorded manifest; the
  core fails the job with reason ``Interrupted`` and deletes its pods, which the
  supervisor stops (grace period, then SIGKILL; the ``force`` request skips the grace);
- suspend and resume set ``spec.runPolicy.suspend``; the core deletes the pods and marks
  the job Suspended, or creates them again and marks it resumed. While suspended the
  supervisor stays alive and idle (it runs no process and wakes a few times a second);
- a patch that changes the replica set (a group's ``replicas``) plans the job again
  (:mod:`.adopt`): new replicas get ports and launch specs, running ones keep theirs, and
  the core creates the missing pods and deletes those no longer in the Plan;
- ``delete`` stops every replica and lets go, for the caller to remove the records;
- a job with an owner process (``SubmitOptions.owner_pid``, :mod:`..owner`) is stopped and
  removed by its supervisor once that process has ended.

A job that cannot start here (``NotRunnableLocally``) and a failure of the loop itself
(``SupervisorError``) reach the core as a :class:`~kubemill.core.Halt`.

The package (its names load on first use): :mod:`.loop` (the :class:`Supervisor`),
:mod:`.options` (how often it looks), :mod:`.adopt` (a changed manifest), :mod:`.recreation`
(a recreated replica's restarts), :mod:`.ports`, :mod:`.requests`, :mod:`.__main__` (the
detached process).
"""

from typing import TYPE_CHECKING

from kubemill.substrates.lazy_names import names_loaded_on_use

if TYPE_CHECKING:
    from kubemill.substrates.local.supervisor.loop import NOT_RUNNABLE, SUPERVISOR_ERROR, Supervisor
    from kubemill.substrates.local.supervisor.options import SupervisorOptions

__all__ = ["NOT_RUNNABLE", "SUPERVISOR_ERROR", "Supervisor", "SupervisorOptions"]

if not TYPE_CHECKING:
    # Each public name from the submodule that holds it: a process that only reads the
    # supervisor's options (a detached submission) does not load the loop, the kubelet
    # stand-in and the exec service.
    __getattr__ = names_loaded_on_use(
        __name__,
        {
            name: f"{__name__}.{'options' if name == 'SupervisorOptions' else 'loop'}"
            for name in __all__
        },
    )
