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
    import gc

    # A plain `get` or `run --detach` makes ~37,000 objects that live until the process
    # ends (modules, classes, the job models' schemas), and ends as soon as it has printed:
    # the cyclic collector walked them some 90 times on the way (~15 ms of CPU, a tenth of
    # `run --detach`; 3 ms of `get`) to free some 700 objects the exit frees anyway. So it
    # does not run until a job is followed in the foreground (kubemill.cli.plain's
    # collect_from_now_on) or typer takes over, as any other command may run for long
    # (`logs -f`, the operator).
    gc.disable()
    from kubemill.cli.errors import exit_on_plugin_error

    exit_on_plugin_error()
    code = None
    # `kubemill get` (the list) and `kubemill run [--detach] FILE` skip typer (its import
    # and its option coercion) when their command line is plain, and run the very command
    # typer would (kubemill.cli.plain).
    if "get" in argv:
        from kubemill.cli.listing import plain_get

        code = plain_get(argv)
    if code is None and "run" in argv:
        from kubemill.cli.plain import plain_run

        code = plain_run(argv)
    if code is not None:
        from kubemill.cli.ending import end_at_once

        # Freeing a thousand rows on the way out costs more than printing them.
        end_at_once(SystemExit(code))
        sys.exit(code)
    gc.enable()
    from kubemill.cli.app import run_app

    run_app(exit_at_once=True)
