"""A Python function as a TrainJob (``JobClient.train``), as the Kubeflow SDK's
``TrainerClient.train(trainer=CustomTrainer(func=...))`` runs one: locally two real torchrun
nodes run the function's gloo all-reduce, nothing is installed (a missing package is named,
and nothing is submitted); on Kubernetes the TrainJob carries the function's source in the
trainer's ``bash -c`` command, with the pip install first, as upstream's SDK sends it."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubemill.engines.trainer.api.function import function_script, function_trainjob
from kubemill.kinds import load_one
from kubemill.sdk import JobClient, MissingPackages
from kubemill.substrates.kubernetes.render import render_job
from support.engines import skip_without
from support.kube_client_support import ClientClusterThread, kmock_cluster
from support.manifest_checks import k8s_errors


def allreduce(base: int = 1) -> None:
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    total = torch.tensor([base + rank])
    dist.all_reduce(total)
    print(f"rank={rank} world={dist.get_world_size()} sum={int(total)}", flush=True)
    dist.destroy_process_group()


def greet(who: str = "nobody") -> None:
    # $HOME and `backticks` are the program's text, not the shell's.
    print(f"hello {who} $HOME `true`")


@pytest.fixture
def client(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[JobClient]:
    """A client on a private state dir; deletes (and so stops) every job at the end."""
    monkeypatch.setenv("KUBEMILL_CONFIG", str(tmp_path / "no-config.yaml"))
    monkeypatch.chdir(tmp_path)
    local = JobClient(state_dir=tmp_path / "state")
    yield local
    for view in local.list():
        local.delete(view.name, view.namespace)


@pytest.mark.engine
def test_a_function_all_reduces_on_two_local_nodes(client: JobClient) -> None:
    skip_without("torch", "torch")
    view = client.train(
        allreduce, num_nodes=2, num_proc_per_node=1, func_args={"base": 10}, packages=["torch"]
    )
    assert view.kind == "TrainJob" and not view.finished
    done = client.wait(view.name, timeout=300)
    lines = sorted(line.text for line in client.logs(view.name))
    assert done.phase == "Succeeded", lines
    # 10 + 11 on both nodes; one process per node, node i holding global rank i.
    assert [x for x in lines if x.startswith("rank=")] == [
        "rank=0 world=2 sum=21",
        "rank=1 world=2 sum=21",
    ], lines
    assert [c.type.value for c in done.status.conditions] == ["Succeeded"]
    assert done.job.to_wire()["status"]["conditions"][0]["type"] == "Complete"


def test_a_missing_package_is_named_and_nothing_is_submitted(client: JobClient) -> None:
    with pytest.raises(MissingPackages, match="no-such-package-kubemill, torch>=999"):
        client.train(greet, packages=["no-such-package-kubemill", "pyyaml", "torch>=999"])
    assert client.list() == []


def test_the_script_runs_the_function_with_its_arguments(tmp_path: Path) -> None:
    # The script itself under bash, with this python as the entry point: what a node runs.
    source = "def greet(who: str = 'nobody') -> None:\n    print(f'hello {who} $HOME `true`')\n"
    script = function_script(
        source, "greet", func_file="job.py", entry_point=sys.executable, func_args={"who": "EOM"}
    )
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello EOM $HOME `true`\n"
    assert (tmp_path / "job.py").read_text().endswith("greet(**{'who': 'EOM'})\n")


def test_a_source_line_never_ends_the_here_document() -> None:
    source = "def f() -> None:\n    x = '''\nEOM\n'''\n    print(x)\n"
    script = function_script(source, "f", func_file="f.py", entry_point="python")
    assert "<< 'EOM_'" in script and script.count("\nEOM_\n") == 1


def test_on_kubernetes_the_trainjob_carries_the_source_and_the_install() -> None:
    manifest = function_trainjob(
        "def train() -> None:\n    print('trained')\n",
        "train",
        name="fn",
        func_file="notebook.py",
        num_nodes=2,
        packages=["transformers[torch]", "datasets==3.0"],
        resources_per_node={"cpu": "2"},
        env={"LR": "0.1"},
    )
    job = load_one(manifest)
    objects = render_job(job)
    assert [e for o in objects for e in k8s_errors(o)] == []
    pods = [o for o in objects if o["kind"] == "Pod"]
    assert [p["metadata"]["name"] for p in pods] == ["fn-node-0", "fn-node-1"]
    for pod in pods:
        (container,) = pod["spec"]["containers"]
        bash, dash_c, script = container["command"]
        assert (bash, dash_c) == ("bash", "-c")
        install, rest = script.split("\n", 1)
        # Installed first, each requirement shell-quoted, from upstream's default index.
        assert "pip install" in install and "'transformers[torch]' datasets==3.0" in install
        assert "--index-url https://pypi.org/simple" in install
        assert "def train() -> None:\n    print('trained')\n\ntrain()\n" in rest
        assert rest.endswith('exec torchrun "${TMPDIR:-.}"/notebook.py\n')
        assert container["resources"] == {"requests": {"cpu": "2"}, "limits": {"cpu": "2"}}
        assert {"name": "LR", "value": "0.1"} in container["env"]


def test_on_a_cluster_train_creates_the_trainjob_with_the_source(tmp_path: Path) -> None:
    with ClientClusterThread() as cluster:
        cluster.install_crds()
        cluster.create_namespaces("ml")
        config = kmock_cluster.write_kubeconfig(tmp_path / "kubeconfig", cluster.url)
        client = JobClient("kubernetes", kubeconfig=str(config), context="kmock", namespace="ml")
        # Packages are the nodes' to install on a cluster: none is looked for here.
        view = client.train(greet, num_nodes=2, func_args={"who": "x"}, packages=["nope-pkg"])
        assert (view.kind, view.namespace) == ("TrainJob", "ml")
        stored = client.get(view.name).job.to_wire()["spec"]
        assert stored["runtimeRef"]["name"] == "torch-distributed"
        assert stored["trainer"]["numNodes"] == 2
        bash, dash_c, script = stored["trainer"]["command"]
        assert (bash, dash_c) == ("bash", "-c")
        assert "nope-pkg" in script.split("\n", 1)[0]
        assert "def greet(who: str = " in script and "greet(**{'who': 'x'})" in script
        client.delete(view.name)
        assert client.list() == []


def test_an_unknown_runtime_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(Exception, match="torch-distributed"):
        function_trainjob("def f(): pass\n", "f", name="x", func_file="f.py", runtime="nope")
