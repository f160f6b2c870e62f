"""Commands that work on manifests alone, with no job running: validate, render, install.

``validate`` reports every problem of every file, one line each, with the file and the
field path, so a user can fix a whole directory in one pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.text import Text

from kubemill.api import ManifestError
from kubemill.cli.console import stdout_console
from kubemill.cli.errors import fail, stderr_console
from kubemill.sdk.manifests import load_path, manifest_files


def validate_paths(paths: Sequence[Path]) -> int:
    """Print OK per valid file, or every problem found; the exit code (0 or 1)."""
    out = stdout_console()
    err = stderr_console()
    files = manifest_files(paths)
    if not files:
        fail(
            "no manifests found in "
            + ", ".join(str(p) for p in paths)
            + " (give YAML files, or directories holding *.yaml / *.yml files)"
        )
    bad_files = 0
    problems = 0
    for file in files:
        try:
            jobs = load_path(file)
        except ManifestError as exc:
            bad_files += 1
            problems += len(exc.errors)
            for error in exc.errors:
                line = str(error) if error.source else f"{file}: {error}"
                out.print(Text(line, style="red"))
            continue
        described = ", ".join(f"{job.KIND} {job.name}" for job in jobs)
        out.print(Text.assemble((f"{file}: ", ""), ("OK", "green"), f" ({described})"))
    if bad_files:
        err.print(
            Text(
                f"{problems} problem{'s' if problems != 1 else ''} in {bad_files} of "
                f"{len(files)} file{'s' if len(files) != 1 else ''}",
                style="bold red",
            )
        )
        return 1
    return 0


def render_file(
    file: Path,
    *,
    namespace: str | None,
    gang_scheduler: str | None = None,
    show_secrets: bool = False,
    progress: bool = True,
) -> None:
    """Print every object the operator would create for the jobs in ``file``, as YAML.

    Secret values are left out unless ``show_secrets``; with ``progress``, job pods carry
    the progress sidecar of a default install.
    """
    from kubemill.substrates.kubernetes.build import UnsupportedPlanError
    from kubemill.substrates.kubernetes.render import default_install_progress, render_job

    sidecar = default_install_progress() if progress else None

    objects: list[dict[str, Any]] = []
    for job in load_path(file):
        try:
            objects.extend(
                render_job(
                    job,
                    namespace=namespace,
                    gang_scheduler=gang_scheduler,
                    show_secrets=show_secrets,
                    progress=sidecar,
                )
            )
        except UnsupportedPlanError as exc:
            fail(f"{file}: {job.KIND} {job.name} cannot be rendered for Kubernetes: {exc}")
    print_yaml(objects)


def print_yaml(objects: Sequence[dict[str, Any]]) -> None:
    import typer

    from kubemill.substrates.kubernetes.render import dump_yaml

    # Plain stdout, never through rich: the output is meant for `kubectl apply -f -`.
    typer.echo(dump_yaml(objects), nl=False)
