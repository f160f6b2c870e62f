"""Resource quantities as the PodGroup sizing reads and writes them."""

from __future__ import annotations

from decimal import Decimal

import pytest

from kubemill.api import Container, PodSpec
from kubemill.core.quantity import format_quantity, parse_quantity, parse_size, sum_pod_requests


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


# --- parse_size: Mars's sizes --------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (1073741824, 1073741824),
        ("1073741824", 1073741824),
        ("2g", 2 * 1024**3),
        ("2G", 2 * 1024**3),
        ("2GiB", 2 * 1024**3),
        ("16gb", 16 * 1024**3),
        ("512m", 512 * 1024**2),
        ("1.5k", 1536),
        (" 3 t ", 3 * 1024**4),
        ("100b", 100),
        (2.5, 2),
    ],
)
def test_a_size_is_read_as_mars_reads_it(given: object, expected: int) -> None:
    assert parse_size(given, field="worker_mem") == expected


def test_a_percentage_is_a_share_of_the_total_where_one_is_given() -> None:
    assert parse_size("25%", field="worker_cache_mem", of=4 * 1024**3) == 1024**3
    assert parse_size("100%", field="worker_cache_mem", of=1000) == 1000


@pytest.mark.parametrize(
    ("given", "of", "complaint"),
    [
        ("20%", None, "percentage"),
        ("0%", 1000, "(0, 100]"),
        ("150%", 1000, "(0, 100]"),
        ("x%", 1000, "(0, 100]"),
        ("2 gigs", None, "unit"),
        ("-1g", None, "unit"),
        ("0", None, "positive"),
        ("", None, "unit"),
        (True, None, "expected a size"),
        (None, None, "expected a size"),
        ([1], None, "expected a size"),
    ],
)
def test_a_bad_size_names_its_field(given: object, of: int | None, complaint: str) -> None:
    with pytest.raises(ValueError, match="worker_mem") as caught:
        parse_size(given, field="worker_mem", of=of)
    assert complaint in str(caught.value)
