"""The Slurm power stage (DESIGN §11): Slurm's power saving meets the fleet.

read: the CLOUD nodes Slurm resumes or hands back (ResumeProgram, SuspendProgram,
ResumeFailProgram) and the nodes acquire or reconcile give up on, Slurm's view of those nodes ·
decide: `core.slurm_power` (the workload a node serves, what node names ask for, which claims
lose which nodes) · record: the claims (source ``slurm``, one "pod" per node), the marks of
handed-back nodes whose servers reconcile deletes, ``SLURM_NODES_RESUME`` /
``SLURM_NODES_RELEASED`` events · act: ``scontrol update State=POWER_DOWN_FORCE`` (never DOWN)
for the nodes of launches that failed for sure.

Plan and acquire create one server per resumed node name; reconcile deletes the servers of
handed-back nodes. This stage never calls another one: `scoctl.stages.run` composes them.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from scoctl.config.schema import Config
from scoctl.core.fleet import LIVE_STATUSES
from scoctl.core.model import NodeRelease
from scoctl.core.slurm_power import (
    NodeRule,
    node_shape,
    nodes_demand,
    releases,
    resume_workload,
)
from scoctl.core.timefmt import rfc3339
from scoctl.errors import ApiError
from scoctl.stages.slurm_marks import (
    node_shapes,
    set_node_shapes,
    set_suspended_nodes,
    suspended_nodes,
)
from scoctl.state import Store

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler

log = logging.getLogger(__name__)

POWER_DOWN = "POWER_DOWN_FORCE"


def _gpu_resource(config: Config) -> str:
    return config.slurm.gres_map.get("gpu", config.kubernetes.gpu_resource)


def _rules(config: Config) -> list[NodeRule]:
    return [NodeRule(spec.name, spec.partition) for spec in config.workloads
            if spec.source == "slurm"]


def _put_claim(store: Store, workload: str, nodes: Sequence[str],
               shapes: Mapping[str, Mapping[str, int]], contract: str,
               tolerates: bool) -> None:
    requests, largest = nodes_demand(nodes, shapes)
    store.put_claim(workload, contract=contract, requests=requests, largest_pod=largest,
                    pods=len(nodes), source="slurm", tolerates_reclaimable=tolerates,
                    nodes=list(nodes))


def resume_nodes(config: Config, store: Store, scheduler: BatchScheduler,
                 names: Sequence[str], *, workload: str | None = None,
                 jobs: Mapping[str, str] | None = None) -> dict[str, list[str]]:
    """Slurm asked to resume `names`: add them to their workloads' claims (one server per node
    name follows from plan and acquire). Returns the nodes added per workload.

    The workload is `workload`, else the one tracking a job of the resume file that runs on
    the node (`jobs[node] = job id`), else the config's Slurm workload for the node's
    partition, else ``slurm-<partition>``. Raises the scheduler's errors when Slurm's nodes
    cannot be read.
    """
    known = {n.name: n for n in scheduler.nodes()}
    shapes = node_shapes(store)
    by_workload: dict[str, list[str]] = {}
    for name in names:
        node = known.get(name)
        if node is None:
            log.warning("slurm resume: unknown node %s", name)
            continue
        shapes[name] = node_shape(node, config.slurm.gres_map, _gpu_resource(config))
        job = (jobs or {}).get(name)
        owner = store.workload_by_job(job) if job and workload is None else None
        target = resume_workload(node, workload=workload,
                                 job_owner=owner.slug if owner else None, rules=_rules(config))
        by_workload.setdefault(target, []).append(name)
    with store.transaction():
        set_node_shapes(store, shapes)
        set_suspended_nodes(store, suspended_nodes(store) - set(names))
        for slug, added in sorted(by_workload.items()):
            wanted = config.workload(slug)
            old = store.claim(slug)
            nodes = sorted(set(old.nodes if old else ()) | set(added))
            contract = wanted.contract if wanted else (old.contract if old else "T1")
            _put_claim(store, slug, nodes, shapes, contract,
                       wanted.tolerates_reclaimable if wanted else True)
            store.append_event(slug, "SLURM_NODES_RESUME", "info", None,
                               {"nodes": ",".join(sorted(added))})
    return by_workload


def release_nodes(store: Store, handed_back: Iterable[NodeRelease], *,
                  suspend: bool) -> dict[str, list[str]]:
    """Slurm nodes handed back: drop them from their claims (one ``SLURM_NODES_RELEASED``
    event per claim and reason) and, with `suspend` (Slurm's SuspendProgram or
    ResumeFailProgram), mark them so the next reconcile deletes their servers without a
    drain. Returns the nodes dropped per workload."""
    reasons: dict[str, list[str]] = {}
    for item in handed_back:
        reasons.setdefault(item.reason, []).append(item.node)
    dropped: dict[str, list[str]] = {}
    shapes = node_shapes(store)
    with store.transaction():
        for reason, names in reasons.items():
            for release in releases(store.claims(), names):
                claim = release.claim
                _put_claim(store, claim.workload, release.keep, shapes, claim.contract,
                           claim.tolerates_reclaimable)
                dropped.setdefault(claim.workload, []).extend(release.gone)
                store.append_event(claim.workload, "SLURM_NODES_RELEASED", "info", None,
                                   {"nodes": ",".join(release.gone), "reason": reason})
            if suspend:
                _mark_suspended(store, names)
    return {slug: sorted(nodes) for slug, nodes in dropped.items()}


def _mark_suspended(store: Store, names: Collection[str]) -> None:
    instances = store.instances()
    wanted = set(names)
    live = {i.node_name for i in instances if i.node_name and i.status in LIVE_STATUSES}
    set_suspended_nodes(store, suspended_nodes(store) | (wanted & live))
    now = rfc3339(store.clock.now())
    for inst in instances:
        if inst.node_name in wanted and inst.status in LIVE_STATUSES and not inst.idle_since:
            store.update_instance(inst.id, idle_since=now)


def power_down(scheduler: BatchScheduler | None, names: Sequence[str], reason: str
               ) -> list[str]:
    """``scontrol update State=POWER_DOWN_FORCE`` (never DOWN) for `names`, so Slurm requeues
    their jobs and can resume the nodes again. Returns one error per node Slurm refused;
    without a scheduler it only warns (ResumeFailProgram powers them down later)."""
    errors: list[str] = []
    for name in names:
        if scheduler is None:
            log.warning("Slurm node %s: %s; no Slurm to power it down, ResumeFailProgram will",
                        name, reason)
            continue
        try:
            scheduler.update_node(name, state=POWER_DOWN, reason=f"scoctl: {reason}")
        except ApiError as exc:
            log.warning("could not power down Slurm node %s: %s", name, exc)
            errors.append(f"{name}: {exc}")
    return errors


def hand_back(store: Store, scheduler: BatchScheduler | None,
              failed: Sequence[NodeRelease]) -> tuple[str, ...]:
    """Nodes whose launch failed for sure (acquire returns them): back to powered-down and out
    of their claims, so Slurm requeues the job. Returns the nodes handed back."""
    for reason in sorted({item.reason for item in failed}):
        power_down(scheduler, [item.node for item in failed if item.reason == reason], reason)
    release_nodes(store, failed, suspend=False)
    return tuple(item.node for item in failed)
