"""The real thing: OpenMPI's ``mpirun`` reaches two host replicas through the exec service.

A ``ToyHosts`` job (``tests/kinds/toy_host_engine.py``): two Hosts with no command, each
two slots, and a Client that runs ``mpirun -np 4`` with a hostfile naming the hosts and a
remote-shell agent (``plm_rsh_agent``) of a few lines that asks the supervisor to run
``orted`` in the named host, as the MPI framework's agent does. An mpi4py allreduce
prints each rank's host token (a variable only that host has), its TMPDIR and the sum.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from exec_support import CLIENT_FUNCTION, register_toy_hosts, submit
from local_support import log_text
from toy_host_engine import host_token, manifest

from kubemill.substrates.local import LocalBackend
from support.engines import needs_mpi4py, needs_mpirun

pytestmark = [pytest.mark.engine, needs_mpirun, needs_mpi4py]

AGENT = (
    CLIENT_FUNCTION
    + """
import sys
# mpirun runs: AGENT <host> <words of a shell command>, as it would run ssh.
host, words = sys.argv[1], sys.argv[2:]
answer = exec_in(host, ["/bin/sh", "-c", " ".join(words)])
if "error" in answer:
    print(f"agent: {host}: {answer['error']}", file=sys.stderr)
sys.exit(answer["exitCode"])
"""
)

ALLREDUCE = """
import os
from mpi4py import MPI
comm = MPI.COMM_WORLD
total = comm.allreduce(comm.rank + 1)
token, tmpdir = os.environ.get("TOY_HOST_TOKEN"), os.environ["TMPDIR"]
line = f"rank {comm.rank} {comm.size} {total} {token} {tmpdir}"
# Rank 0 prints every line: mpirun relays the ranks' output in chunks that may interleave.
lines = comm.gather(line)
if comm.rank == 0:
    print("\\n".join(lines), flush=True)
"""


@pytest.fixture
def toy_hosts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    yield from register_toy_hosts(monkeypatch)


def test_mpirun_runs_ranks_in_both_hosts_through_the_exec_service(
    toy_hosts: None, backend: LocalBackend, tmp_path: Path
) -> None:
    agent = tmp_path / "agent"
    agent.write_text(f"#!{sys.executable}\n{AGENT}")
    agent.chmod(0o755)
    (tmp_path / "allreduce.py").write_text(ALLREDUCE)
    (tmp_path / "hostfile").write_text("mpi-host-0 slots=2\nmpi-host-1 slots=2\n")
    mpirun = [
        "mpirun",
        "-np",
        "4",
        "--hostfile",
        "hostfile",
        "--bind-to",
        "none",
        "--mca",
        "plm_rsh_agent",
        str(agent),
        # Loopback only on this machine.
        "--mca",
        "btl_tcp_if_include",
        "lo",
        "--mca",
        "oob_tcp_if_include",
        "lo",
        "python",
        "allreduce.py",
    ]
    doc = manifest("mpi", client=mpirun)
    client = doc["spec"]["toyHostReplicaSpecs"]["Client"]["template"]["spec"]["containers"][0]
    client["env"] = [
        {"name": "OMPI_ALLOW_RUN_AS_ROOT", "value": "1"},
        {"name": "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "value": "1"},
    ]
    submit(backend, doc, tmp_path, detach=False)
    done = backend.wait("mpi", timeout=180)
    text = log_text(backend, "mpi", "mpi-client-0")
    assert done.phase == "Succeeded", f"{done.status}\n{text}"
    ranks = [line.split() for line in text.splitlines() if line.startswith("rank ")]
    assert sorted(int(r[1]) for r in ranks) == [0, 1, 2, 3], text
    assert {(r[2], r[3]) for r in ranks} == {("4", "10")}
    tmp_root = Path(backend.store.job("default", "mpi").job_dir) / "tmp"
    # Two ranks ran in each host's environment, with that host's TMPDIR.
    seen = sorted((r[4], r[5]) for r in ranks)
    expected = [(host_token("mpi", i), str(tmp_root / f"mpi-host-{i}")) for i in (0, 0, 1, 1)]
    assert seen == expected
    # orted was started through the exec service, once per host, not by mpirun itself.
    execs = [e.message for e in backend.events("mpi") if e.reason == "Exec"]
    assert sorted(m.split(":")[0] for m in execs) == ["mpi-host-0", "mpi-host-1"]
    assert all("orted" in m for m in execs)
    assert os.environ.get("TOY_HOST_TOKEN") is None
