"""Kubernetes demand rules (pure): effective pod requests, provisionable pods, the workload a pod
belongs to, node capacity and quota blocks.

Everything here works on plain frozen values (`scoctl.core.model.kubernetes`, built by the
Kubernetes adapter from API objects) and returns values: no I/O, no clock, no logging, no
`kubernetes` import. Quantities are canonical integers (`scoctl.core.quantity`): cpu in
millicores, memory in bytes, accelerators as counts.

The rules follow the Kubernetes sources:

* effective request: `component-helpers/resource/helpers.go` (`PodRequests`): regular containers
  summed; init containers by the sidecar rule (KEP-753); pod-level requests override cpu/memory/
  hugepages; pod overhead added last;
* provisionable: Karpenter's `IsProvisionable` plus scheduling gates;
* quota blocks: the ReplicaSet controller's `ReplicaFailure` condition (reason `FailedCreate`)
  carrying the quota admission text (`exceeded quota: …` or `failed quota: …`), copied to the
  Deployment by the deployment controller.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from scoctl.core.model import (
    Condition,
    DeploymentInfo,
    EventInfo,
    Kind,
    NodeInfo,
    OwnerRef,
    PodInfo,
    ReplicaSetInfo,
    Taint,
    Toleration,
    WorkloadRef,
)
from scoctl.core.model.vocabulary import LABEL_WORKLOAD
from scoctl.core.quantity import CPU, MEMORY, Resources, add, fits, maximum

KSERVE_ISVC_LABEL = "serving.kserve.io/inferenceservice"
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
RECLAIMABLE_TAINT_KEY = "reclaimable"

_QUOTA_TEXT = re.compile(r"(exceeded|failed) quota", re.IGNORECASE)
# A pod-level request overrides the container aggregate only for these (helpers.go
# `supportedPodLevelResources`); accelerators stay container-derived.
_POD_LEVEL = (CPU, MEMORY)


# --- effective request ---------------------------------------------------------------------------


def effective_request(pod: PodInfo) -> dict[str, int]:
    """The pod's effective request, as kube-scheduler and quota compute it.

    ``max(Σ containers + Σ sidecars, max_i(init_i + sidecars started before i))``, then pod-level
    cpu/memory requests (when set) replace the aggregate, then the RuntimeClass overhead is added.
    The classic fit.go example (init 2cpu/1G and 2cpu/3G; containers 2cpu/1G and 1cpu/1G) gives
    cpu 3, memory 3G.
    """
    result: dict[str, int] = {}
    for container in pod.containers:
        result = add(result, container.requests)
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for init in pod.init_containers:
        if init.restart_policy == "Always":
            result = add(result, init.requests)
            sidecars = add(sidecars, init.requests)
            use = sidecars
        else:
            use = add(init.requests, sidecars)
        init_max = maximum(init_max, use)
    result = maximum(result, init_max)
    for name in pod.pod_requests:
        if name in _POD_LEVEL or name.startswith("hugepages-"):
            result[name] = pod.pod_requests[name]
    result = add(result, pod.overhead)
    return {k: v for k, v in result.items() if v}


# --- provisionable pods --------------------------------------------------------------------------


def is_unschedulable(pod: PodInfo) -> bool:
    """PodScheduled=False with reason Unschedulable (not SchedulingGated or another reason)."""
    cond = pod.condition("PodScheduled")
    return cond is not None and cond.status == "False" and cond.reason == "Unschedulable"


def is_node_bound(pod: PodInfo) -> bool:
    """A DaemonSet pod, or a static pod (owned by its Node, or its mirror): it lives and dies
    with its node, so it never moves off it nor asks for more capacity."""
    return (any(owner.kind in ("DaemonSet", "Node") for owner in pod.owners)
            or MIRROR_ANNOTATION in pod.annotations)


def must_move(pod: PodInfo) -> bool:
    """A pod that keeps its node busy and that a drain must move off it: not finished
    (Succeeded, Failed) and not node-bound (`is_node_bound`). The one rule for reconcile's
    idle check, the notice drain and `Cluster.drain`."""
    return pod.phase not in ("Succeeded", "Failed") and not is_node_bound(pod)


def is_provisionable(pod: PodInfo) -> bool:
    """A pod more capacity could help: unschedulable, unbound, not being preempted for, not a
    DaemonSet or static/mirror pod, not scheduling-gated and not being deleted."""
    # the plain fields first, then the condition and the owners: this runs for every pod
    if pod.node_name or pod.nominated_node_name or pod.scheduling_gates or pod.deleting:
        return False
    return is_unschedulable(pod) and not is_node_bound(pod)


def demand_shape(pod: PodInfo) -> tuple[object, ...]:
    """What a pod's demand is made of (requests, overhead, the labels and tolerations that
    name its workload and pools): two versions of a pending pod with the same shape are the
    same demand, whatever their status conditions say."""
    return (pod.containers, pod.init_containers, tuple(sorted(pod.pod_requests.items())),
            tuple(sorted(pod.overhead.items())), tuple(sorted(pod.labels.items())),
            pod.tolerations, pod.owners)


def scheduling_message(pod: PodInfo) -> str:
    """The scheduler's message on the PodScheduled condition ('' when none)."""
    cond = pod.condition("PodScheduled")
    return cond.message if cond is not None else ""


