"""The token vocabulary and status model of design: Statuses / DD-0018."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.model import TokenRecord, WorkloadRecord
from scoctl.core.tokens import (
    ACTIVE_STATUSES,
    INACTIVE_STATUSES,
    apply_token,
    decide_token,
    map_token,
)


@pytest.mark.parametrize(
    ("token", "detail", "status", "level"),
    [
        ("SLURM_JOB_SUBMITTED", {}, "queued", "info"),
        ("SLURM_INIT_START", {}, "preparing", "info"),
        ("SLURM_REPO_CLONE", {}, "preparing", "info"),
        ("SLURM_PRE_COMMAND_1", {}, "preparing", "info"),
        ("SLURM_JOB_STATUS", {"state": "PENDING"}, "queued", "info"),
        ("SLURM_JOB_STATUS", {"state": "CONFIGURING"}, "preparing", "info"),
        ("SLURM_JOB_STATUS", {"state": "RUNNING"}, "running", "info"),
        ("SLURM_JOB_STATUS", {"state": "COMPLETING"}, "running", "info"),
        ("SLURM_JOB_STATUS", {"state": "COMPLETED"}, "succeeded", "info"),
        ("SLURM_JOB_STATUS", {"state": "CANCELLED"}, "cancelled", "info"),
        ("SLURM_JOB_STATUS", {"state": "CANCELLED by 0"}, "cancelled", "info"),
        ("SLURM_JOB_STATUS", {"state": "FAILED"}, "failed", "error"),
        ("SLURM_JOB_STATUS", {"state": "TIMEOUT"}, "failed", "error"),
        ("SLURM_JOB_STATUS", {"state": "OUT_OF_MEMORY"}, "failed", "error"),
        ("SLURM_JOB_STATUS", {"state": "DEADLINE"}, "failed", "error"),
        ("SLURM_JOB_STATUS", {"state": "NODE_FAIL"}, "failed", "error"),
        ("SLURM_JOB_STATUS", {"state": "NODE_FAIL", "requeued": True}, "queued", "warning"),
        ("SLURM_JOB_STATUS", {"state": "PREEMPTED", "requeued": "true"}, "queued", "warning"),
        ("SLURM_JOB_STATUS", {"state": "PREEMPTED"}, "failed", "error"),
        ("SLURM_JOB_STATUS", {"state": "BOOT_FAIL", "requeued": "1"}, "queued", "warning"),
        ("SLURM_JOB_STATUS", {"state": "BOOT_FAIL"}, "failed", "error"),
        ("SLURM_JOB_QUEUED", {"reason": "Resources"}, "queued", "warning"),
        ("POD_QUEUED", {}, "queued", "warning"),
        ("SLURM_JOB_SUBMISSION_FAILED", {}, "failed", "error"),
        ("POD_SCHEDULING_FAILED", {}, "failed", "error"),
        ("POD_QUOTA_EXCEEDED_FAILED", {}, "failed", "error"),
        ("POD_INITIALIZING", {}, "preparing", "info"),
        ("DEPLOYMENT_AVAILABLE", {}, "running", "info"),
        ("POD_CREATION_BLOCKED", {}, None, "warning"),
        ("CAPACITY_EXCEEDED", {}, None, "error"),  # the gate's verdict: one level everywhere
        ("SLURM_JOB_ENDED", {"exit_code": "0:0", "reason": "ended, final state unknown"},
         "failed", "error"),  # a job that ended without a final state never stays active
        ("SOMETHING_ELSE", {}, None, "info"),
    ],
)
def test_every_token_of_the_table_maps_to_its_status(token, detail, status, level):
    meaning = map_token(token, detail)
    assert meaning.status == status
    assert meaning.level == level


def test_unknown_token_is_logged_and_changes_nothing():
    outcome = apply_token("queued", "WHATEVER_HAPPENED")
    assert outcome.record and not outcome.changed and outcome.status == "queued"
    assert outcome.note == "unknown token"


def run_flow(tokens):
    status, reason, seen = "pending", None, ["pending"]
    for token, detail in tokens:
        outcome = apply_token(status, token, detail, last_queued_reason=reason)
        if token == "SLURM_JOB_QUEUED" and outcome.record:
            reason = detail.get("reason")
        if outcome.changed:
            seen.append(outcome.status)
        status = outcome.status
    return seen


def test_k8s_flow_pending_queued_preparing_running():
    assert run_flow([("POD_QUEUED", {}), ("POD_INITIALIZING", {}),
                     ("DEPLOYMENT_AVAILABLE", {})]) == ["pending", "queued", "preparing", "running"]


def test_slurm_flow_pending_preparing_queued_running():
    assert run_flow([("SLURM_INIT_START", {}), ("SLURM_PRE_COMMAND_1", {}),
                     ("SLURM_JOB_SUBMITTED", {}),
                     ("SLURM_JOB_QUEUED", {"reason": "Resources"}),
                     ("SLURM_JOB_STATUS", {"state": "RUNNING"})]) == [
        "pending", "preparing", "queued", "running"]


def test_over_capacity_at_run_time_pending_queued_failed():
    assert run_flow([("POD_QUEUED", {}), ("POD_SCHEDULING_FAILED", {})]) == [
        "pending", "queued", "failed"]


def test_quota_block_pending_preparing_failed():
    assert run_flow([("POD_INITIALIZING", {}), ("POD_QUOTA_EXCEEDED_FAILED", {})]) == [
        "pending", "preparing", "failed"]


def test_gate_flow_pending_failed():
    assert run_flow([("SLURM_JOB_SUBMISSION_FAILED", {})]) == ["pending", "failed"]


def test_reclaim_and_requeue_moves_running_back_to_queued():
    assert run_flow([("SLURM_JOB_SUBMITTED", {}), ("SLURM_JOB_STATUS", {"state": "RUNNING"}),
                     ("SLURM_JOB_STATUS", {"state": "PREEMPTED", "requeued": True}),
                     ("SLURM_JOB_STATUS", {"state": "RUNNING"})]) == [
        "pending", "queued", "running", "queued", "running"]


def test_a_failed_workload_stays_failed_after_a_late_pod_queued():
    outcome = apply_token("failed", "POD_QUEUED")
    assert outcome.status == "failed" and not outcome.changed and outcome.record
    assert "terminal" in outcome.note


def test_slurm_job_queued_is_recorded_once_per_distinct_reason():
    first = apply_token("queued", "SLURM_JOB_QUEUED", {"reason": "Resources"},
                        last_queued_reason=None)
    again = apply_token("queued", "SLURM_JOB_QUEUED", {"reason": "Resources"},
                        last_queued_reason="Resources")
    other = apply_token("queued", "SLURM_JOB_QUEUED", {"reason": "Priority"},
                        last_queued_reason="Resources")
    assert first.record and not again.record and other.record


TOKENS = st.sampled_from([
    ("POD_QUEUED", {}), ("POD_INITIALIZING", {}), ("DEPLOYMENT_AVAILABLE", {}),
    ("POD_SCHEDULING_FAILED", {}), ("SLURM_JOB_SUBMITTED", {}), ("SLURM_INIT_X", {}),
    ("SLURM_JOB_STATUS", {"state": "COMPLETED"}), ("SLURM_JOB_STATUS", {"state": "RUNNING"}),
    ("SLURM_JOB_STATUS", {"state": "CANCELLED"}), ("CAPACITY_EXCEEDED", {}), ("NOISE", {}),
    ("SLURM_JOB_QUEUED", {"reason": "Resources"}),
])


@given(st.lists(TOKENS, max_size=30))
def test_inactive_is_terminal_for_any_token_sequence(tokens):
    status, terminal = "pending", None
    for token, detail in tokens:
        outcome = apply_token(status, token, detail)
        if terminal is not None:
            assert outcome.status == terminal and not outcome.changed
        status = outcome.status
        assert status in ACTIVE_STATUSES | INACTIVE_STATUSES
        if status in INACTIVE_STATUSES and terminal is None:
            terminal = status


def _row(status: str, *, reason: str | None = None) -> WorkloadRecord:
    return WorkloadRecord(id=7, slug="train", kind="job", source="slurm", contract="T1",
                          status=status, created="x", updated="x", last_queued_reason=reason)


def test_decide_token_moves_an_active_row_and_remembers_the_pending_reason():
    outcome, record = decide_token(_row("pending"), "train", "SLURM_JOB_QUEUED",
                                   {"reason": "Resources"}, ts="2026-01-01T00:00:00Z")
    assert outcome is not None and outcome.changed
    assert record == TokenRecord(workload="train", token="SLURM_JOB_QUEUED", level="warning",
                                 detail={"reason": "Resources"}, workload_id=7, status="queued",
                                 update_row=True, last_queued_reason="Resources",
                                 ts="2026-01-01T00:00:00Z")


def test_decide_token_drops_a_repeated_pending_reason():
    outcome, record = decide_token(_row("queued", reason="Resources"), "train",
                                   "SLURM_JOB_QUEUED", {"reason": "Resources"})
    assert outcome is not None and not outcome.record
    assert record is None


def test_decide_token_logs_against_a_terminal_row_without_touching_it():
    outcome, record = decide_token(_row("failed"), "train", "SLURM_JOB_STATUS",
                                   {"state": "RUNNING"})
    assert outcome is not None and not outcome.changed
    assert record is not None and not record.update_row
    assert (record.status, record.workload_id, record.detail["note"]) == (
        "failed", 7, "failed is terminal")


def test_decide_token_without_a_row_logs_against_the_slug_only():
    outcome, record = decide_token(None, "ghost", "POD_SCHEDULING_FAILED")
    assert outcome is None
    assert record == TokenRecord(workload="ghost", token="POD_SCHEDULING_FAILED", level="error")
