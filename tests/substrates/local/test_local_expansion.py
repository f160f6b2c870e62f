"""``$(VAR)`` expansion follows Kubernetes: defined names expand, ``$$`` escapes, the rest stays."""

from __future__ import annotations

import pytest

from kubemill.substrates.local.expansion import expand

VARS = {"A": "alpha", "HOSTS": "127.0.0.1:1,127.0.0.1:2", "EMPTY": "", "SP": "two words"}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("$(A)", "alpha", id="whole"),
        pytest.param("--ps_hosts=$(HOSTS)", "--ps_hosts=127.0.0.1:1,127.0.0.1:2", id="embedded"),
        pytest.param("$(A)-$(A)", "alpha-alpha", id="twice"),
        pytest.param("$(MISSING)", "$(MISSING)", id="undefined-kept"),
        pytest.param("x$(MISSING)y$(A)", "x$(MISSING)yalpha", id="undefined-then-defined"),
        pytest.param("$$(A)", "$(A)", id="escaped"),
        pytest.param("$$$(A)", "$alpha", id="escaped-dollar-then-ref"),
        pytest.param("$$", "$", id="double-dollar"),
        pytest.param("cost $5", "cost $5", id="dollar-other"),
        pytest.param("$", "$", id="lone-dollar"),
        pytest.param("end$", "end$", id="trailing-dollar"),
        pytest.param("$(A", "$(A", id="unterminated"),
        pytest.param("$(A $(A)", "$(A $(A)", id="unterminated-swallows-until-close"),
        pytest.param("$()", "$()", id="empty-name"),
        pytest.param("$(EMPTY)", "", id="defined-empty"),
        pytest.param("$(SP)", "two words", id="spaces-stay-one-arg"),
        pytest.param("${A}", "${A}", id="shell-braces-not-expanded"),
        pytest.param("$A", "$A", id="shell-bare-not-expanded"),
        pytest.param("plain", "plain", id="nothing"),
    ],
)
def test_expand(text: str, expected: str) -> None:
    assert expand(text, VARS) == expected
