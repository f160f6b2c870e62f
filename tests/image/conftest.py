"""Fixtures for the tests of the shipped images (the operator's and Mars's): each image
itself, built once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kubemill import __version__

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "scripts" / "build-image.sh"
IMAGE_ENV = "KUBEMILL_OPERATOR_IMAGE"
"""An image already built by this CI run (``localhost/kubemill-operator:<version>``): used
as is instead of building one."""
MARS_IMAGE_ENV = "KUBEMILL_MARS_IMAGE"
"""The same for the Mars image (``localhost/kubemill-mars:<version>``)."""


def _build(target: str, given_env: str) -> str:
    """``localhost/kubemill-<target>:<version>``, built from this tree by
    ``scripts/build-image.sh <target>`` unless ``given_env`` names one already built.

    Fails -- never skips -- when it cannot be built: the image is what users get.
    """
    missing = [tool for tool in ("buildah", "podman") if shutil.which(tool) is None]
    if missing:
        pytest.fail(
            f"cannot build or run the {target} image: {' and '.join(missing)} not installed "
            "(apt-get install buildah podman mmdebstrap)"
        )
    given = os.environ.get(given_env)
    if given:
        return given
    built = subprocess.run(
        [str(BUILD_SCRIPT), target],
        cwd=ROOT,
        env=dict(os.environ, PYTHON=sys.executable),
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    if built.returncode != 0:
        pytest.fail(
            f"scripts/build-image.sh {target} failed with exit code {built.returncode}:\n"
            f"{built.stderr[-4000:]}{built.stdout[-2000:]}"
        )
    # The script's last line: size, goal and build time (shown with -s, and in CI logs).
    print(built.stdout.strip().splitlines()[-1])
    return f"localhost/kubemill-{target}:{__version__}"


@pytest.fixture(scope="session")
def operator_image() -> str:
    """The operator image (see :func:`_build`)."""
    return _build("operator", IMAGE_ENV)


@pytest.fixture(scope="session")
def mars_image() -> str:
    """The Mars image (see :func:`_build`)."""
    return _build("mars", MARS_IMAGE_ENV)
