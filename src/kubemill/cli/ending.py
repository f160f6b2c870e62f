"""How the ``kubemill`` console script ends once a command has said everything.

Only the standard library is imported (through :mod:`kubemill.process_exit`): the plain
``kubemill get`` ends here too, without typer.
"""

from __future__ import annotations

from kubemill.process_exit import exit_at_once


def end_at_once(done: SystemExit) -> None:
    """End the process now that the command has said everything, skipping the teardown
    (:func:`kubemill.process_exit.exit_at_once`: 30-70 ms after `kubemill run` had printed
    its verdict, which a script waiting for the job's end pays each time), unless there is a
    message to print or something left to do."""
    code = done.code
    if code is not None and not isinstance(code, int):
        return  # a message to print: the usual exit does that
    exit_at_once(code or 0)


__all__ = ["end_at_once"]
