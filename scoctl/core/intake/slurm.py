"""Slurm intake (pure): jobs into claims, job states into status tokens.

Nothing here does I/O, reads a clock or logs. The watch stage gathers plain values (every job
`squeue` knows, the nodes, the workload rows) into a `SlurmSnapshot`, calls
`decide_slurm_intake`, and records what it returns.

Slurm (design: Words-Statuses, DD-0018 §3):

* demand: pending jobs of managed workloads (a ``sco:workload=<slug>`` comment, or the config's
  account / partition mapping) that more capacity could start, plus running jobs on CLOUD nodes
  (the nodes Slurm resumed for them), normalised per node from CPUs, memory per node or per CPU,
  GRES and the node count; a job needing more than one node makes its workload's claim a gang
  of that many members (design: Gangs: jobs of different node counts, the largest);
* tracked jobs (rows with a job id): ``PENDING`` → ``SLURM_JOB_QUEUED`` with the reason, once per
  distinct reason; a reason waiting cannot clear gets the gate's capacity check
  (`core.gate.decide_slurm`) and ``SLURM_JOB_SCHEDULING_FAILED`` when nothing could ever hold
  it; other states → ``SLURM_JOB_STATUS`` when the mapped status changes. A job that left
  ``squeue`` is not judged here: `core.jobend` ends its row (accounting, the EpilogSlurmctld
  hook's record, or "final state unknown").
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from scoctl.core.gang import slurm_gang_size
from scoctl.core.gate import OVER_CAPACITY, GateRequest, decide_slurm
from scoctl.core.gres import gpu_count, to_resources
from scoctl.core.intake.common import (
    Capacity,
    ClaimDecision,
    IntakeDecision,
    TokenDecision,
    WorkloadRule,
    WorkloadState,
    _contract,
    _rule_for,
)
from scoctl.core.model import SlurmJob, SlurmNode, is_slug
from scoctl.core.model.vocabulary import WorkloadStatus
from scoctl.core.quantity import CPU, MEMORY
from scoctl.core.syntax import split_top_level
from scoctl.core.tokens import HOPELESS_SLURM_REASONS, INACTIVE_STATUSES, map_token

MIB = 2**20
# Slurm pending reasons that more nodes cannot help: the job is not demand (yet).
NOT_DEMAND_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin", "Dependency", "BeginTime",
                                "JobArrayTaskLimit", "AssocGrpJobsLimit"}) | HOPELESS_SLURM_REASONS
SLURM_HOLDING_STATES = frozenset({"RUNNING", "CONFIGURING"})
SLURM_FINISHED_STATES = frozenset({"COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL",
                                   "PREEMPTED", "BOOT_FAIL", "OUT_OF_MEMORY", "DEADLINE"})
SLURM_FAILED_TOKEN = "SLURM_JOB_SCHEDULING_FAILED"


# --- values ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlurmPolicy:
    """The config's Slurm rules for intake."""

    workloads: tuple[WorkloadRule, ...] = ()
    contracts: frozenset[str] = frozenset({"T1"})
    default_contract: str = "T1"
    gres_map: Mapping[str, str] = field(default_factory=lambda: {"gpu": "nvidia.com/gpu"})
    gpu_resource: str = "nvidia.com/gpu"
    capacity: Capacity = field(default_factory=Capacity)


@dataclass(frozen=True)
class SlurmSnapshot:
    """Every job `squeue` knows, every node (None when unreadable), and the workload rows."""

    jobs: tuple[SlurmJob, ...] = ()
    nodes: tuple[SlurmNode, ...] | None = ()
    workloads: Mapping[str, WorkloadState] = field(default_factory=dict)
    tracked: tuple[WorkloadState, ...] = ()  # active rows with a job id
    known_jobs: frozenset[str] = frozenset()  # job ids some row (of any status) already has
    claims: frozenset[str] = frozenset()  # workloads holding a non-empty slurm claim now


# --- Slurm ----------------------------------------------------------------------------------------


