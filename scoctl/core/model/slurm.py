"""Values of the batch-scheduler seam: Slurm nodes (its jobs are in `jobs`: the gate, run
before every ``sbatch``, reads only nodes)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from scoctl.core.gres import DEFAULT_GPU_RESOURCE, DEFAULT_GRES_MAP, Gres, gpu_count

ELASTIC_FLAGS = frozenset({"CLOUD", "POWERED_DOWN", "POWERING_UP", "POWERING_DOWN", "POWER_DOWN"})
# slurmrestd's data-parser versions: scoctl reads v0.0.38 (Slurm 22.05) and every later one
OLDEST_REST_API = (0, 0, 38)
_REST_API = re.compile(r"^v(\d+)\.(\d+)\.(\d+)$")


def rest_api_version(text: str) -> tuple[int, int, int] | None:
    """``v0.0.40`` as (0, 0, 40); None for anything else."""
    match = _REST_API.match(text.strip())
    return (int(match[1]), int(match[2]), int(match[3])) if match else None


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
