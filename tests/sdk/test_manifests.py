"""Reading manifest files (kubemill.sdk.manifests): the file side of the pure api.load."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubemill.api import ManifestError
from kubemill.engines.tensorflow.api import TFJob
from kubemill.sdk.manifests import load_path, manifest_files

GOOD = Path(__file__).parents[1] / "manifests" / "good"


def test_manifest_files_expands_directories_sorted() -> None:
    files = manifest_files([GOOD])
    assert files == sorted(files)
    assert {f.name for f in files} >= {"seed-tfjob-v1alpha1.yaml", "multi-document.yaml"}
    assert manifest_files([GOOD / "multi-document.yaml"]) == [GOOD / "multi-document.yaml"]


def test_manifest_files_finds_nested_yaml_and_yml_only(tmp_path: Path) -> None:
    (tmp_path / "a.yml").write_text("x: 1\n")
    (tmp_path / "notes.txt").write_text("not a manifest\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.yaml").write_text("x: 1\n")
    # A directory whose name looks like a manifest is walked into, not returned.
    (tmp_path / "dir.yaml").mkdir()
    (tmp_path / "dir.yaml" / "c.yaml").write_text("x: 1\n")
    found = [p.relative_to(tmp_path).as_posix() for p in manifest_files([tmp_path])]
    assert found == ["a.yml", "dir.yaml/c.yaml", "sub/b.yaml"]


def test_a_missing_path_is_kept_for_load_path_to_report(tmp_path: Path) -> None:
    missing = tmp_path / "missing.yaml"
    assert manifest_files([missing]) == [missing]


def test_every_good_fixture_loads() -> None:
    for file in manifest_files([GOOD]):
        assert load_path(file), file


def test_load_path_names_the_file_in_every_error(tmp_path: Path) -> None:
    file = tmp_path / "job.yaml"
    file.write_text("apiVersion: kubemill.dev/v1\nkind: TFJob\nmetadata: {name: Bad_Name}\n")
    with pytest.raises(ManifestError) as caught:
        load_path(file)
    assert caught.value.errors
    assert all(e.source == str(file) for e in caught.value.errors)


def test_load_path_returns_the_jobs_of_the_file() -> None:
    (job,) = load_path(GOOD / "tfjob-v1-ps-workers.yaml")
    assert isinstance(job, TFJob)
    assert job.name == "dist-mnist"


def test_unreadable_file_is_a_manifest_error(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="cannot read") as caught:
        load_path(tmp_path / "missing.yaml")
    assert caught.value.errors[0].source == str(tmp_path / "missing.yaml")


def test_a_file_that_is_not_utf8_is_a_manifest_error(tmp_path: Path) -> None:
    file = tmp_path / "latin1.yaml"
    file.write_bytes("kind: caf\xe9\n".encode("latin-1"))
    with pytest.raises(ManifestError, match="not UTF-8"):
        load_path(file)
