#!/usr/bin/env bash
# Set up kubemill with every extra the tests need, then run the checks and the tests:
# ruff (lint and format), mypy --strict, import-linter (the layering of docs/architecture.md), pytest
# (tests/cluster against a real kube-apiserver, etcd, controller manager and scheduler).
#
#   scripts/test.sh [--fast] [PYTEST ARGS...]
#
# --fast: the development lane. The same checks, and every test but those that run a real
# engine, build or run a container image, run the chaos test or start the real control plane
# (the markers engine, image, chaos and control_plane of pyproject.toml). With -m EXPR as
# well, a test runs if it matches both.
# CI (.ci/run) runs everything. Every other argument goes to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."

FAST_LANE="not engine and not image and not chaos and not control_plane"
fast=false
args=()
while (($#)); do
    case "$1" in
        --fast) fast=true ;;
        -m) args+=("-m" "${2:?-m needs a marker expression}"); shift ;;
        *) args+=("$1") ;;
    esac
    shift
done
if $fast; then
    markers="$FAST_LANE"
    rest=()
    # A marker expression of the caller's narrows the lane rather than replacing it.
    for ((i = 0; i < ${#args[@]}; i++)); do
        if [[ ${args[i]} == -m ]]; then
            markers="($markers) and (${args[i + 1]})"
            i=$((i + 1))
        else
            rest+=("${args[i]}")
        fi
    done
    args=(-m "$markers" ${rest[@]+"${rest[@]}"})
fi

# The real Kubernetes control plane tests/cluster runs against: built once per machine from Go
# modules (about 10 minutes of CPU the first time), then taken from its cache. It builds
# beside the setup, which mostly waits on downloads.
#
# finish PID LOG WHAT SHOWN: wait for a step run in the background with its output in LOG; if it
# failed, print LOG and say WHAT failed, and stop; else print LOG's lines that match the grep
# pattern SHOWN (its summary).
finish() {
    if ! wait "$1"; then
        cat "$2" >&2
        echo "test: $3 failed" >&2
        exit 1
    fi
    grep -e "$4" "$2" || true
    rm -f "$2"
}
kube_log=$(mktemp)
scripts/kube-control-plane.sh build >"$kube_log" 2>&1 &
kube_build=$!
scripts/setup.sh "torch,tensorflow,kubernetes,mpi,spark,jax,xgboost,paddle,ray,dev,image,mars"
echo "== kube control plane"
finish "$kube_build" "$kube_log" "building the Kubernetes control plane (scripts/kube-control-plane.sh build)" '^[^/]'

export PATH="$PWD/.venv/bin:$PATH"

# The tests run without a network (the environments of tests/support/venvs.py are linked from
# this one; a job's replicas talk over loopback): in a network namespace of their own, whose
# only interface is loopback, so that nothing they start can send a packet off this machine
# (PyTorch's TCPStore, for one, asks the resolver for the name of 127.0.0.1). That takes root
# (unshare); without it the tests run in the machine's namespace, and this says so.
isolated=()
if [[ $(id -u) == 0 ]] && unshare --net true 2>/dev/null; then
    isolated=(unshare --net sh -c 'ip link set lo up && exec "$@"' sh)
else
    echo "test: not root, or unshare --net refused: the tests run with this machine's network" >&2
fi
# So the image tests' images are built before, outside the namespace (their build takes
# Debian's and PyPI's packages), while the checks run, and handed to the tests
# (tests/image/conftest.py). The fast lane has no image test.
images=false
if ! $fast && ((${#isolated[@]})); then
    images=true
    image_log=$(mktemp)
    (for target in operator mars; do
        echo "== image $target"
        scripts/build-image.sh "$target" || { echo "scripts/build-image.sh $target failed"; exit 1; }
    done) >"$image_log" 2>&1 &
    image_build=$!
fi

echo "== ruff"; ruff check src tests bench examples && ruff format --check src tests bench examples
echo "== mypy --strict"; mypy
echo "== import-linter"; lint-imports

if $images; then
    finish "$image_build" "$image_log" "building the images (the image tests run them)" '^image '
    version=$(python -c 'import kubemill; print(kubemill.__version__)')
    export KUBEMILL_OPERATOR_IMAGE="localhost/kubemill-operator:$version"
    export KUBEMILL_MARS_IMAGE="localhost/kubemill-mars:$version"
fi
# Two workers (pytest-xdist), as many as this machine's cores: most tests wait on the
# processes they start. The tests of the real control plane share one worker, and so one
# control plane (tests/cluster/conftest.py); an -n of the caller's comes later and wins. The
# 25 slowest tests are listed at the end: where the lane's time goes, run after run.
echo "== pytest"
exec ${isolated[@]+"${isolated[@]}"} pytest -n 2 --dist loadgroup --durations=25 ${args[@]+"${args[@]}"}
