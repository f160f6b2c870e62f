"""The generator's command line (``python -m kubemill.substrates.kubernetes.install``):
print the manifests or write ``deploy/``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from kubemill.substrates.kubernetes.install.chart import write_deploy
from kubemill.substrates.kubernetes.install.manifests import install_manifests
from kubemill.substrates.kubernetes.install.names import (
    DEFAULT_HISTORY,
    DEFAULT_IMAGE,
    DEFAULT_NAMESPACE,
)
from kubemill.substrates.kubernetes.render import dump_yaml

DESCRIPTION = "Install manifests for the operator: CRDs, least-privilege RBAC and the Deployment."


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m kubemill.substrates.kubernetes.install``: print or write the manifests."""
    parser = argparse.ArgumentParser(
        prog="python -m kubemill.substrates.kubernetes.install", description=DESCRIPTION
    )
    parser.add_argument("--write", metavar="DIR", type=Path, help="write deploy/ files into DIR")
    parser.add_argument("--namespace", default=DEFAULT_NAMESPACE)
    parser.add_argument("--image", default=DEFAULT_IMAGE)
    parser.add_argument("--watch-namespace", action="append", dest="watch_namespaces")
    parser.add_argument("--gang-scheduler-name", dest="gang_scheduler")
    parser.add_argument("--serve-upstream-groups", action="store_true")
    parser.add_argument(
        "--extra", action="append", dest="extras", default=[], help="e.g. runtimes (repeatable)"
    )
    parser.add_argument(
        "--history", type=int, default=DEFAULT_HISTORY, help="records of deleted jobs to keep"
    )
    parser.add_argument(
        "--no-progress",
        dest="progress",
        action="store_false",
        help="no progress sidecar in job pods (no endpoint, Service or TokenReview grant)",
    )
    options = parser.parse_args(argv)
    if options.write is not None:
        write_deploy(options.write)
        return 0
    dump_yaml(
        install_manifests(
            namespace=options.namespace,
            image=options.image,
            watch_namespaces=options.watch_namespaces,
            gang_scheduler=options.gang_scheduler,
            serve_upstream_groups=options.serve_upstream_groups,
            extras=options.extras,
            history=options.history,
            progress=options.progress,
        ),
        sys.stdout,
    )
    return 0
