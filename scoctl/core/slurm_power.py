"""Slurm power saving as claims (DESIGN §11), pure: which workload a resumed CLOUD node serves,
what a set of node names asks for, and which claims lose which nodes when Slurm hands them back.

A claim of Slurm nodes is the sum of their shapes (cpu millicores, memory bytes, GPUs under the
configured resource name), one "pod" per node; the planner then picks each node's pool.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from scoctl.core.model import ClaimRecord, SlurmNode


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
