"""Values of the `Cluster` seam: Kubernetes objects as scoctl reads them, and watch events.

The Kubernetes adapter builds them from API objects; the pure decisions (`core.demand`,
`core.intake.k8s`, `core.reconcile`, `core.notice`) take them. Quantities are canonical integers
(`scoctl.core.quantity`): cpu in millicores, memory in bytes, accelerators as counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from scoctl.core.model.pools import Kind
from scoctl.core.quantity import Resources

REVISION_ANNOTATION = "deployment.kubernetes.io/revision"


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
class Requirement:
    """A node selector requirement (`matchExpressions` item; `matchFields` items have the key
    ``metadata.name``): `operator` is In, NotIn, Exists, DoesNotExist, Gt or Lt."""

    key: str
    operator: str
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class Spread:
    """A `topologySpreadConstraints` item (`when_unsatisfiable` DoNotSchedule or
    ScheduleAnyway)."""

    topology_key: str
    max_skew: int = 1
    when_unsatisfiable: str = "DoNotSchedule"


@dataclass(frozen=True)
class Placement:
    """Where a pod may run, as its spec says: `nodeSelector`, the required node affinity
    (`terms` ORed, the requirements of a term ANDed), the preferred terms (weight, term), the
    topology spread constraints, and the PersistentVolumeClaims it mounts. One value is shared
    by the pods of one template (the adapter builds each distinct one once); a pod that says
    nothing has none."""

    node_selector: tuple[tuple[str, str], ...] = ()
    required: tuple[tuple[Requirement, ...], ...] | None = None  # None: no required affinity
    preferred: tuple[tuple[int, tuple[Requirement, ...]], ...] = ()
    spread: tuple[Spread, ...] = ()
    volume_claims: tuple[str, ...] = ()
    # a required podAntiAffinity term over kubernetes.io/hostname: one such pod per node
    alone: bool = False


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
    placement: Placement | None = None  # nodeSelector, affinity, spread, volumes (None: none)
    deleting: bool = False  # metadata.deletionTimestamp is set
    resource_version: str = ""
    created: float | None = None  # metadata.creationTimestamp, Unix seconds (None: unknown)
    # seconds a delete gives the pod to stop: metadata.deletionGracePeriodSeconds once it is
    # being deleted, else spec.terminationGracePeriodSeconds (None: not given)
    grace_seconds: int | None = None

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
class DaemonSetInfo:
    """A DaemonSet: `pod` is its pod template as a pod (node selector, affinity, tolerations,
    requests), one of which runs on every node it matches."""

    name: str
    namespace: str
    pod: PodInfo


@dataclass(frozen=True)
class PodGroupInfo:
    """A scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1): its pods carry the label
    ``scheduling.x-k8s.io/pod-group: <name>`` in its namespace; `min_member` is its
    ``spec.minMember`` (None when unset), the gang's size unless a pod says otherwise (design:
    Gangs)."""

    name: str
    namespace: str
    min_member: int | None = None


@dataclass(frozen=True)
class VolumeClaimInfo:
    """A PersistentVolumeClaim: the PersistentVolume it is bound to (``spec.volumeName``;
    empty while unbound)."""

    name: str
    namespace: str
    volume: str = ""


@dataclass(frozen=True)
class VolumeInfo:
    """A PersistentVolume and the zones it can be used in (its ``topology.kubernetes.io/zone``
    node affinity or label; empty: any zone)."""

    name: str
    zones: tuple[str, ...] = ()


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
class PodEvent:
    """One step of a pod watch.

    ``ADDED``/``MODIFIED``/``DELETED`` carry `pod`. ``RESYNC`` carries the complete current list
    in `pods` and replaces whatever the consumer cached: it starts a watch begun without a
    resourceVersion and follows every 410 Gone (history compacted) re-list.
    `resource_version` is where the watch stands after this event.
    """

    type: Literal["ADDED", "MODIFIED", "DELETED", "RESYNC"]
    resource_version: str
    pod: PodInfo | None = None
    pods: tuple[PodInfo, ...] = ()


@dataclass(frozen=True)
class NodeEvent:
    """One step of a node watch: as `PodEvent`, with `node` / `nodes`."""

    type: Literal["ADDED", "MODIFIED", "DELETED", "RESYNC"]
    resource_version: str
    node: NodeInfo | None = None
    nodes: tuple[NodeInfo, ...] = ()