def parse_sco_comment(comment: str) -> dict[str, str]:
    """``sco:workload=<slug>`` (or ``sco:<slug>``) and ``sco:contract=<tier>`` items of a job
    comment (separated by spaces, commas or semicolons)."""
    out: dict[str, str] = {}
    for item in re.split(r"[\s,;]+", comment or ""):
        if not item.lower().startswith("sco:"):
            continue
        rest = item[4:]
        key, sep, value = rest.partition("=")
        if sep:
            out[key.strip().lower()] = value.strip()
        elif rest:
            out.setdefault("workload", rest.strip())
    return out


def expand_hostlist(text: str) -> list[str]:
    """Slurm's hostlist expression as names: ``gpu-a100-[1-2],local1`` → three names
    (ranges keep zero padding: ``n[01-03]``)."""
    names: list[str] = []
    try:
        parts = split_top_level(text or "", "[]")
    except ValueError:
        parts = [text]  # not a hostlist expression: one name, as Slurm printed it
    for expr in (p.strip() for p in parts):
        if not expr or expr.lower() in ("(null)", "none"):
            continue
        match = re.match(r"^(.*?)\[([^\]]*)\](.*)$", expr)
        if match is None:
            names.append(expr)
            continue
        head, ranges, tail = match.groups()
        for tail_name in expand_hostlist(tail) if "[" in tail else [tail]:
            for piece in ranges.split(","):
                low, sep, high = piece.partition("-")
                if sep:
                    width = len(low)
                    for number in range(int(low), int(high) + 1):
                        names.append(f"{head}{number:0{width}d}{tail_name}")
                else:
                    names.append(f"{head}{piece}{tail_name}")
    return names


def job_node_shape(job: SlurmJob, gres_map: Mapping[str, str]) -> tuple[dict[str, int], int]:
    """One node's worth of a job in canonical units, and how many nodes it asks for.

    CPUs per node = ⌈CPUs / nodes⌉; memory per node (``--mem``) or per CPU (``--mem-per-cpu``)
    times those CPUs, in MiB (Slurm's MB); GRES per node plus ⌈per-job GRES / nodes⌉, named
    through `gres_map` (``gpu`` → ``nvidia.com/gpu``).
    """
    nodes = max(1, job.node_count)
    cpus = max(1, math.ceil(job.cpus / nodes)) if job.cpus else 1
    memory_mb = job.memory_per_node_mb or ((job.memory_per_cpu_mb or 0) * cpus)
    shape: dict[str, int] = {CPU: cpus * 1000}
    if memory_mb:
        shape[MEMORY] = memory_mb * MIB
    for name, count in to_resources(job.gres_per_node, gres_map).items():
        shape[name] = shape.get(name, 0) + count
    for name, count in to_resources(job.gres_per_job, gres_map).items():
        shape[name] = shape.get(name, 0) + math.ceil(count / nodes)
    return shape, nodes


def job_gate_request(job: SlurmJob, gres_map: Mapping[str, str],
                     gpu_resource: str) -> GateRequest:
    """The gate's view of one node's worth of a job (whole CPUs, MB, a GPU count and type)."""
    nodes = max(1, job.node_count)
    cpus = max(1, math.ceil(job.cpus / nodes)) if job.cpus else 1
    memory_mb = job.memory_per_node_mb or ((job.memory_per_cpu_mb or 0) * cpus)
    entries = job.gres_per_node
    gpus = gpu_count(entries, None, gres_map, gpu_resource) + math.ceil(
        gpu_count(job.gres_per_job, None, gres_map, gpu_resource) / nodes)
    gpu_type = next((g.type for g in (*entries, *job.gres_per_job) if g.type and
                     gpu_count((g,), None, gres_map, gpu_resource)), None)
    return GateRequest(cpus=cpus, memory_mb=memory_mb, gpus=gpus, gpu_type=gpu_type,
                       gpu_resource=gpu_resource)


