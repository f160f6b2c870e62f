"""A kind's declared condition vocabulary: the core writes its conditions in the kind's
words (no condition the kind lacks, the kind's reasons), the wire carries the kind's names
both ways, and the job's phase stays the core's word for every kind."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import ClassVar

import pytest

from kubemill.api import ConditionType, ConditionVocabulary, JobStatus, WordedStatus
from kubemill.core import set_condition
from kubemill.substrates.local.records import phase_of

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class DoneStatus(WordedStatus):
    """A status whose kind says Done for Succeeded, has no Created or Running, and words
    two of the core's reasons its own way."""

    VOCABULARY: ClassVar[ConditionVocabulary] = ConditionVocabulary(
        words={ConditionType.SUCCEEDED: "Done"},
        unused=frozenset({ConditionType.CREATED, ConditionType.RUNNING}),
        reasons={"XSucceeded": "AllDone", "XSuspended": "Paused"},
    )


def test_the_core_writes_no_condition_the_kind_lacks() -> None:
    status = DoneStatus()
    for kind in (ConditionType.CREATED, ConditionType.RUNNING):
        changed = set_condition(status, kind, "True", reason="X", message="m", now=NOW)
        assert not changed
    assert status.conditions == []
    # The same calls on the core's own vocabulary write both.
    plain = JobStatus()
    set_condition(plain, ConditionType.CREATED, "True", reason="X", message="m", now=NOW)
    assert [c.type for c in plain.conditions] == [ConditionType.CREATED]


def test_the_core_writes_the_kinds_reasons_and_keeps_others() -> None:
    status = DoneStatus()
    set_condition(
        status, ConditionType.SUSPENDED, "True", reason="XSuspended", message="m", now=NOW
    )
    later = NOW + timedelta(seconds=1)
    set_condition(
        status, ConditionType.SUSPENDED, "False", reason="XResumed", message="m", now=later
    )
    suspended = status.condition(ConditionType.SUSPENDED)
    assert suspended is not None
    assert (suspended.status, suspended.reason) == ("False", "XResumed")
    set_condition(
        status, ConditionType.SUCCEEDED, "True", reason="XSucceeded", message="m", now=NOW
    )
    done = status.condition(ConditionType.SUCCEEDED)
    assert done is not None and done.reason == "AllDone"
    # Rewriting it with the core's reason is no change: it is already written in the kind's.
    assert not set_condition(
        status, ConditionType.SUCCEEDED, "True", reason="XSucceeded", message="m", now=later
    )


def test_the_wire_carries_the_kinds_names_both_ways() -> None:
    status = DoneStatus()
    set_condition(status, ConditionType.SUSPENDED, "False", reason="R", message="m", now=NOW)
    set_condition(
        status, ConditionType.SUCCEEDED, "True", reason="XSucceeded", message="m", now=NOW
    )
    wire = status.to_wire()
    assert [c["type"] for c in wire["conditions"]] == ["Suspended", "Done"]
    back = DoneStatus.model_validate(wire)
    assert back == status
    assert back.finished and back.phase == "Succeeded"
    assert back.to_wire() == wire
    # The Python dump (what a local supervisor compares) goes through the same words.
    assert [c["type"] for c in status.model_dump()["conditions"]] == ["Suspended", "Done"]
    # The core's own vocabulary reads Done as the unknown condition it is.
    with pytest.raises(ValueError, match=r"conditions\.1\.type"):
        JobStatus.model_validate(wire)


def test_the_listing_reads_a_finished_job_in_the_core_words() -> None:
    status = DoneStatus()
    set_condition(
        status, ConditionType.SUCCEEDED, "True", reason="XSucceeded", message="m", now=NOW
    )
    wire = status.to_wire()
    assert phase_of(wire, finished=True) == "Succeeded" == status.phase
    failed = {"conditions": [{"type": "Failed", "status": "True", "reason": "R"}]}
    assert phase_of(failed, finished=True) == "Failed"
    assert phase_of({"conditions": []}) == "Pending"


@pytest.mark.parametrize(
    "words",
    [
        {ConditionType.SUCCEEDED: "Failed"},
        {ConditionType.SUCCEEDED: "Done", ConditionType.FAILED: "Done"},
    ],
)
def test_a_wire_word_names_one_condition(words: dict[ConditionType, str]) -> None:
    with pytest.raises(ValueError, match="name two conditions"):
        ConditionVocabulary(words=words)


def test_only_a_worded_status_may_rename_conditions() -> None:
    with pytest.raises(TypeError, match="is a WordedStatus"):

        class Renaming(JobStatus):
            VOCABULARY: ClassVar[ConditionVocabulary] = DoneStatus.VOCABULARY

    # Leaving conditions out or rewording reasons costs no renaming: any status may.
    class Quiet(JobStatus):
        VOCABULARY: ClassVar[ConditionVocabulary] = ConditionVocabulary(
            unused=frozenset({ConditionType.CREATED})
        )

    assert Quiet().to_wire() == {"conditions": [], "replicaStatuses": {}}
