"""Tests against a real Kubernetes control plane (see conftest.py)."""
