"""The values Spark's client draws per submission, drawn here without ``uuid``/``secrets``.

``random_uuid`` is a version-4 UUID as ``str(uuid.uuid4())`` writes it, ``unique_id`` is
Spark's ``KubernetesUtils.uniqueID`` (3 random bytes, then the time's low 40 bits), and
:func:`generated` passes the builder's own shape checks.
"""

from __future__ import annotations

import uuid

from kubemill.substrates.kubernetes.client import spark_submit as client


def test_random_uuids_are_version_4_and_distinct() -> None:
    drawn = [client.random_uuid() for _ in range(200)]
    assert len(set(drawn)) == len(drawn)
    for text in drawn:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122


def test_unique_ids_end_with_the_times_low_40_bits() -> None:
    now_ms = 0x1234_5678_9ABC_DE
    found = client.unique_id(now_ms)
    assert len(found) == 16
    assert found.endswith(f"{now_ms & 0xFF_FFFF_FFFF:010x}")
    int(found, 16)


def test_generated_values_have_sparks_shapes() -> None:
    one = client.generated(spark_version="4.3.0", user="u")
    other = client.generated(spark_version="4.3.0", user="u")
    assert one.app_id != other.app_id
    assert one.app_id.startswith("spark-")
    assert one.app_id[len("spark-") :] == uuid.UUID(one.app_id[len("spark-") :]).hex
    assert uuid.UUID(one.local_dir_id).version == 4
