#!/usr/bin/env bash
# Set up kubemill and run the main example on the local substrate: a PyTorchJob with a
# Master and one Worker training with DistributedDataParallel (gloo) on scikit-learn's
# digits. Exits with kubemill's exit code (0 only if the job Succeeded).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh torch
# The demo can be run again: its own earlier run (if any) is deleted first (the history of
# other jobs is left alone).
.venv/bin/kubemill delete pytorch-ddp >/dev/null 2>&1 || true
exec .venv/bin/kubemill run examples/pytorch-ddp.yaml
