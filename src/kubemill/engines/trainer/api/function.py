"""A Python function as a TrainJob, as the Kubeflow SDK's ``TrainerClient.train(trainer=
CustomTrainer(func=..., num_nodes=...))`` sends one (kubeflow/sdk's Kubernetes backend).

The function's source travels in the trainer's command: ``bash -c`` with a script that
writes the source, followed by the call, to a file and starts that file under the runtime's
entry point (``torchrun`` for the torch policy, ``python`` otherwise), after pip-installing
the packages asked for, if any. Two things differ from upstream's script, both for safety:
the here-document's delimiter is quoted (upstream's is not, so the shell expands ``$`` in the
user's code) and chosen so that no line of the source ends it early; and the file goes to
``$TMPDIR`` when it is set (the local substrate gives each replica a private one, where the
nodes of a job share a working directory), else to the working directory, as upstream.
Package names are shell-quoted. Pure: the caller reads the function's source (the SDK).
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from kubemill.api.errors import FieldError, ManifestError
from kubemill.engines.trainer.api import runtimes
from kubemill.engines.trainer.api.runtime import API_VERSION, CLUSTER_TRAINING_RUNTIME

DEFAULT_PIP_INDEX_URL = "https://pypi.org/simple"
"""Where the packages come from unless told (upstream's default index)."""
ENTRY_POINTS = {"torch": "torchrun"}
"""The program that starts the function's file, by the runtime's ML policy (upstream's
SDK starts it with ``python`` under any other policy but MPI's)."""
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_REQUIREMENT = re.compile(r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)")


def requirement_name(requirement: str) -> str:
    """The distribution a pip requirement names (``torch>=2`` -> ``torch``)."""
    found = _REQUIREMENT.match(requirement)
    if found is None:
        raise ValueError(f"packages: {requirement!r} names no Python package")
    return found["name"]


def _delimiter(source: str) -> str:
    lines = set(source.splitlines())
    word = "EOM"
    while word in lines:
        word += "_"
    return word


def function_script(
    source: str,
    func_name: str,
    *,
    func_file: str,
    entry_point: str,
    func_args: Mapping[str, Any] | None = None,
    packages: Sequence[str] = (),
    pip_index_urls: Sequence[str] = (DEFAULT_PIP_INDEX_URL,),
) -> str:
    """The ``bash -c`` script that runs ``func_name`` (defined by ``source``) under
    ``entry_point``, after installing ``packages``."""
    if not _NAME.match(func_name):
        raise ValueError(f"func: {func_name!r} is not a function's name")
    if not func_file or "/" in func_file:
        raise ValueError(f"func: its file's name {func_file!r} is not a plain file name")
    call = f"{func_name}()" if func_args is None else f"{func_name}(**{dict(func_args)!r})"
    code = f"{source.rstrip()}\n\n{call}\n"
    end = _delimiter(code)
    target = f'"${{TMPDIR:-.}}"/{shlex.quote(func_file)}'
    install = ""
    if packages:
        for requirement in packages:
            requirement_name(requirement)
        if not pip_index_urls:
            raise ValueError("pip_index_urls: at least one index is needed to install packages")
        index = ["--index-url", pip_index_urls[0]]
        for url in pip_index_urls[1:]:
            index += ["--extra-index-url", url]
        pip = [
            "python",
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-warn-script-location",
            "--user",
            *index,
            *packages,
        ]
        quoted = " ".join(shlex.quote(p) for p in packages)
        install = (
            f"PIP_DISABLE_PIP_VERSION_CHECK=1 {shlex.join(pip)} "
            f"|| {{ echo 'installing {quoted} failed' >&2; exit 1; }}\n"
        )
    return (
        f"{install}IFS= read -r -d '' SCRIPT << '{end}'\n{code}{end}\n"
        f'printf "%s" "$SCRIPT" > {target}\n'
        f"exec {shlex.quote(entry_point)} {target}\n"
    )


def function_trainjob(
    source: str,
    func_name: str,
    *,
    name: str,
    func_file: str,
    runtime: str = "torch-distributed",
    namespace: str | None = None,
    num_nodes: int | None = None,
    num_proc_per_node: int | str | None = None,
    func_args: Mapping[str, Any] | None = None,
    packages: Sequence[str] = (),
    pip_index_urls: Sequence[str] = (DEFAULT_PIP_INDEX_URL,),
    env: Mapping[str, str] | None = None,
    resources_per_node: Mapping[str, Any] | None = None,
    image: str | None = None,
) -> dict[str, Any]:
    """The TrainJob manifest running a function through the ClusterTrainingRuntime
    ``runtime`` (a known one: its ML policy chooses the entry point)."""
    known = runtimes.find(CLUSTER_TRAINING_RUNTIME, runtime, namespace or "default")
    if known is None:
        names = ", ".join(runtimes.known(CLUSTER_TRAINING_RUNTIME, namespace or "default"))
        raise ManifestError(
            [FieldError("runtime", f"no runtime {runtime!r} is known", f"use one of {names}")]
        )
    policy = known.spec.ml_policy
    frameworks = policy.frameworks if policy is not None else ()
    entry_point = next((ENTRY_POINTS[f] for f in frameworks if f in ENTRY_POINTS), "python")
    script = function_script(
        source,
        func_name,
        func_file=func_file,
        entry_point=entry_point,
        func_args=func_args,
        packages=packages,
        pip_index_urls=pip_index_urls,
    )
    trainer: dict[str, Any] = {"command": ["bash", "-c", script]}
    if num_nodes is not None:
        trainer["numNodes"] = num_nodes
    if num_proc_per_node is not None:
        trainer["numProcPerNode"] = num_proc_per_node
    if image is not None:
        trainer["image"] = image
    if env:
        trainer["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if resources_per_node:
        trainer["resourcesPerNode"] = {
            "requests": dict(resources_per_node),
            "limits": dict(resources_per_node),
        }
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {
        "apiVersion": API_VERSION,
        "kind": "TrainJob",
        "metadata": metadata,
        "spec": {
            "runtimeRef": {"name": runtime},
            "trainer": trainer,
        },
    }


__all__ = [
    "DEFAULT_PIP_INDEX_URL",
    "ENTRY_POINTS",
    "function_script",
    "function_trainjob",
    "requirement_name",
]
