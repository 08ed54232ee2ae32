"""Slurm power saving as claims (design: Operating), pure: which workload a resumed CLOUD node
serves,
what a set of node names asks for, and which claims lose which nodes when Slurm hands them back.

A claim of Slurm nodes is the sum of their shapes (cpu millicores, memory bytes, GPUs under the
configured resource name), one "pod" per node; the planner then picks each node's pool.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from scoctl.core.intake.slurm import expand_hostlist
from scoctl.core.model import ClaimRecord, SlurmNode
from scoctl.errors import UsageError

POWER_DOWN = "POWER_DOWN_FORCE"  # back to powered-down, never DOWN: Slurm can resume it again
RESUME = "SLURM_POWER_RESUME"
SUSPEND = "SLURM_POWER_SUSPEND"
RESUME_FAIL = "SLURM_POWER_RESUME_FAIL"
ACTIONS = (RESUME, SUSPEND, RESUME_FAIL)
# why the nodes of each hand-back leave their claims (in SLURM_NODES_RELEASED events)
RELEASE_REASONS = {SUSPEND: "suspended by Slurm power saving",
                   RESUME_FAIL: "resume failed (ResumeTimeout)"}


@dataclass(frozen=True)
class PowerRequest:
    """What one of Slurm's power-saving programs asked, as it travels through the spool:
    `action` (resume, suspend, resume failed), the node names, the workload a ``--workload``
    named, and the job each resumed node is for (from Slurm's resume file)."""

    action: str
    nodes: tuple[str, ...]
    workload: str | None = None
    jobs: Mapping[str, str] = field(default_factory=dict)

    def detail(self) -> dict[str, Any]:
        """The spool event's detail."""
        return {"nodes": list(self.nodes), "jobs": dict(self.jobs)}


def request_of(action: str, workload: str, detail: Mapping[str, Any]) -> PowerRequest | None:
    """A spooled power request back as a value; None when it is not one scoctl wrote."""
    nodes = detail.get("nodes")
    jobs = detail.get("jobs") or {}
    if action not in ACTIONS or not isinstance(nodes, list) or not isinstance(jobs, dict):
        return None
    return PowerRequest(action, tuple(str(n) for n in nodes), workload or None,
                        {str(k): str(v) for k, v in jobs.items()})


def node_names(hostlist: str) -> tuple[str, ...]:
    """A Slurm hostlist (``gpu-a100-[1-2],local1``) as node names; UsageError naming
    HOSTLIST when it is not one."""
    try:
        names = tuple(expand_hostlist(hostlist))
    except ValueError as exc:
        raise UsageError(f"HOSTLIST {hostlist!r}: not a hostlist ({exc})") from exc
    if not names or any(not n or any(c in n for c in "[], ") for n in names):
        raise UsageError(f"HOSTLIST {hostlist!r}: not a hostlist")
    return names


def resume_file_jobs(data: Any) -> dict[str, str]:
    """node → job id from the JSON of Slurm's SLURM_RESUME_FILE (ResumeProgram only)."""
    out: dict[str, str] = {}
    jobs = data.get("jobs") if isinstance(data, dict) else None
    for job in jobs if isinstance(jobs, list) else []:
        if not isinstance(job, dict):
            continue
        # Slurm 22.05+ lists a job's `nodes_alloc` (and the `nodes_resume` among them)
        listed = job.get("nodes_alloc") or job.get("nodes") or job.get("nodes_resume")
        for node in expand_hostlist(str(listed or "")):
            out.setdefault(node, str(job.get("job_id")))
    return out


def resume_gang_size(nodes: Iterable[str], jobs: Mapping[str, str],
                     node_counts: Mapping[str, int]) -> int:
    """The gang a resume of `nodes` serves (design: Gangs): of the resume file's jobs (`jobs`:
    node → job id), the most nodes one asks for — Slurm's count (`node_counts`: job id →
    NumNodes, for the jobs Slurm still knows), since a resume lists only the nodes not up yet,
    else how many of `nodes` the file gives it — when that is more than one; else 0."""
    per_job = Counter(jobs[n] for n in nodes if n in jobs)
    most = max((max(listed, node_counts.get(job, 0)) for job, listed in per_job.items()),
               default=0)
    return most if most > 1 else 0


@dataclass(frozen=True)
class NodeRule:
    """A configured Slurm workload and the partition whose jobs are its demand."""

    workload: str
    partition: str | None


@dataclass(frozen=True)
class ClaimRelease:
    """A claim that loses `gone` and keeps `keep` of its Slurm node names."""

    claim: ClaimRecord
    keep: tuple[str, ...]
    gone: tuple[str, ...]


def node_shape(node: SlurmNode, gres_map: Mapping[str, str],
               gpu_resource: str) -> dict[str, int]:
    """A Slurm node's shape as a claim counts it: cpu millicores, memory bytes, GPUs."""
    shape = {"cpu": node.cpus * 1000, "memory": node.memory_mb * 2**20}
    gpus = node.gpus(gres_map=gres_map, gpu_resource=gpu_resource)
    if gpus:
        shape[gpu_resource] = gpus
    return shape


def nodes_demand(nodes: Sequence[str], shapes: Mapping[str, Mapping[str, int]]
                 ) -> tuple[dict[str, int], dict[str, int]]:
    """What node names ask for: the sum of their shapes and the largest one (per resource)."""
    requests: dict[str, int] = {}
    largest: dict[str, int] = {}
    for name in nodes:
        for res, amount in shapes.get(name, {}).items():
            requests[res] = requests.get(res, 0) + amount
            largest[res] = max(largest.get(res, 0), amount)
    return requests, largest


def resume_workload(node: SlurmNode, *, workload: str | None, job_owner: str | None,
                    rules: Sequence[NodeRule]) -> str:
    """The workload a node Slurm resumes serves: the one asked for, else the one tracking the
    job it is resumed for, else the configured workload of its partition, else
    ``slurm-<partition>``."""
    if workload:
        return workload
    if job_owner:
        return job_owner
    for rule in rules:
        if rule.partition in node.partitions:
            return rule.workload
    return f"slurm-{node.partitions[0] if node.partitions else 'cloud'}"


def releases(claims: Sequence[ClaimRecord], names: Collection[str]) -> list[ClaimRelease]:
    """The claims holding any of `names`, with what each keeps and loses."""
    wanted = set(names)
    out = []
    for claim in claims:
        gone = tuple(sorted(set(claim.nodes) & wanted))
        if gone:
            out.append(ClaimRelease(claim, tuple(sorted(set(claim.nodes) - wanted)), gone))
    return out
