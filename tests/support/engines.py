"""Whether a real engine can run on this machine: the gates of the tests that run one.

A test that runs a real engine (OpenMPI, Spark's JVM, Mars) is marked ``engine`` (the fast
lane, ``scripts/test.sh --fast``, leaves it out) and skipped, saying what to install, where
the engine is missing. The marks are computed once, at import; a test module lists the ones
it needs::

    pytestmark = [pytest.mark.engine, needs_mpirun]
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

SPARK_SUBMIT = Path(sys.executable).with_name("spark-submit")
"""pyspark's ``spark-submit``, next to this interpreter (kubemill[spark])."""

needs_mpirun = pytest.mark.skipif(
    shutil.which("mpirun") is None,
    reason="mpirun is not installed (apt: openmpi-bin libopenmpi-dev)",
)
needs_mpi4py = pytest.mark.skipif(
    importlib.util.find_spec("mpi4py") is None, reason="mpi4py is not installed (kubemill[mpi])"
)
needs_java = pytest.mark.skipif(
    shutil.which("java") is None, reason="no Java runtime: scripts/setup.sh --extras spark"
)
needs_spark_submit = pytest.mark.skipif(
    not SPARK_SUBMIT.exists(), reason=f"no pyspark spark-submit at {SPARK_SUBMIT} (kubemill[spark])"
)


def skip_without(module: str, extra: str) -> None:
    """Skip the test, saying which extra to install, where ``module`` is not installed.

    Found without importing it: an engine's native libraries loaded into the test process
    can clash with another engine's (importing paddle segfaulted a test run once torch's
    and scikit-learn's were in), and the test runs the engine in its own processes anyway.
    """
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{module} is not installed (pip install 'kubemill[{extra}]')")


def needs_mars_environment() -> list[pytest.MarkDecorator]:
    """The marks of a test module that runs real Mars in the environment kubemill builds
    for it: skipped, saying how to build it, where that environment is not ready."""
    from kubemill.substrates.local import environments

    mars = environments.status("mars")
    return [
        pytest.mark.engine,
        pytest.mark.skipif(
            not mars.ready,
            reason=f"the Mars environment is {mars.state} ({mars.prefix}): create it with"
            " `kubemill env create mars` (scripts/setup.sh with the `mars` extra does)",
        ),
    ]
