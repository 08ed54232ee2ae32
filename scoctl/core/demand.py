"""Kubernetes demand: effective pod requests, provisionable pods, workloads and claims (pure).

Everything here works on plain frozen values (built by the Kubernetes adapter from API objects)
and returns values: no I/O, no clock, no logging, no `kubernetes` import. Quantities are canonical
integers (`scoctl.core.quantity`): cpu in millicores, memory in bytes, accelerators as counts.

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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scoctl.core.model import Kind
from scoctl.core.model.vocabulary import LABEL_WORKLOAD
from scoctl.core.quantity import CPU, MEMORY, Resources, add, fits, maximum

KSERVE_ISVC_LABEL = "serving.kserve.io/inferenceservice"
POD_TEMPLATE_HASH_LABEL = "pod-template-hash"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
REVISION_ANNOTATION = "deployment.kubernetes.io/revision"
RECLAIMABLE_TAINT_KEY = "reclaimable"

_QUOTA_TEXT = re.compile(r"(exceeded|failed) quota", re.IGNORECASE)
# A pod-level request overrides the container aggregate only for these (helpers.go
# `supportedPodLevelResources`); accelerators stay container-derived.
_POD_LEVEL = (CPU, MEMORY)


@dataclass(frozen=True)
class Container:
    """One container's requests; `restart_policy == "Always"` on an init container = a sidecar."""

    name: str
    requests: Resources = field(default_factory=dict)
    restart_policy: str | None = None


@dataclass(frozen=True)
class OwnerRef:
    """An ownerReference (the controlling one has `controller=True`)."""

    kind: str
    name: str
    uid: str = ""
    api_version: str = ""
    controller: bool = False


@dataclass(frozen=True)
class Condition:
    """A status condition of a pod, node, Deployment, ReplicaSet, Job or InferenceService."""

    type: str
    status: str
    reason: str = ""
    message: str = ""


@dataclass(frozen=True)
class Toleration:
    """A pod toleration (`operator` Equal or Exists; empty key with Exists tolerates all)."""

    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""


@dataclass(frozen=True)
class Taint:
    """A node taint."""

    key: str
    effect: str
    value: str = ""


@dataclass(frozen=True)
class PodInfo:
    """What scoctl needs to know about a pod."""

    name: str
    namespace: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owners: tuple[OwnerRef, ...] = ()
    containers: tuple[Container, ...] = ()
    init_containers: tuple[Container, ...] = ()
    pod_requests: Resources = field(default_factory=dict)  # spec.resources.requests (pod level)
    overhead: Resources = field(default_factory=dict)
    node_name: str = ""
    nominated_node_name: str = ""
    phase: str = "Pending"
    conditions: tuple[Condition, ...] = ()
    scheduling_gates: tuple[str, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    deleting: bool = False  # metadata.deletionTimestamp is set
    resource_version: str = ""

    def condition(self, type_: str) -> Condition | None:
        """The condition of this type, if the pod has one."""
        for cond in self.conditions:  # a loop, not next(): this runs for every listed pod
            if cond.type == type_:
                return cond
        return None


@dataclass(frozen=True)
class NodeInfo:
    """A Kubernetes node as the gate, watch and reconcile stages see it."""

    name: str
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()
    allocatable: Resources = field(default_factory=dict)
    capacity: Resources = field(default_factory=dict)
    ready: bool = False
    unschedulable: bool = False
    provider_id: str = ""


@dataclass(frozen=True)
class DeploymentInfo:
    """A Deployment: its selector (as a label-selector string), replicas and conditions."""

    name: str
    namespace: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    selector: str = ""
    replicas: int = 1
    ready_replicas: int = 0
    available_replicas: int = 0
    updated_replicas: int = 0
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class ReplicaSetInfo:
    """A ReplicaSet: its owners (the Deployment), revision and conditions."""

    name: str
    namespace: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    owners: tuple[OwnerRef, ...] = ()
    replicas: int = 0
    ready_replicas: int = 0
    conditions: tuple[Condition, ...] = ()

    @property
    def revision(self) -> int:
        """`deployment.kubernetes.io/revision` as a number (0 when absent or unreadable)."""
        value = self.annotations.get(REVISION_ANNOTATION, "")
        return int(value) if value.isdigit() else 0


@dataclass(frozen=True)
class JobInfo:
    """A batch/v1 Job."""

    name: str
    namespace: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    active: int = 0
    succeeded: int = 0
    failed: int = 0
    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class InferenceServiceInfo:
    """A KServe InferenceService (serving.kserve.io/v1beta1)."""

    name: str
    namespace: str
    uid: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    conditions: tuple[Condition, ...] = ()
    url: str = ""


@dataclass(frozen=True)
class ResourceQuotaInfo:
    """A namespace ResourceQuota; `hard`/`used` keys as in the API (`requests.cpu`, `pods`)."""

    name: str
    namespace: str
    hard: Mapping[str, int] = field(default_factory=dict)
    used: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class EventInfo:
    """A core/v1 Event about some object."""

    name: str
    namespace: str
    involved_kind: str = ""
    involved_name: str = ""
    reason: str = ""
    message: str = ""
    type: str = "Normal"
    count: int = 1


@dataclass(frozen=True)
class WorkloadRef:
    """Which workload a pod belongs to: its slug candidate, kind and where it came from."""

    name: str
    kind: Kind
    namespace: str
    source: str  # "label", "inferenceservice", "deployment", "replicaset", "job"


@dataclass(frozen=True)
class ClaimDemand:
    """A workload's normalised demand: the sum of its pods' effective requests.

    `largest_pod` is the per-resource maximum over the pods (an envelope): a pool that holds it
    holds every pod of the workload.
    """

    requests: Resources
    largest_pod: Resources
    pods: int
    kind: Kind = "deployment"
    namespaces: frozenset[str] = frozenset()


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


def normalise(
    pods: Iterable[PodInfo], label: str = LABEL_WORKLOAD
) -> dict[str, ClaimDemand]:
    """Sum the effective requests of `pods` per workload name (pods of no workload are skipped).

    The caller chooses the pods (provisionable ones, plus those bound to nodes scoctl launched);
    this only groups and sums. 42 pods of 4 vCPU / 16Gi give one ClaimDemand of 168 vCPU / 672Gi.
    """
    sums: dict[str, dict[str, int]] = {}
    largest: dict[str, dict[str, int]] = {}
    counts: dict[str, int] = {}
    kinds: dict[str, Kind] = {}
    namespaces: dict[str, set[str]] = {}
    for pod in pods:
        ref = workload_of(pod, label)
        if ref is None:
            continue
        request = effective_request(pod)
        key = ref.name
        total = sums.setdefault(key, {})
        for name, amount in request.items():
            total[name] = total.get(name, 0) + amount
        largest[key] = maximum(largest.get(key, {}), request)
        counts[key] = counts.get(key, 0) + 1
        kinds.setdefault(key, ref.kind)
        namespaces.setdefault(key, set()).add(ref.namespace)
    return {
        key: ClaimDemand(
            requests={k: v for k, v in sums[key].items() if v},
            largest_pod=largest[key],
            pods=counts[key],
            kind=kinds[key],
            namespaces=frozenset(namespaces[key]),
        )
        for key in sorted(sums)
    }


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
    """Available=True and every desired replica available."""
    cond = next((c for c in deployment.conditions if c.type == "Available"), None)
    return (
        cond is not None
        and cond.status == "True"
        and deployment.available_replicas >= deployment.replicas
    )
