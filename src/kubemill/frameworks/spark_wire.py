"""What Spark's driver pods are made of, as plain values: labels, ports, paths, and the
``spark.properties`` format.

:mod:`kubemill.frameworks.spark` (the SparkApplication planner) and
:mod:`kubemill.frameworks.spark_cluster_mode` (Spark's own cluster-mode objects) both use
them. They live apart from the planner, which imports the job models, so that
``kubemill spark-submit``'s fast path (:mod:`kubemill.cli.spark_fast`) builds the driver's
objects without pydantic.
"""

from __future__ import annotations

from collections.abc import Mapping

CONF_MOUNT_PATH = "/opt/spark/conf"
PROPERTIES = "spark.properties"
LOCAL_DIR_VOLUME = "spark-local-dir-1"
PYTHON_RUNNER = "org.apache.spark.deploy.PythonRunner"
R_RUNNER = "org.apache.spark.deploy.RRunner"

DRIVER_PORT = 7078
BLOCK_MANAGER_PORT = 7079
UI_PORT = 4040
UI_PORT_NAME = "spark-ui"

LABEL_APP_SELECTOR = "spark-app-selector"
LABEL_ROLE = "spark-role"
LABEL_APP_NAME = "spark-app-name"
LABEL_VERSION = "spark-version"


def _escape(text: str, *, key: bool) -> str:
    """Java properties escaping: backslash, line breaks, and in keys the separators."""
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    out = out.replace("\t", "\\t").replace("\f", "\\f")
    if key:
        for char in (" ", "=", ":", "#", "!"):
            out = out.replace(char, "\\" + char)
    elif out.startswith(" "):
        out = "\\" + out
    return out


def properties_text(props: Mapping[str, str]) -> str:
    """``spark.properties``: one ``key=value`` line per conf, sorted, Java-escaped."""
    return "".join(
        f"{_escape(k, key=True)}={_escape(v, key=False)}\n" for k, v in sorted(props.items())
    )


__all__ = [
    "BLOCK_MANAGER_PORT",
    "CONF_MOUNT_PATH",
    "DRIVER_PORT",
    "LABEL_APP_NAME",
    "LABEL_APP_SELECTOR",
    "LABEL_ROLE",
    "LABEL_VERSION",
    "LOCAL_DIR_VOLUME",
    "PROPERTIES",
    "PYTHON_RUNNER",
    "R_RUNNER",
    "UI_PORT",
    "UI_PORT_NAME",
    "properties_text",
]