# --- workloads -----------------------------------------------------------------------------------


def _controller(pod: PodInfo) -> OwnerRef | None:
    owners = pod.owners
    return next((o for o in owners if o.controller), owners[0] if owners else None)


def _deployment_of_replicaset(rs_name: str, template_hash: str) -> str:
    """The Deployment name a ReplicaSet called `<deployment>-<pod-template-hash>` belongs to."""
    if template_hash and rs_name.endswith("-" + template_hash):
        return rs_name[: -len(template_hash) - 1]
    head, sep, _ = rs_name.rpartition("-")
    return head if sep and head else rs_name


def _owner_workload(pod: PodInfo) -> tuple[str, Kind, str] | None:
    isvc = pod.labels.get(KSERVE_ISVC_LABEL)
    if isvc:
        return isvc, "inference", "inferenceservice"
    owner = _controller(pod)
    if owner is not None and owner.kind == "ReplicaSet":
        template_hash = pod.labels.get(POD_TEMPLATE_HASH_LABEL, "")
        return _deployment_of_replicaset(owner.name, template_hash), "deployment", "deployment"
    if owner is not None and owner.kind == "Job":
        return owner.name, "job", "job"
    for label in JOB_NAME_LABELS:
        if pod.labels.get(label):
            return pod.labels[label], "job", "job"
    if owner is not None and owner.kind in ("Deployment", "StatefulSet", "ReplicationController"):
        return owner.name, "deployment", owner.kind.lower()
    return None


def workload_of(pod: PodInfo, label: str = LABEL_WORKLOAD) -> WorkloadRef | None:
    """The workload a pod belongs to, or None when it belongs to none scoctl can name.

    The `label` (default ``sco/workload``) names it when present; else the KServe label
    ``serving.kserve.io/inferenceservice`` (kind inference), the Deployment owning its ReplicaSet
    (kind deployment), or its Job (kind job). The kind always comes from the ownership; a
    labelled bare pod runs once, so it counts as a job.
    """
    owned = _owner_workload(pod)
    named = pod.labels.get(label, "")
    if named:
        return WorkloadRef(named, owned[1] if owned else "job", pod.namespace, "label")
    if owned is None:
        return None
    return WorkloadRef(owned[0], owned[1], pod.namespace, owned[2])


# --- node capacity -------------------------------------------------------------------------------