def _slurm_workload(job: SlurmJob, policy: SlurmPolicy,
                    by_job: Mapping[str, WorkloadState]) -> tuple[str, str, str] | None:
    """(slug, contract, how) for a managed job, or None."""
    tracked = by_job.get(str(job.job_id))
    tags = parse_sco_comment(job.comment)
    contract_tag = tags.get("contract")
    if tracked is not None:
        return tracked.slug, _contract(contract_tag, policy.contracts, policy.default_contract), \
            "tracked"
    if tags.get("workload"):
        rule = _rule_for(policy.workloads, tags["workload"], None)
        fallback = rule.contract if rule else policy.default_contract
        return tags["workload"], _contract(contract_tag, policy.contracts, fallback), "comment"
    for rule in policy.workloads:
        if rule.source != "slurm":
            continue
        if rule.account and job.account == rule.account and (
                rule.partition is None or rule.partition == job.partition):
            return rule.name, rule.contract, "account"
    for rule in policy.workloads:
        if rule.source == "slurm" and rule.partition and rule.account is None \
                and job.partition == rule.partition:
            return rule.name, rule.contract, "partition"
    return None


def decide_slurm_intake(snap: SlurmSnapshot, policy: SlurmPolicy) -> IntakeDecision:
    """Claims and status tokens for the Slurm side (see the module docstring)."""
    by_job = {t.job_id: t for t in snap.tracked if t.job_id}
    cloud_nodes = {n.name for n in snap.nodes or () if n.cloud}
    sums: dict[str, dict[str, int]] = {}
    largest: dict[str, dict[str, int]] = {}
    counts: dict[str, int] = {}
    held: dict[str, set[str]] = {}
    contracts: dict[str, str] = {}
    submitted: dict[str, list[float]] = {}
    gangs: dict[str, set[int]] = {}
    warnings: list[str] = []
    tokens: list[TokenDecision] = []
    discovered: dict[str, SlurmJob] = {}

    for job in snap.jobs:
        mapped = _slurm_workload(job, policy, by_job)
        if mapped is None:
            continue
        slug, contract, how = mapped
        if not is_slug(slug):
            warnings.append(f"job {job.job_id}: workload {slug!r} is not a slug; skipped")
            continue
        state = snap.workloads.get(slug)
        if how == "comment" and job.state in ("PENDING", *SLURM_HOLDING_STATES) \
                and str(job.job_id) not in snap.known_jobs \
                and (state is None or state.status in INACTIVE_STATUSES) \
                and slug not in discovered:
            discovered[slug] = job  # a new single-job workload: track it from now on
        shape, nodes = job_node_shape(job, policy.gres_map)
        if job.state == "PENDING" and job.reason not in NOT_DEMAND_REASONS:
            count = nodes
            names: list[str] = []
        elif job.state in SLURM_HOLDING_STATES:
            names = [n for n in expand_hostlist(job.nodes) if n in cloud_nodes]
            count = len(names)
        else:
            continue
        if not count:
            continue
        total = sums.setdefault(slug, {})
        for name, amount in shape.items():
            total[name] = total.get(name, 0) + amount * count
        big = largest.setdefault(slug, {})
        for name, amount in shape.items():
            big[name] = max(big.get(name, 0), amount)
        counts[slug] = counts.get(slug, 0) + count
        held.setdefault(slug, set()).update(names)
        contracts.setdefault(slug, contract)
        if size := slurm_gang_size(nodes):
            gangs.setdefault(slug, set()).add(size)
        if job.submitted is not None:
            submitted.setdefault(slug, []).append(job.submitted)

    for slug, sizes in sorted(gangs.items()):
        if len(sizes) > 1:
            warnings.append(f"workload {slug}: jobs need {', '.join(map(str, sorted(sizes)))} "
                            f"nodes; planned as gangs of {max(sizes)}")
    claims = [ClaimDecision(workload=slug, contract=contracts[slug], kind="job", source="slurm",
                            requests=sums[slug], largest_pod=largest[slug], pods=counts[slug],
                            nodes=tuple(sorted(held[slug])),
                            created=tuple(submitted.get(slug, ())),
                            gang=max(gangs.get(slug, {0})))
              for slug in sorted(sums)]
    for slug in sorted(snap.claims - set(sums)):
        claims.append(ClaimDecision(workload=slug, contract=policy.default_contract, kind="job",
                                    source="slurm", requests={}, largest_pod={}, pods=0))

    jobs = {str(j.job_id): j for j in snap.jobs}
    watched = [(t, jobs.get(t.job_id or "")) for t in snap.tracked]
    for slug, job in sorted(discovered.items()):
        tags = parse_sco_comment(job.comment)
        rule = _rule_for(policy.workloads, slug, None)
        contract = _contract(tags.get("contract"), policy.contracts,
                             rule.contract if rule else policy.default_contract)
        fresh = WorkloadState(slug=slug, status=WorkloadStatus.PENDING, kind="job", source="slurm",
                              job_id=str(job.job_id))
        for decision in _slurm_tokens(fresh, job, snap, policy):
            tokens.append(replace(decision, contract=contract))
    for row, tracked_job in watched:
        if tracked_job is None:
            continue  # left squeue: `core.jobend` ends its row
        tokens.extend(_slurm_tokens(row, tracked_job, snap, policy))
    slugs = set(sums) | set(discovered) | {t.slug for t in snap.tracked}
    return IntakeDecision(claims=tuple(claims), tokens=tuple(tokens), warnings=tuple(warnings),
                          workloads=len(slugs))


