#!/usr/bin/env bash
# Set up kubemill with every extra the tests need, then run the checks and the tests:
# ruff (lint and format), mypy --strict, import-linter (the layering of DESIGN.md), pytest
# (tests/cluster against a real kube-apiserver, etcd, controller manager and scheduler).
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "torch,tensorflow,kubernetes,mpi,spark,dev,image,mars"

# The real Kubernetes control plane tests/cluster runs against: built once per machine from Go
# modules (several minutes the first time), then taken from its cache.
echo "== kube control plane"; scripts/kube-control-plane.sh build >/dev/null

export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff"; ruff check src tests bench examples && ruff format --check src tests bench examples
echo "== mypy --strict"; mypy
echo "== import-linter"; lint-imports
echo "== pytest"; exec pytest "$@"
