"""The ``kubemill`` command line: a thin typer/rich layer over the SDK."""

from __future__ import annotations


def main() -> None:
    """Console-script entry point."""
    from kubemill.cli.app import run_app

    run_app()
