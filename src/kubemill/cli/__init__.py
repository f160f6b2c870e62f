"""The ``kubemill`` command line: a thin typer/rich layer over the SDK."""

from __future__ import annotations


def main() -> None:
    """Console-script entry point."""
    import sys

    from kubemill.cli.quick import quick_get

    # `kubemill get` (the list) answers without typer, rich or the job models when it can.
    if quick_get(sys.argv[1:]) is not None:
        return
    from kubemill.cli.app import run_app
    from kubemill.cli.errors import exit_on_plugin_error

    exit_on_plugin_error()
    run_app(exit_at_once=True)
