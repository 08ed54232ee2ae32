"""The workload status model and the token vocabulary (design: Statuses, DD-0018).

Pure: `map_token` turns a token (plus its detail) into a status change and a level,
`apply_token` decides what happens to a workload that receives it, and `decide_token` turns that
into the `TokenRecord` the state saves.

Rules, in order (exact tokens first, then prefixes and suffixes):

* ``SLURM_JOB_SUBMITTED`` -> queued
* ``SLURM_INIT_*``, ``SLURM_REPO_*``, ``SLURM_PRE_COMMAND_*`` -> preparing
* ``SLURM_JOB_STATUS`` with ``detail["state"]``: PENDING -> queued; CONFIGURING -> preparing;
  RUNNING, COMPLETING -> running; COMPLETED -> succeeded; CANCELLED -> cancelled;
  NODE_FAIL, PREEMPTED, BOOT_FAIL -> queued when ``detail["requeued"]`` is true, else failed;
  FAILED, TIMEOUT, OUT_OF_MEMORY, DEADLINE -> failed
* ``SLURM_JOB_ENDED`` (a job that ended without a final state: the EpilogSlurmctld hook's
  record, or the end of a job that left squeue with none) -> failed (error); its detail says
  why (`core.jobend`)
* ``*_QUEUED`` -> queued (warning); ``*_FAILED`` -> failed (error)
* ``POD_INITIALIZING`` -> preparing; ``DEPLOYMENT_AVAILABLE`` -> running
* placement truth: ``POD_NOT_ISOLATED``, ``PODS_UNPLACED`` -> queued (warning), the detail's
  ``reason`` kept as the row's queued reason
* ``POD_CREATION_BLOCKED`` -> log only (warning); ``CAPACITY_EXCEEDED`` -> log only (error)
* gangs (design: Gangs): ``GANG_FAILED`` -> log only (warning: the gang is retried);
  ``GANG_PROVISIONED`` -> log only; ``GANG_UNSATISFIABLE`` -> failed (error)
* anything else -> logged, no status change

An inactive status is terminal for its row: a late token never revives it. Among active
statuses the latest token wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from scoctl.core.model import TokenRecord, WorkloadRecord
from scoctl.core.model.vocabulary import PlacementToken, WorkloadStatus

Level = Literal["info", "warning", "error"]

ACTIVE_STATUSES = frozenset({WorkloadStatus.PENDING, WorkloadStatus.QUEUED,
                             WorkloadStatus.PREPARING, WorkloadStatus.RUNNING})
INACTIVE_JOB_STATUSES = frozenset({WorkloadStatus.SUCCEEDED, WorkloadStatus.FAILED,
                                   WorkloadStatus.CANCELLED})
INACTIVE_DEPLOYMENT_STATUSES = frozenset({WorkloadStatus.FAILED, WorkloadStatus.STOPPED,
                                          WorkloadStatus.DELETED})
INACTIVE_STATUSES = INACTIVE_JOB_STATUSES | INACTIVE_DEPLOYMENT_STATUSES
ALL_STATUSES = ACTIVE_STATUSES | INACTIVE_STATUSES

SLURM_PREPARING_PREFIXES = ("SLURM_INIT_", "SLURM_REPO_", "SLURM_PRE_COMMAND_")
SLURM_STATE_STATUS: Mapping[str, str] = {
    "PENDING": WorkloadStatus.QUEUED,
    "CONFIGURING": WorkloadStatus.PREPARING,
    "RUNNING": WorkloadStatus.RUNNING,
    "COMPLETING": WorkloadStatus.RUNNING,
    "COMPLETED": WorkloadStatus.SUCCEEDED,
    "CANCELLED": WorkloadStatus.CANCELLED,
    "FAILED": WorkloadStatus.FAILED,
    "TIMEOUT": WorkloadStatus.FAILED,
    "OUT_OF_MEMORY": WorkloadStatus.FAILED,
    "DEADLINE": WorkloadStatus.FAILED,
}
SLURM_REQUEUE_STATES = frozenset({"NODE_FAIL", "PREEMPTED", "BOOT_FAIL"})
# log only, at their level: the gate's over-capacity verdict is an error wherever it is recorded
LOG_ONLY_TOKENS: Mapping[str, Level] = {"POD_CREATION_BLOCKED": "warning",
                                        "CAPACITY_EXCEEDED": "error",
                                        # a failed gang is retried (design: Gangs)
                                        "GANG_FAILED": "warning", "GANG_PROVISIONED": "info"}

# placement truth: the workload waits, and its row keeps the detail's reason
PLACEMENT_TOKENS = frozenset(PlacementToken)

# Pending reasons that waiting cannot clear: the gate's capacity check decides.
HOPELESS_SLURM_REASONS = frozenset(
    {
        "PartitionConfig",
        "PartitionNodeLimit",
        "PartitionTimeLimit",
        "BadConstraints",
        "DependencyNeverSatisfied",
    }
)


def is_active(status: str) -> bool:
    """True for pending, queued, preparing and running."""
    return status in ACTIVE_STATUSES


@dataclass(frozen=True)
class TokenMeaning:
    """What a token says: the status it maps to (None: no change) and its log level."""

    status: str | None
    level: Level
    known: bool = True


def _truthy(value: object) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in {"1", "true", "yes", "y"}
    return bool(value)


def map_token(token: str, detail: Mapping[str, object] | None = None) -> TokenMeaning:
    """Map a token (and its detail) to a status and level. Unknown tokens change nothing."""
    detail = detail or {}
    if token == "SLURM_JOB_SUBMITTED":
        return TokenMeaning(WorkloadStatus.QUEUED, "info")
    if token.startswith(SLURM_PREPARING_PREFIXES):
        return TokenMeaning(WorkloadStatus.PREPARING, "info")
    if token == "SLURM_JOB_STATUS":
        state = str(detail.get("state", "")).upper().split()[0] if detail.get("state") else ""
        if state in SLURM_STATE_STATUS:
            status = SLURM_STATE_STATUS[state]
            return TokenMeaning(status, "error" if status == WorkloadStatus.FAILED else "info")
        if state in SLURM_REQUEUE_STATES:
            if _truthy(detail.get("requeued", False)):
                return TokenMeaning(WorkloadStatus.QUEUED, "warning")
            return TokenMeaning(WorkloadStatus.FAILED, "error")
        return TokenMeaning(None, "warning", known=False)
    if token == "SLURM_JOB_ENDED":
        return TokenMeaning(WorkloadStatus.FAILED, "error")
    if token in LOG_ONLY_TOKENS:
        return TokenMeaning(None, LOG_ONLY_TOKENS[token])
    if token in PLACEMENT_TOKENS:
        return TokenMeaning(WorkloadStatus.QUEUED, "warning")
    if token == "GANG_UNSATISFIABLE":
        return TokenMeaning(WorkloadStatus.FAILED, "error")
    if token.endswith("_QUEUED"):
        return TokenMeaning(WorkloadStatus.QUEUED, "warning")
    if token.endswith("_FAILED"):
        return TokenMeaning(WorkloadStatus.FAILED, "error")
    if token == "POD_INITIALIZING":
        return TokenMeaning(WorkloadStatus.PREPARING, "info")
    if token == "DEPLOYMENT_AVAILABLE":
        return TokenMeaning(WorkloadStatus.RUNNING, "info")
    return TokenMeaning(None, "info", known=False)


@dataclass(frozen=True)
class TokenOutcome:
    """The decision for one token arriving at one workload row."""

    record: bool  # append the event to the log
    status: str  # the row's status after the token
    changed: bool  # the status changed
    level: Level
    note: str = ""  # why nothing changed, for the event detail


def apply_token(
    current: str,
    token: str,
    detail: Mapping[str, object] | None = None,
    *,
    last_queued_reason: str | None = None,
) -> TokenOutcome:
    """Decide what `token` does to a workload whose status is `current`.

    * inactive `current` is terminal: the event is still logged, the status stays;
    * ``SLURM_JOB_QUEUED`` with the same ``reason`` as the last recorded one is dropped
      (once per distinct pending reason);
    * among active statuses the latest token wins.
    """
    detail = detail or {}
    meaning = map_token(token, detail)
    if token == "SLURM_JOB_QUEUED":
        reason = str(detail.get("reason", ""))
        if last_queued_reason is not None and reason == last_queued_reason:
            return TokenOutcome(False, current, False, meaning.level, "duplicate reason")
    if meaning.status is None:
        note = "" if meaning.known else "unknown token"
        return TokenOutcome(True, current, False, meaning.level, note)
    if not is_active(current):
        return TokenOutcome(True, current, False, meaning.level, f"{current} is terminal")
    return TokenOutcome(True, meaning.status, meaning.status != current, meaning.level)


def decide_token(row: WorkloadRecord | None, slug: str, token: str,
                 detail: Mapping[str, object] | None = None, *,
                 ts: str | None = None) -> tuple[TokenOutcome | None, TokenRecord | None]:
    """What `token` for `slug` changes in the state, given the row it lands on.

    `row` is the slug's active row, else its newest, else None. Returns the outcome (None
    without a row: the event is still logged against the slug) and the record to save (None
    when the token is dropped, a repeated pending reason). A row that is no longer active keeps
    its status and bookkeeping; the event says why nothing changed.
    """
    extra = dict(detail or {})
    if row is None:
        return None, TokenRecord(workload=slug, token=token, level=map_token(token, extra).level,
                                 detail=extra, ts=ts)
    outcome = apply_token(row.status, token, extra, last_queued_reason=row.last_queued_reason)
    if not outcome.record:
        return outcome, None
    if outcome.note:
        extra.setdefault("note", outcome.note)
    reason = (str(extra.get("reason", "")) if token == "SLURM_JOB_QUEUED"
              or token in PLACEMENT_TOKENS else row.last_queued_reason)
    return outcome, TokenRecord(
        workload=slug, token=token, level=outcome.level, detail=extra, workload_id=row.id,
        status=outcome.status, update_row=is_active(row.status), last_queued_reason=reason,
        ts=ts)
