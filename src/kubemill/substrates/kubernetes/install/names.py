"""What the installed operator is called and how it runs: the name of its objects, its
namespace, image and replicas by default, its ports and its user.

Shared by the RBAC, the manifests, the chart and the apply code, and by the client (the
operator's namespace), so it imports nothing of kubemill but the version.
"""

from __future__ import annotations

from kubemill.version import __version__

NAME = "kubemill-operator"
"""Name of the ServiceAccount, roles, bindings and Deployment."""
LEADER_ELECTION_ROLE = f"{NAME}-leader-election"
PROGRESS_ROLE = f"{NAME}-progress"
"""The ClusterRole of a namespaced install's one cluster-wide grant: TokenReviews of job pods'
progress reports."""
LEASE_NAME = NAME
DEFAULT_NAMESPACE = "kubemill-system"
DEFAULT_IMAGE = f"kubemill-operator:{__version__}"
"""The operator image ``scripts/build-image.sh`` builds (``Containerfile``): kubemill with its
``[kubernetes]`` extra on a slim Python 3.11 base, running as uid 65532."""
DEFAULT_REPLICAS = 2
METRICS_PORT = 8080
HEALTH_PORT = 8081
HEALTH_PATH = "/healthz"
NON_ROOT_UID = 65532
DEFAULT_HISTORY = 1000
"""Records of deleted jobs the operator keeps (``kubemill install --history N``)."""