def _slurm_tokens(state: WorkloadState, job: SlurmJob, snap: SlurmSnapshot,
                  policy: SlurmPolicy) -> list[TokenDecision]:
    def make(token: str, detail: dict[str, Any]) -> TokenDecision:
        return TokenDecision(slug=state.slug, token=token, detail=detail, kind="job",
                             source="slurm", contract=policy.default_contract,
                             job_id=str(job.job_id))

    out: list[TokenDecision] = []
    base = {"job_id": str(job.job_id), "partition": job.partition}
    if job.state == "PENDING":
        reason = job.reason or "None"
        if reason != state.last_queued_reason:
            out.append(make("SLURM_JOB_QUEUED", {**base, "reason": reason}))
        elif state.status != WorkloadStatus.QUEUED:
            # the same reason again after running (a requeue): the state says queued
            out.append(make("SLURM_JOB_STATUS", {**base, "state": "PENDING", "reason": reason}))
        if reason in HOPELESS_SLURM_REASONS:
            request = job_gate_request(job, policy.gres_map, policy.gpu_resource)
            partitions = {p for p in job.partition.split(",") if p}  # pending: may be a list
            nodes = None if snap.nodes is None else [
                n for n in snap.nodes if partitions.intersection(n.partitions)]
            capacity = policy.capacity
            verdict = decide_slurm(request, nodes, capacity.pools, capacity.flavors,
                                   elastic=capacity.elastic, partition=job.partition or None,
                                   gres_map=policy.gres_map, node_reserve=capacity.node_reserve,
                                   unreadable="sinfo unreadable" if nodes is None else None)
            if verdict.verdict == OVER_CAPACITY:
                out.append(make(SLURM_FAILED_TOKEN, {
                    **base, "reason": reason, "gate": verdict.reason,
                    "request": {"cpus": request.cpus, "memory_mb": request.memory_mb,
                                "gpus": request.gpus, "gpu_type": request.gpu_type},
                    "node": verdict.as_dict()["node"]}))
        return out
    state_name = job.state.split()[0] if job.state else ""
    meaning = map_token("SLURM_JOB_STATUS", {"state": state_name})
    if meaning.status is not None and meaning.status != state.status:
        detail: dict[str, Any] = {**base, "state": state_name}
        if job.nodes:
            detail["nodes"] = job.nodes
        out.append(make("SLURM_JOB_STATUS", detail))
    return out