def max_allocatable(nodes: Iterable[NodeInfo], resource: str) -> int | None:
    """The largest allocatable `resource` on any node; None (not 0) when no node has it."""
    best: int | None = None
    for node in nodes:
        amount = node.allocatable.get(resource, 0)
        if amount > 0 and (best is None or amount > best):
            best = amount
    return best


def node_fits(request: Resources, nodes: Iterable[NodeInfo]) -> NodeInfo | None:
    """The first node (by name) whose allocatable holds every requested resource at once, or None.

    This is capacity only (the whole node, as fit.go's `Unresolvable` test): taints, affinity and
    what is already running are not considered, so None means "too big for every node".
    """
    for node in sorted(nodes, key=lambda n: n.name):
        if fits(request, node.allocatable):
            return node
    return None


def tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """True when one of the tolerations tolerates the taint (core/v1 `ToleratesTaint`)."""
    for tol in tolerations:
        if tol.effect and tol.effect != taint.effect:
            continue
        if not tol.key and tol.operator == "Exists":
            return True
        if tol.key != taint.key:
            continue
        if tol.operator == "Exists" or (tol.operator in ("", "Equal") and tol.value == taint.value):
            return True
    return False


_RECLAIMABLE_TAINT = Taint(RECLAIMABLE_TAINT_KEY, "NoSchedule", "true")


def tolerates_reclaimable(pod: PodInfo) -> bool:
    """Whether the pod may run on reclaimable nodes (taint ``reclaimable=true:NoSchedule``)."""
    return tolerates(pod.tolerations, _RECLAIMABLE_TAINT)


# --- quota blocks --------------------------------------------------------------------------------


def is_quota_message(message: str) -> bool:
    """The quota admission text: ``exceeded quota: …`` or ``failed quota: …`` (any case)."""
    return bool(_QUOTA_TEXT.search(message))


def quota_failure(conditions: Sequence[Condition]) -> str | None:
    """The message of a true ReplicaFailure condition caused by a ResourceQuota, else None."""
    for cond in conditions:
        if cond.type == "ReplicaFailure" and cond.status == "True":
            if is_quota_message(cond.message):
                return cond.message
    return None


def newest_replicaset(
    deployment: DeploymentInfo, replicasets: Iterable[ReplicaSetInfo]
) -> ReplicaSetInfo | None:
    """The Deployment's ReplicaSet with the highest revision (owned by uid, else by name)."""
    owned = [
        rs
        for rs in replicasets
        if rs.namespace == deployment.namespace
        and any(
            o.kind == "Deployment"
            and ((deployment.uid and o.uid == deployment.uid) or o.name == deployment.name)
            for o in rs.owners
        )
    ]
    if not owned:
        return None
    return max(owned, key=lambda rs: (rs.revision, rs.name))


def deployment_quota_block(
    deployment: DeploymentInfo, replicasets: Iterable[ReplicaSetInfo] = ()
) -> str | None:
    """Why the Deployment cannot create pods because of a quota, or None.

    The Deployment's own ReplicaFailure condition is checked first; the deployment controller
    copies it from the ReplicaSet on its next sync, so the newest ReplicaSet is checked too.
    """
    message = quota_failure(deployment.conditions)
    if message is not None:
        return message
    newest = newest_replicaset(deployment, replicasets)
    return quota_failure(newest.conditions) if newest is not None else None


def events_quota_block(events: Iterable[EventInfo]) -> str | None:
    """A `FailedCreate` Warning event with a quota message (how Jobs show a quota block)."""
    for event in events:
        if event.reason == "FailedCreate" and is_quota_message(event.message):
            return event.message
    return None


def deployment_available(deployment: DeploymentInfo) -> bool:
    """Available=True and every desired replica available — and some replica desired: the API
    calls a Deployment scaled to 0 Available, yet nothing of it runs."""
    cond = next((c for c in deployment.conditions if c.type == "Available"), None)
    return (
        deployment.replicas > 0
        and cond is not None
        and cond.status == "True"
        and deployment.available_replicas >= deployment.replicas
    )
