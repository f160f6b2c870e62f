#!/usr/bin/env bash
# Set up kubemill with every extra the tests need, then run the checks and the tests:
# ruff (lint and format), mypy --strict, import-linter (the layering of DESIGN.md), pytest.
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh "torch,tensorflow,kubernetes,mpi,spark,dev,image,mars"

export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff"; ruff check src tests bench examples && ruff format --check src tests bench examples
echo "== mypy --strict"; mypy
echo "== import-linter"; lint-imports
echo "== pytest"; exec pytest "$@"
