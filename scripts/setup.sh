#!/usr/bin/env bash
# Set up kubemill in ./.venv on a fresh Debian 12 machine (run as root), idempotently.
#
#   scripts/setup.sh [EXTRAS]     EXTRAS defaults to "torch" (enough for the main example);
#                                 scripts/test.sh asks for everything the tests need.
#
# Besides the pip extras of pyproject.toml, "image" installs what scripts/build-image.sh
# needs to build the operator image offline (buildah, podman, mmdebstrap); it is no pip extra.
# Nor is "mars": it builds Mars's own environment (`kubemill env create mars`, a venv of its
# own under $XDG_DATA_HOME/kubemill/envs: pymars 0.10.0's pins conflict with the other
# engines'), which kubemill.deploy.local.new_cluster and Mars's images run in.
#
# System packages come from apt, Python packages from PyPI. PyTorch is pinned to
# torch==2.13.0 (CPU build); where a local wheel directory exists (/opt/wheels on the
# project's machines) pip takes it from there instead of downloading a CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."

extras="${1:-torch}"

apt_packages=(python3 python3-venv python3-dev)
if [[ ",$extras," == *",mpi,"* ]]; then
    # MPIJob runs the real OpenMPI (mpirun, orted); mpi4py builds against its headers.
    apt_packages+=(openmpi-bin libopenmpi-dev)
fi
if [[ ",$extras," == *",dev,"* ]]; then
    # The dashboard's browser tests: Playwright (a dev extra) drives Debian's chromium, so
    # Playwright never downloads a browser of its own.
    apt_packages+=(chromium)
    # The tests that check a local job's processes connect to loopback only trace them.
    apt_packages+=(strace)
    # scripts/test.sh runs the tests in a network namespace of their own (unshare, of
    # util-linux, makes it; ip brings its loopback up).
    apt_packages+=(iproute2)
fi
if [[ ",$extras," == *",image,"* ]]; then
    apt_packages+=(buildah podman mmdebstrap)
fi
if [[ ",$extras," == *",spark,"* ]] && ! command -v java >/dev/null 2>&1; then
    # pyspark's spark-submit runs a JVM (Java 17 or later for Spark 4).
    apt_packages+=(default-jre-headless)
    # The JRE's postinst fails on slim images that lack the man page directory.
    mkdir -p /usr/share/man/man1 2>/dev/null || true
fi
if [[ ",$extras," == *",mars,"* ]]; then
    # pymars has no wheel for Python 3.11: its sdist is compiled (C and Cython).
    apt_packages+=(build-essential)
fi
pip_extras=$(tr ',' '\n' <<<"$extras" | grep -vx -e image -e mars | paste -sd, -)
missing=()
for pkg in "${apt_packages[@]}"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if ((${#missing[@]})); then
    if [[ $(id -u) -ne 0 ]]; then
        echo "setup: missing apt packages ${missing[*]}; run this script as root (or install them)" >&2
        exit 1
    fi
    echo "setup: apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python=${PYTHON:-python3}
"$python" - <<'PY' || { echo "setup: kubemill needs Python >= 3.11" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

if [[ ! -x .venv/bin/python ]]; then
    "$python" -m venv .venv
fi

pip_args=(--disable-pip-version-check --quiet)
if [[ -d /opt/wheels ]]; then
    pip_args+=(--find-links /opt/wheels)
fi
echo "setup: pip install -e .[$pip_extras]"
.venv/bin/python -m pip install "${pip_args[@]}" -e ".[$pip_extras]"
if [[ ",$extras," == *",mars,"* ]]; then
    echo "setup: kubemill env create mars (a no-op when it is ready)"
    .venv/bin/kubemill env create mars
fi
echo "setup: done; the CLI is .venv/bin/kubemill"
