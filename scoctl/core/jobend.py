"""How the row of a Slurm job that has left ``squeue`` ends (design: Statuses), pure.

Without slurmdbd a finished job stays in ``squeue`` only MinJobAge seconds (300 by default); a
watch pass that comes later finds nothing there. No row stays active after its job has ended:

1. accounting first: the final state ``sacct`` gives (when slurmdbd answers) becomes a
   ``SLURM_JOB_STATUS`` token with that state (COMPLETED → succeeded, CANCELLED → cancelled...);
2. else what the EpilogSlurmctld hook recorded through the spool (``SLURM_JOB_ENDED`` with the
   job's exit code and restart count): ``failed``, with the exit code as the reason when it
   is a failure for sure (a non-zero exit or a signal);
3. else ``failed`` with the reason ``ended, final state unknown``.

Slurm tells an EpilogSlurmctld nothing but the exit code (checked against 22.05: the job is
still COMPLETING for ``squeue``/``scontrol`` while the hook runs, and ``SLURM_JOB_EXIT_CODE2``
is ``0:0`` for a success, an ``scancel`` and a time limit alike), so a ``0:0`` record cannot
say whether the job succeeded or was cancelled: it ends the row as ``failed`` with the
unknown-state reason and the exit code in the detail. While the job is still listed its own
state decides, so the hook's records are held (logged, no status change) as long as Slurm
is watched (`hold_record`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from scoctl.core.intake.common import TokenDecision, WorkloadState
from scoctl.core.intake.slurm import SLURM_FINISHED_STATES
from scoctl.core.model import EventRecord, FinishedJob

ENDED_TOKEN = "SLURM_JOB_ENDED"
UNKNOWN_END = "ended, final state unknown"
HELD_NOTE = "recorded; while Slurm lists the job its own state decides"


def hold_record(token: str, job_id: str | None, slurm_watched: bool) -> bool:
    """Whether a spooled `token` is a job-end record to hold rather than apply now: an
    EpilogSlurmctld ``SLURM_JOB_ENDED`` of a known job, when this pass watches Slurm (squeue,
    then accounting, say more than the record; without Slurm the record is all there is)."""
    return slurm_watched and token == ENDED_TOKEN and job_id is not None


def recorded_end(events: Iterable[EventRecord], job_id: str) -> Mapping[str, Any] | None:
    """The detail of the newest job-end record (a ``SLURM_JOB_ENDED`` with an exit code) of
    `job_id` among `events`, or None."""
    found: Mapping[str, Any] | None = None
    for event in events:
        detail = event.detail
        if (event.token == ENDED_TOKEN and str(detail.get("job_id", "")) == job_id
                and "exit_code" in detail and "source" not in detail):
            found = detail
    return found


def _failure(exit_code: str) -> bool:
    status, _, signal = exit_code.partition(":")
    return status.strip() not in ("", "0") or signal.strip() not in ("", "0")


def job_end(state: WorkloadState, accounted: FinishedJob | None,
            recorded: Mapping[str, Any] | None, contract: str) -> TokenDecision:
    """The token that ends `state`'s row, whose job (``state.job_id``) has left squeue."""
    job_id = str(state.job_id or "")

    def make(token: str, detail: dict[str, Any]) -> TokenDecision:
        return TokenDecision(slug=state.slug, token=token, detail={"job_id": job_id, **detail},
                             kind="job", source="slurm", contract=contract, job_id=job_id)

    final = accounted.state.split()[0].upper() if accounted and accounted.state else ""
    if accounted is not None and final in SLURM_FINISHED_STATES:
        return make("SLURM_JOB_STATUS", {"state": final, "exit_code": accounted.exit_code,
                                         "source": "sacct"})
    if recorded is not None:
        code = str(recorded.get("exit_code", ""))
        reason = f"exit code {code}" if _failure(code) else UNKNOWN_END
        return make(ENDED_TOKEN, {"source": "epilog", "exit_code": code,
                                  "restarts": recorded.get("restarts", "0"), "reason": reason})
    return make(ENDED_TOKEN, {"source": "none", "reason": UNKNOWN_END})


def job_ends(gone: Sequence[WorkloadState], accounted: Mapping[str, FinishedJob],
             recorded: Mapping[str, Mapping[str, Any] | None],
             contract: str) -> list[TokenDecision]:
    """`job_end` for every row in `gone` (active rows whose job squeue no longer lists);
    `accounted` and `recorded` are keyed by job id."""
    return [job_end(row, accounted.get(str(row.job_id)), recorded.get(str(row.job_id)),
                    contract)
            for row in gone]
