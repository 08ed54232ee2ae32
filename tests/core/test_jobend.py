"""How the row of a Slurm job that left squeue ends (design: Statuses, `core.jobend`): accounting,
else the EpilogSlurmctld's record, else "ended, final state unknown" — never still active."""

from __future__ import annotations

import pytest

from scoctl.core.intake.common import WorkloadState
from scoctl.core.jobend import (
    ENDED_TOKEN,
    UNKNOWN_END,
    hold_record,
    job_end,
    job_ends,
    recorded_end,
)
from scoctl.core.model import EventRecord, FinishedJob
from scoctl.core.tokens import apply_token, is_active, map_token

RUNNING = WorkloadState(slug="train-1", status="running", kind="job", source="slurm",
                        job_id="42")


def record(job_id: str, exit_code: str, *, event_id: int = 1, **extra: object) -> EventRecord:
    return EventRecord(id=event_id, ts="2026-01-01T00:00:00Z", workload="train-1",
                       token=ENDED_TOKEN, level="info", status="running",
                       detail={"job_id": job_id, "exit_code": exit_code, "restarts": "0",
                               "hook": "epilog_slurmctld", **extra})


def status_after(state: WorkloadState, decision_token: str, detail: dict[str, object]) -> str:
    return apply_token(state.status, decision_token, detail).status


@pytest.mark.parametrize(("sacct", "status"), [
    ("COMPLETED", "succeeded"), ("CANCELLED", "cancelled"), ("FAILED", "failed"),
    ("TIMEOUT", "failed"), ("OUT_OF_MEMORY", "failed"), ("NODE_FAIL", "failed"),
])
def test_accounting_gives_the_final_state_over_any_record(sacct: str, status: str) -> None:
    decision = job_end(RUNNING, FinishedJob(42, sacct, "0:15"), {"exit_code": "3:0"}, "T1")
    assert (decision.token, decision.detail["state"], decision.detail["source"]) == \
        ("SLURM_JOB_STATUS", sacct, "sacct")
    assert status_after(RUNNING, decision.token, dict(decision.detail)) == status


def test_accounting_that_still_says_running_is_no_final_state() -> None:
    decision = job_end(RUNNING, FinishedJob(42, "RUNNING"), None, "T1")
    assert decision.token == ENDED_TOKEN and decision.detail["reason"] == UNKNOWN_END


@pytest.mark.parametrize(("exit_code", "reason"), [
    ("3:0", "exit code 3:0"), ("0:9", "exit code 0:9"), ("0:0", UNKNOWN_END),
])
def test_the_epilog_record_ends_the_row_with_its_exit_code(exit_code: str, reason: str) -> None:
    decision = job_end(RUNNING, None, dict(record("42", exit_code).detail), "T1")
    assert decision.token == ENDED_TOKEN
    assert decision.detail == {"job_id": "42", "source": "epilog", "exit_code": exit_code,
                               "restarts": "0", "reason": reason}
    assert status_after(RUNNING, decision.token, dict(decision.detail)) == "failed"


def test_without_accounting_or_record_the_row_still_ends() -> None:
    decision = job_end(RUNNING, None, None, "T1")
    assert decision.detail == {"job_id": "42", "source": "none", "reason": UNKNOWN_END}
    after = apply_token("running", decision.token, dict(decision.detail))
    assert not is_active(after.status) and after.level == "error"


def test_the_newest_record_of_the_job_is_the_one_that_counts() -> None:
    events = [record("42", "0:0", event_id=1), record("41", "3:0", event_id=2),
              record("42", "1:0", event_id=3),
              EventRecord(4, "2026-01-01T00:00:01Z", "train-1", ENDED_TOKEN, "error", "failed",
                          {"job_id": "42", "exit_code": "9:0", "source": "epilog"})]
    found = recorded_end(events, "42")
    assert found is not None and found["exit_code"] == "1:0"  # decisions are not records
    assert recorded_end(events, "43") is None


def test_every_gone_row_gets_exactly_one_ending() -> None:
    other = WorkloadState(slug="train-2", status="queued", kind="job", source="slurm",
                          job_id="43")
    decisions = job_ends([RUNNING, other], {"42": FinishedJob(42, "CANCELLED by 0", "0:15")},
                         {"43": None}, "T1")
    assert [(d.slug, d.token, d.detail.get("state")) for d in decisions] == [
        ("train-1", "SLURM_JOB_STATUS", "CANCELLED"), ("train-2", ENDED_TOKEN, None)]


def test_records_are_held_only_while_slurm_is_watched() -> None:
    assert hold_record(ENDED_TOKEN, "42", slurm_watched=True)
    assert not hold_record(ENDED_TOKEN, "42", slurm_watched=False)
    assert not hold_record(ENDED_TOKEN, None, slurm_watched=True)
    assert not hold_record("SLURM_JOB_STATUS", "42", slurm_watched=True)


def test_the_ended_token_is_terminal() -> None:
    assert map_token(ENDED_TOKEN).status == "failed"
