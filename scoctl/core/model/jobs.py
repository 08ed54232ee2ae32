"""Values of the batch-scheduler seam: Slurm jobs as ``squeue`` and ``sacct`` report them, and the
CLOUD nodes to hand back."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from scoctl.core.gres import Gres


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
    submitted: float | None = None  # submit_time, Unix seconds (None: not reported)


@dataclass(frozen=True)
class NodeRelease:
    """A Slurm CLOUD node to hand back: its demand leaves its claim (and, when asked, the node
    goes back to powered-down). Acquire and reconcile return these; the Slurm power stage
    carries them out."""

    node: str
    reason: str


@dataclass(frozen=True)
class FinishedJob:
    """A finished job as accounting (``sacct``) records it: its final state (``COMPLETED``,
    ``CANCELLED``, ``FAILED``, ...; ``CANCELLED by 1000`` is ``CANCELLED``) and exit code
    (``exit:signal``)."""

    job_id: int
    state: str
    exit_code: str = ""
