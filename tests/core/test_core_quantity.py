"""Resource quantities as the PodGroup sizing reads and writes them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from kubemill.api import Container, PodSpec
from kubemill.core.quantity import format_quantity, parse_quantity, sum_pod_requests


@pytest.mark.parametrize(
    ("text", "value"),
    [
        pytest.param("2", Decimal(2), id="plain"),
        pytest.param(2, Decimal(2), id="int"),
        pytest.param("500m", Decimal("0.5"), id="milli"),
        pytest.param("1Gi", Decimal(2**30), id="gibi"),
        pytest.param("1.5G", Decimal(1_500_000_000), id="giga-fraction"),
        pytest.param("1e3", Decimal(1000), id="exponent"),
        pytest.param("12x", None, id="bad-suffix"),
        pytest.param("", None, id="empty"),
    ],
)
def test_parse_quantity(text: str | int, value: Decimal | None) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    ("value", "text"),
    [
        pytest.param(Decimal(3), "3", id="integer"),
        pytest.param(Decimal("1.5"), "1500m", id="milli"),
        pytest.param(Decimal("0.0005"), "0.0005", id="finer-than-milli"),
    ],
)
def test_format_quantity(value: Decimal, text: str) -> None:
    assert format_quantity(value) == text


def test_sum_takes_the_highest_priority_pods_first() -> None:
    def spec(cpu: str, priority: int | None) -> PodSpec:
        return PodSpec(
            containers=[Container(name="c", resources={"requests": {"cpu": cpu}})],
            priority=priority,
        )

    pods = [spec("1", None), spec("2", 10), spec("4", None)]
    assert sum_pod_requests(pods, first=2) == (("cpu", "3"),)
    assert sum_pod_requests(pods, first=0) == ()
