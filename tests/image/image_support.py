"""Helpers of the image tests: buildah working containers of a built image, run as a pod."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator

from kubemill.substrates.kubernetes.install.names import NON_ROOT_UID

USER = f"{NON_ROOT_UID}:{NON_ROOT_UID}"


def buildah(*args: str) -> str:
    done = subprocess.run(["buildah", *args], capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"buildah {' '.join(args)}: {done.stderr}"
    return done.stdout


@contextlib.contextmanager
def container(image: str) -> Iterator[str]:
    """A working container of ``image`` (removed afterwards)."""
    name = buildah("from", "--pull-never", "--quiet", image).strip()
    try:
        yield name
    finally:
        subprocess.run(["buildah", "rm", name], capture_output=True, check=False)


def run_in(name: str, *argv: str, volumes: tuple[str, ...] = ()) -> list[str]:
    """``buildah run`` argv: chroot isolation, the host's network, the image's user."""
    mounts = [arg for volume in volumes for arg in ("--volume", volume)]
    return [
        "buildah", "run", "--isolation", "chroot", "--network", "host", "--user", USER,
        *mounts, name, "--", *argv,
    ]  # fmt: skip
