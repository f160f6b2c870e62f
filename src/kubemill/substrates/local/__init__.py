"""The local substrate: a job's replicas as processes on this machine, state in SQLite.

:class:`LocalBackend` is what the SDK uses; the modules behind it are private:
``store`` (SQLite and the state directory; what ``kubemill get`` lists is read there
without the job models), ``records`` (its rows), ``network`` (127.0.0.1 and reserved
ports), ``launch`` (argv, env, working directory, spawning), ``kubelet`` (one replica's
process and its in-place restarts), ``supervisor`` (the reconcile loop), ``verdict`` (the
core's verdict when no loop can ask for it) and ``logs``.

The names below are imported when first used, so that a lean module of this package
(``store``, ``records``, ``procinfo``) is imported without the models and the core behind
the rest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubemill.substrates.lazy_names import names_loaded_on_use

if TYPE_CHECKING:
    from kubemill.core import INTERRUPTED
    from kubemill.substrates.local.backend import LocalBackend
    from kubemill.substrates.local.images import CONFIG_ENV, Environment, ImageConfig
    from kubemill.substrates.local.launch import NotRunnableLocally
    from kubemill.substrates.local.network import LocalNetwork
    from kubemill.substrates.local.store import STATE_DIR_ENV, Store, default_state_dir
    from kubemill.substrates.local.supervisor import SupervisorOptions

_WHERE = {
    "CONFIG_ENV": "kubemill.substrates.local.images",
    "INTERRUPTED": "kubemill.core",
    "STATE_DIR_ENV": "kubemill.substrates.local.store",
    "Environment": "kubemill.substrates.local.images",
    "ImageConfig": "kubemill.substrates.local.images",
    "LocalBackend": "kubemill.substrates.local.backend",
    "LocalNetwork": "kubemill.substrates.local.network",
    "NotRunnableLocally": "kubemill.substrates.local.launch",
    "Store": "kubemill.substrates.local.store",
    "SupervisorOptions": "kubemill.substrates.local.supervisor",
    "default_state_dir": "kubemill.substrates.local.store",
}


__getattr__ = names_loaded_on_use(__name__, _WHERE)

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
