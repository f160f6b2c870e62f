"""The ``kubemill`` command line: a thin typer/rich layer over the SDK."""

from __future__ import annotations


def main() -> None:
    """Console-script entry point."""
    import sys

    argv = sys.argv[1:]
    # `kubemill spark-submit --master k8s://...` (Spark's cluster mode) runs the command's own
    # code before typer, rich and the job models load (only then are its modules imported).
    if "spark-submit" in argv[:3]:
        from kubemill.cli.spark_fast import quick_spark_submit

        code = quick_spark_submit(argv)
        if code is not None:
            sys.exit(code)
    from kubemill.cli.quick import quick_get

    # `kubemill get` (the list) answers without typer, rich or the job models when it can.
    if quick_get(argv) is not None:
        return
    from kubemill.cli.app import run_app
    from kubemill.cli.errors import exit_on_plugin_error

    exit_on_plugin_error()
    run_app(exit_at_once=True)
