"""The local substrate: a job's replicas as processes on this machine, state in SQLite.

:class:`LocalBackend` is what the SDK uses; the modules behind it are private:
``store`` (SQLite and the state directory), ``network`` (127.0.0.1 and reserved ports),
``launch`` (argv, env, working directory, spawning), ``kubelet`` (one replica's process
and its in-place restarts), ``supervisor`` (the reconcile loop), ``verdict`` (the core's
verdict when no loop can ask for it) and ``logs``.
"""

from kubemill.core import INTERRUPTED
from kubemill.substrates.local.backend import LocalBackend
from kubemill.substrates.local.images import CONFIG_ENV, Environment, ImageConfig
from kubemill.substrates.local.launch import NotRunnableLocally
from kubemill.substrates.local.network import LocalNetwork
from kubemill.substrates.local.store import STATE_DIR_ENV, Store, default_state_dir
from kubemill.substrates.local.supervisor import SupervisorOptions

__all__ = [
    "CONFIG_ENV",
    "INTERRUPTED",
    "STATE_DIR_ENV",
    "Environment",
    "ImageConfig",
    "LocalBackend",
    "LocalNetwork",
    "NotRunnableLocally",
    "Store",
    "SupervisorOptions",
    "default_state_dir",
]
