"""``kubemill [-n NS] spark-submit`` in Spark's own cluster mode, reached by the console
script before typer loads.

A submission's work -- read the arguments, build four objects, send four requests --
takes milliseconds; typer, rich and the job models take a third of a second to import.
So the console script reads ``kubemill [-n NS] spark-submit ARGS...`` itself and, for a
``k8s://`` master (without ``--operator``, ``--dry-run`` or ``--help``) or ``--kill`` /
``--status``, runs the very code the typer command runs
(:mod:`kubemill.cli.spark_cluster`), which imports none of them before the driver pod
exists. This module only chooses: it parses the arguments and calls that code, nothing else.

Anything else returns ``None`` with nothing done, and the typer command answers: other
global options than ``-n``/``--namespace``, an engine plugin to load (``KUBEMILL_ENGINES``),
a ``KUBEMILL_SUBSTRATE`` typer refuses, ``--help``, ``--dry-run``, ``--operator``, a local
master, arguments that do not parse (the command says what is wrong).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

from kubemill.cli.spark_args import OWN_FLAGS, cluster_mode_wanted, properties_text
from kubemill.engines.spark.api.argv import (
    SparkSubmitError,
    parse_spark_properties,
    parse_submit_arguments,
)

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_SUBSTRATES = ("local", "kubernetes")


def quick_spark_submit(argv: Sequence[str]) -> int | None:
    """Run a cluster-mode ``spark-submit`` (or its ``--kill``/``--status``) and return the
    exit code, or ``None`` if the typer command must answer (nothing has been done then)."""
    found = _split(argv)
    if found is None or os.environ.get("KUBEMILL_ENGINES"):
        return None
    substrate = os.environ.get("KUBEMILL_SUBSTRATE")
    if substrate is not None and substrate.lower() not in _SUBSTRATES:
        return None  # typer refuses it, with its own words
    namespace, rest = found
    try:
        args = parse_submit_arguments(rest, own_flags=OWN_FLAGS)
        if not rest or args.own_flags:
            return None
        properties = None
        if args.properties_file is not None:
            properties = parse_spark_properties(properties_text(args.properties_file))
    except (SparkSubmitError, OSError):
        return None
    kill_or_status = args.kill is not None or args.status is not None
    if not kill_or_status and not cluster_mode_wanted(args, properties):
        return None
    from kubemill.cli import spark_cluster

    settings = spark_cluster.Where(namespace=namespace)
    if kill_or_status:
        return spark_cluster.kill_or_status(settings, args, properties)
    return spark_cluster.submit_cluster(settings, args, properties, dry_run=False)


def _split(argv: Sequence[str]) -> tuple[str | None, list[str]] | None:
    """``[-n NS | --namespace NS | --namespace=NS] spark-submit ARGS...`` -> (NS, ARGS)."""
    words = list(argv)
    namespace = None
    while words and words[0] != "spark-submit":
        option, eq, value = words.pop(0).partition("=")
        if option not in ("-n", "--namespace") or (eq and option == "-n"):
            return None  # (click reads "-n=NS" as the namespace "=NS")
        if not eq:
            if not words:
                return None
            value = words.pop(0)
        if not _DNS_LABEL.match(value):
            return None  # the full command takes it as it is; say nothing new here
        namespace = value
    if not words:
        return None
    return namespace, words[1:]


__all__ = ["quick_spark_submit"]
