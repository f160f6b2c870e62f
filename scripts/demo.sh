#!/usr/bin/env bash
# Set up kubemill and run the main example on the local substrate: a PyTorchJob with a
# Master and one Worker training with DistributedDataParallel (gloo) on scikit-learn's
# digits. Exits with kubemill's exit code (0 only if the job Succeeded).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh torch
exec .venv/bin/kubemill run examples/pytorch-ddp.yaml
