"""Turn the errors a user can cause into one red line that says what to do.

Known errors (a missing job, a bad manifest, a substrate that cannot act) never show a
traceback: the message is the product. Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from kubemill.api import ManifestError

EXIT_FAILURE = 1

EXTRA_OF_MODULE: dict[str, str] = {
    "kubernetes": "kubernetes",
    "kopf": "kubernetes",
    "prometheus_client": "kubernetes",
    "websocket": "kubernetes",
    "torch": "torch",
    "sklearn": "torch",
    "tensorflow": "tensorflow",
    "mpi4py": "mpi",
    "pyspark": "spark",
}
"""The extra (``pip install 'kubemill[EXTRA]'``) that brings each optional module kubemill
imports; ``tests/test_extras.py`` checks it against every import in ``src/`` and the
extras ``pyproject.toml`` declares."""


def missing_extra(exc: BaseException) -> str | None:
    """What to install when ``exc`` (or what caused it) is a module of an extra missing."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ModuleNotFoundError) and seen.name:
            module = seen.name.split(".", 1)[0]
            extra = EXTRA_OF_MODULE.get(module)
            if extra is not None:
                return (
                    f"this needs the `{module}` module, which kubemill's `{extra}` extra "
                    f"brings: pip install 'kubemill[{extra}]'"
                )
        seen = seen.__cause__ or seen.__context__
    return None


def plain_console(*, stderr: bool = False) -> Console:
    """A console of kubemill's, which prints a string as it is: styles come only from rich's
    ``Text`` and tables, since a string holds names, paths, messages and log lines that are
    the user's, where ``[red]`` or ``:smile:`` is text, never markup or an emoji (reading it
    as either also cost a job's final table ~5 ms: rich's 3,600 emoji codes loaded). Lines
    are never wrapped, so log lines and tables stay greppable."""
    # rich is imported when something is to be said: every command imports this module.
    from rich.console import Console

    return Console(stderr=stderr, soft_wrap=True, highlight=False, markup=False, emoji=False)


def stderr_console() -> Console:
    """The console for errors and hints (stderr, so stdout stays parseable)."""
    return plain_console(stderr=True)


def explain(exc: BaseException) -> str | None:
    """The one-line message for an error the user can act on, or ``None`` for a bug."""
    from kubemill.api import ManifestError
    from kubemill.substrates.base import JobExists, JobNotFound, SubstrateError

    if (install := missing_extra(exc)) is not None:
        return install
    if isinstance(exc, JobNotFound):
        return f"{_text(exc)} (list jobs with `kubemill get`)"
    if isinstance(exc, JobExists):
        return f"{_text(exc)} (delete it first with `kubemill delete NAME`, or rename the job)"
    if isinstance(exc, ManifestError) and isinstance(exc, SubstrateError):
        # A valid manifest that this substrate cannot run (e.g. locally, no command).
        problems = "; ".join(str(e) for e in exc.errors)
        return f"cannot run this job here: {problems}"
    if isinstance(exc, ManifestError):
        return _manifest_problem(exc)
    if isinstance(exc, SubstrateError):
        return _text(exc)
    return None


def report(exc: BaseException) -> int | None:
    """Print the message for ``exc`` and return the exit code, or ``None`` if it is a bug."""
    message = explain(exc)
    if message is None:
        return None
    _print_error(message)
    return EXIT_FAILURE


def fail(message: str, *, code: int = EXIT_FAILURE) -> None:
    """Print ``message`` as an error and leave with ``code``."""
    _print_error(message)
    sys.exit(code)


def _manifest_problem(exc: ManifestError) -> str:
    """The first problem of a manifest, and how to see every other one."""
    if not exc.errors:
        return f"invalid manifest: {exc}"
    first = exc.errors[0]
    file = first.source.split("#", 1)[0]
    if not first.path and first.message.startswith("cannot read"):
        return first.message.replace("cannot read", f"cannot read {file}", 1)
    text = f"invalid manifest: {first}"
    more = len(exc.errors) - 1
    if more:
        text += f" (and {more} more problem{'s' if more > 1 else ''})"
    return f"{text}; see every problem with `kubemill validate {file or 'FILE'}`"


def _text(exc: BaseException) -> str:
    # A LookupError's str() is the repr of its argument; show the words themselves.
    if exc.args and isinstance(exc.args[0], str):
        return exc.args[0]
    return str(exc) or type(exc).__name__


def _print_error(message: str) -> None:
    from rich.text import Text

    stderr_console().print(Text(f"error: {message}", style="bold red"))


def exit_on_plugin_error() -> None:
    """Register the engines ``KUBEMILL_ENGINES`` names; a bad entry is one red line.

    The registry is only imported when the variable is set: ``kubemill --help`` stays fast.
    """
    import os

    if not os.environ.get("KUBEMILL_ENGINES"):
        return
    from kubemill.substrates.plugins import PluginError, load_plugins

    try:
        load_plugins()
    except PluginError as exc:
        fail(str(exc))
