"""The batch scheduler seam: the `BatchScheduler` Protocol, its plain values and its errors.

Stages talk to Slurm only through `BatchScheduler` (implemented by `scoctl.adapters.slurm`),
in scoctl's own words. Every method says which errors it raises; they form one tree so a caller
can decide per family:

    ApiError (scoctl.errors)
    └── SchedulerError              the scheduler could not be asked, or gave no usable answer
        ├── SchedulerNotFound       the command is not installed / not executable   (permanent)
        ├── SchedulerTimeout        no answer within the timeout                    (temporary)
        ├── SchedulerFailed         non-zero exit, or an HTTP / Slurm error reply   (temporary)
        ├── SchedulerUnreachable    slurmrestd refused the connection, or said 5xx  (temporary)
        ├── SchedulerAuthFailed     slurmrestd said 401/403, or no token to send    (permanent)
        └── SchedulerUnparseable    output in no shape scoctl knows                 (permanent)

Each leaf is also a `TemporaryError` or a `PermanentError`, as marked. The capacity gate maps
every `SchedulerError` from `nodes()` / `default_partition()` to its ``skipped`` verdict: capacity
that cannot be read never fails a request.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from scoctl.errors import ApiError, PermanentError, TemporaryError

if TYPE_CHECKING:
    from scoctl.core.model import FinishedJob, SlurmJob, SlurmNode


class SchedulerError(ApiError):
    """The batch scheduler could not be asked, or its answer could not be used."""


class SchedulerNotFound(SchedulerError, PermanentError):
    """A Slurm command is not installed or not executable (the message names it)."""


class SchedulerTimeout(SchedulerError, TemporaryError):
    """A Slurm command or slurmrestd did not answer within the timeout."""


class SchedulerFailed(SchedulerError, TemporaryError):
    """A Slurm command exited non-zero, or slurmrestd answered with an error.

    `returncode` is the exit code (or the HTTP status); `detail` the first lines of stderr or
    of the error reply; `slurm_errno` Slurm's error number when it gave one (2017: invalid job).
    """

    def __init__(
        self,
        message: str,
        *,
        returncode: int | None = None,
        detail: str = "",
        slurm_errno: int | None = None,
    ) -> None:
        super().__init__(message)
        self.returncode = returncode
        self.detail = detail
        self.slurm_errno = slurm_errno


class SchedulerUnreachable(SchedulerError, TemporaryError):
    """slurmrestd could not be reached (connection refused, reset) or answered 5xx."""


class SchedulerAuthFailed(SchedulerError, PermanentError):
    """slurmrestd rejected the token (401/403), or no token was configured."""


class SchedulerUnparseable(SchedulerError, PermanentError):
    """The output was in no shape scoctl knows (not JSON, not the format string, bad GRES)."""

@runtime_checkable
class BatchScheduler(Protocol):
    """What scoctl needs from a batch scheduler (Slurm through its CLI or slurmrestd)."""

    def nodes(self, partition: str | None = None) -> list[SlurmNode]:
        """Every node (of `partition`, when given), powered-down CLOUD nodes included, sorted
        by name. An unknown partition gives ``[]``.

        Raises a `SchedulerError` subclass: `SchedulerNotFound`, `SchedulerTimeout`,
        `SchedulerFailed`, `SchedulerUnreachable`, `SchedulerAuthFailed`, `SchedulerUnparseable`.
        """
        ...

    def default_partition(self) -> str | None:
        """The partition jobs go to without ``-p`` (``sinfo`` marks it ``*``); None if none is.

        Raises the same `SchedulerError` subclasses as `nodes`.
        """
        ...

    def jobs(self, partition: str | None = None) -> list[SlurmJob]:
        """Every job Slurm still knows (pending, running, and finished within MinJobAge), of
        `partition` when given, sorted by job id.

        Raises the same `SchedulerError` subclasses as `nodes`.
        """
        ...

    def job(self, job_id: int) -> SlurmJob | None:
        """One job, or None when Slurm no longer knows it.

        Raises the same `SchedulerError` subclasses as `nodes`.
        """
        ...

    def finished(self, job_ids: Sequence[int]) -> list[FinishedJob]:
        """The final state and exit code accounting (``sacct``, slurmdbd) holds for each of
        `job_ids` that it knows; jobs it does not know are left out.

        Raises the same `SchedulerError` subclasses as `nodes`; `SchedulerFailed` when
        accounting does not answer (no slurmdbd: "accounting storage is disabled").
        """
        ...

    def update_node(self, name: str, *, state: str, reason: str | None = None) -> None:
        """``scontrol update NodeName=<name> State=<state> [Reason=<reason>]``.

        `state` is any state scontrol accepts (``RESUME``, ``DRAIN``, ``POWER_DOWN_FORCE``...);
        Slurm requires a reason for ``DRAIN`` and ``DOWN``. Raises `SchedulerFailed` when
        Slurm refuses (unknown node, bad state), or `SchedulerNotFound` / `SchedulerTimeout`.
        """
        ...

    def set_node_address(self, name: str, *, address: str, hostname: str) -> None:
        """``scontrol update NodeName=<name> NodeAddr=<address> NodeHostname=<hostname>``: how
        slurmctld reaches a CLOUD node whose server just came up, without DNS. Raises
        `SchedulerFailed` when Slurm refuses (unknown node, a value it rejects), or
        `SchedulerNotFound` / `SchedulerTimeout`.
        """
        ...

    def requeue(self, job_id: int) -> None:
        """``scontrol requeue <job_id>``: the job goes back to pending (its node is about to be
        reclaimed). Raises `SchedulerFailed` when Slurm refuses (unknown or finished job, a job
        that may not be requeued), or `SchedulerNotFound` / `SchedulerTimeout`.
        """
        ...
