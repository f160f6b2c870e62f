"""``python -m kubemill.substrates.kubernetes.install``: print the manifests, or write deploy/."""

import sys

from kubemill.substrates.kubernetes.install.command import main

sys.exit(main())
