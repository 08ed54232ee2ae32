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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from scoctl.core.gate import ELASTIC_FLAGS
from scoctl.core.gres import DEFAULT_GPU_RESOURCE, DEFAULT_GRES_MAP, Gres, gpu_count
from scoctl.errors import ApiError, PermanentError, TemporaryError


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


@dataclass(frozen=True)
class SlurmNode:
    """One Slurm node as the gate and the reconciler see it.

    `state` is the base state in lower case (``idle``, ``mixed``, ``allocated``, ``down``, ...);
    `flags` the upper-case state flags (``CLOUD``, ``POWERED_DOWN``, ``DRAIN``,
    ``NOT_RESPONDING``, ...). `memory_mb` is RealMemory. A node in several partitions is one
    value with every partition listed (sorted).
    """

    name: str
    cpus: int
    memory_mb: int
    gres: tuple[Gres, ...] = ()
    partitions: tuple[str, ...] = ()
    state: str = "unknown"
    flags: frozenset[str] = frozenset()
    features: tuple[str, ...] = ()
    reason: str = ""

    @property
    def cloud(self) -> bool:
        """A node power saving can start: CLOUD, or powered down / powering up or down."""
        return bool(self.flags & ELASTIC_FLAGS)

    @property
    def powered_down(self) -> bool:
        """Not running now; Slurm resumes it for a job (``idle~``)."""
        return "POWERED_DOWN" in self.flags

    def gpus(
        self,
        gpu_type: str | None = None,
        gres_map: Mapping[str, str] = DEFAULT_GRES_MAP,
        gpu_resource: str = DEFAULT_GPU_RESOURCE,
    ) -> int:
        """GPUs of this node (of `gpu_type` only, when given)."""
        return gpu_count(self.gres, gpu_type, gres_map, gpu_resource)


@dataclass(frozen=True)
class SlurmJob:
    """One job from ``squeue``. Memory is in MB: Slurm sets either per node or per CPU.

    `reason` is the pending reason (``Resources``, ``Priority``, ``None``, ...); `nodes` the
    allocated nodes as a hostlist expression (empty while pending). `gres_per_node` comes from
    ``--gres`` / ``--gpus-per-node``, `gres_per_job` from ``--gpus``.
    """

    job_id: int
    name: str
    state: str
    reason: str = ""
    partition: str = ""
    account: str = ""
    user: str = ""
    comment: str = ""
    cpus: int = 0
    memory_per_node_mb: int | None = None
    memory_per_cpu_mb: int | None = None
    gres_per_node: tuple[Gres, ...] = ()
    gres_per_job: tuple[Gres, ...] = ()
    node_count: int = 0
    nodes: str = ""


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

    def update_node(self, name: str, *, state: str, reason: str | None = None) -> None:
        """``scontrol update NodeName=<name> State=<state> [Reason=<reason>]``.

        `state` is any state scontrol accepts (``RESUME``, ``DRAIN``, ``POWER_DOWN_FORCE``...);
        Slurm requires a reason for ``DRAIN`` and ``DOWN``. Raises `SchedulerFailed` when
        Slurm refuses (unknown node, bad state), or `SchedulerNotFound` / `SchedulerTimeout`.
        """
        ...
