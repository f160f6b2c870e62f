"""``kubemill doctor``: check the local state database, and start afresh if it is damaged.

A damaged ``kubemill.db`` makes every local command fail with one line that points here.
``--repair`` moves the database aside (kept for a later look) and creates an empty one;
job directories, with every replica's logs, stay where they are.
"""

from __future__ import annotations

from rich.text import Text

from kubemill.cli.console import stdout_console
from kubemill.cli.errors import EXIT_FAILURE, fail
from kubemill.cli.settings import Settings, Substrate

EXIT_HEALTHY = 0


def doctor(settings: Settings, *, repair: bool) -> int:
    """Check (and with ``repair``, replace) the state database. Returns the exit code."""
    from kubemill.substrates.local.state_check import check_state, repair_state
    from kubemill.substrates.local.store import default_state_dir

    if settings.substrate is not Substrate.LOCAL:
        fail("`kubemill doctor` checks the local substrate's state; drop --substrate kubernetes")
    console = stdout_console()
    found = check_state(settings.state_dir)
    if found.healthy:
        if found.exists:
            console.print(f"{found.path}: OK (integrity check passed)")
        else:
            console.print(f"{found.path}: no database yet (created by the first job)")
        return EXIT_HEALTHY
    for problem in found.problems[:10]:
        console.print(Text(f"{found.path}: {problem}", style="red"), soft_wrap=True)
    if len(found.problems) > 10:
        console.print(f"... and {len(found.problems) - 10} more problems")
    if not repair:
        console.print(
            "Run `kubemill doctor --repair` to move it aside and start a fresh database"
            " (the jobs it recorded are forgotten; their logs are kept under"
            f" {default_state_dir(settings.state_dir) / 'jobs'})."
        )
        return EXIT_FAILURE
    aside = repair_state(settings.state_dir)
    console.print(
        f"Moved the damaged database to {aside} and started a fresh one at {found.path}."
        f" Job logs are kept under {default_state_dir(settings.state_dir) / 'jobs'}."
    )
    return EXIT_HEALTHY
