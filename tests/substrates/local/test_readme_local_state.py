"""The README's section on local state and limits says what the code does.

The numbers a user reads (limits, the default replica cap) and the default places
(state directory, config file) are the code's own, so they cannot drift apart silently.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kubemill.api.common import MAX_REPLICAS
from kubemill.api.loader import MAX_EXPANDED_NODES, MAX_SOURCE_CHARS
from kubemill.substrates.local.images import DEFAULT_MAX_REPLICAS_PER_JOB, config_path
from kubemill.substrates.local.store import DB_NAME, default_state_dir

README = Path(__file__).resolve().parents[3] / "README.md"


def section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Local state, logs and limits")
    return text[start : text.index("\n## ", start + 1)]


def test_the_documented_limits_are_the_codes() -> None:
    text = section()
    assert f"{MAX_REPLICAS:,} per replica type" in text
    assert f"more than {MAX_EXPANDED_NODES:,} nodes" in text
    assert f"over {MAX_SOURCE_CHARS // (1024 * 1024)} MiB" in text
    assert f"at most {DEFAULT_MAX_REPLICAS_PER_JOB} replicas" in text
    assert "maxReplicasPerJob:" in text


def test_the_documented_default_places_are_the_codes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    for variable in ("KUBEMILL_STATE_DIR", "XDG_STATE_HOME", "KUBEMILL_CONFIG", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    text = section()
    state = default_state_dir().relative_to(tmp_path)
    config = config_path().relative_to(tmp_path)
    assert f"`~/{state}`" in text
    assert f"`~/{config}`" in text
    assert f"`{DB_NAME}`" in text


def test_the_readme_says_how_to_put_the_cli_on_path() -> None:
    text = README.read_text(encoding="utf-8")
    demo = text.index("scripts/demo.sh")
    assert "source .venv/bin/activate" in text[demo : text.index("## CLI in short")]
