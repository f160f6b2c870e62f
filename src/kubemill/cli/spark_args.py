"""spark-submit's arguments as the CLI reads them (:mod:`.spark_fast`, the console script's
way in, and the command in :mod:`.spark_submit` and :mod:`.spark_cluster`): kubemill's own
flags among Spark's, the confs the CLI acts on, and which namespace and mode they mean.

The standard library and :mod:`kubemill.engines.spark.api.argv` only: the way in imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from kubemill.engines.spark.api.argv import SparkSubmitError, SubmitArguments, parse_spark_master

DRY_RUN = "--dry-run"
OPERATOR = "--operator"
HELP = ("-h", "--help")
OWN_FLAGS = (DRY_RUN, OPERATOR, *HELP)
"""kubemill's own flags among spark-submit's options."""
NAMESPACE_CONF = "spark.kubernetes.namespace"
WAIT_CONF = "spark.kubernetes.submission.waitAppCompletion"
GRACE_CONF = "spark.kubernetes.appKillPodDeletionGracePeriod"


def cluster_mode_wanted(args: SubmitArguments, properties: Mapping[str, str] | None) -> bool:
    """A ``k8s://`` master without ``--operator``: Spark's own cluster mode."""
    if OPERATOR in args.own_flags:
        return False
    master = args.master or args.conf.get("spark.master") or (properties or {}).get("spark.master")
    return master is not None and parse_spark_master(master).substrate == "kubernetes"


def in_namespace(
    args: SubmitArguments, properties: Mapping[str, str] | None, namespace: str | None
) -> SubmitArguments:
    """kubemill's ``--namespace`` when no ``spark.kubernetes.namespace`` says one (Spark's
    own default is ``default``, whatever the kubeconfig's context says)."""
    if namespace is None or NAMESPACE_CONF in args.conf or NAMESPACE_CONF in (properties or {}):
        return args
    return replace(args, conf={**args.conf, NAMESPACE_CONF: namespace})


def read_properties_file(path: str) -> str:
    """``--properties-file``'s text; :class:`SparkSubmitError` if it cannot be read."""
    try:
        return properties_text(path)
    except OSError as exc:
        raise SparkSubmitError(
            "--properties-file", f"cannot read {path}: {exc.strerror}", "check the path"
        ) from None


def properties_text(path: str) -> str:
    """``--properties-file``'s text as it is (``OSError`` if it cannot be read)."""
    return Path(path).expanduser().read_text(encoding="utf-8")
