"""The global options of every ``kubemill`` command, and the SDK client they select.

Kept free of heavy imports: the SDK (and through it pydantic, sqlite, the kubernetes
client) is imported only when a command actually needs a client.
"""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubemill.sdk import JobClient


class Substrate(StrEnum):
    """Where jobs run (``--substrate``)."""

    LOCAL = "local"
    KUBERNETES = "kubernetes"


@dataclass
class Settings:
    """What the global options said, as one object every command receives."""

    substrate: Substrate = Substrate.LOCAL
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str | None = None
    state_dir: str | None = None
    replay_flags: list[str] = field(default_factory=list)
    """Global flags the user typed, repeated in the "next commands" we print so they
    address the same substrate and state directory (environment variables carry over
    by themselves and are not repeated)."""

    def client(self, **local: Any) -> JobClient:
        """The SDK client for the chosen substrate; ``local``: options for the local one."""
        from kubemill.sdk import JobClient

        options: dict[str, Any] = {}
        if self.substrate is Substrate.LOCAL:
            options.update(local)
            if self.state_dir is not None:
                options["state_dir"] = self.state_dir
        else:
            if self.kubeconfig is not None:
                options["kubeconfig"] = self.kubeconfig
            if self.context is not None:
                options["context"] = self.context
            if self.namespace is not None:
                options["namespace"] = self.namespace
        return JobClient(self.substrate.value, **options)

    def next_command(self, verb: str, name: str, *options: str) -> str:
        """A ``kubemill`` command line the user can paste to act on the same job."""
        return " ".join(["kubemill", *self.replay_flags, verb, name, *options])

    def in_namespace(self, namespace: str | None) -> Settings:
        """These settings with a command's own ``--namespace`` (when it was given), which
        the commands kubemill prints repeat unless a global one already does."""
        if namespace is not None:
            self.namespace = namespace
            if "--namespace" not in self.replay_flags:
                self.replay_flags += ["--namespace", quote(namespace)]
        return self


def global_settings(
    *,
    substrate: Substrate,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    state_dir: str | None,
    typed: Container[str],
) -> Settings:
    """The settings of the global options; ``typed``: the names of those the user typed on
    the command line (not read from their environment variables), which the commands
    kubemill prints repeat so that they address the same substrate and state directory."""
    replay: list[str] = []
    given = {
        "substrate": ("--substrate", substrate.value),
        "kubeconfig": ("--kubeconfig", kubeconfig),
        "context": ("--context", context),
        "state_dir": ("--state-dir", state_dir),
    }
    for name, (flag, value) in given.items():
        if value is not None and name in typed:
            replay += [flag, quote(value)]
    if namespace is not None:
        replay += ["--namespace", quote(namespace)]
    return Settings(
        substrate=substrate,
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        state_dir=state_dir,
        replay_flags=replay,
    )


def quote(value: str) -> str:
    """``value`` as a shell word, for the global flags replayed in the commands printed."""
    import shlex

    return shlex.quote(value)
