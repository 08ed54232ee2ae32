"""Kubernetes intake (pure): pods into claims, cluster state into status tokens.

Nothing here does I/O, reads a clock or logs. The watch stage gathers plain values (pods, nodes,
Deployments, ReplicaSets, Jobs, InferenceServices, quota events, the workload rows) into a
`K8sSnapshot`, calls `decide_k8s_intake`, and records what it returns.

Kubernetes (design: Words-Statuses, DD-0018 §4b):

* demand: provisionable pods, and pods bound to nodes scoctl launched (label
  ``sco/managed=true``), of managed workloads only (named in the config, or pods carrying the
  workload label), their effective requests (`core.demand.effective_request`, computed once
  per distinct container set) summed per workload into one claim, with the largest pod as the
  envelope; pods sharing ``scheduling.x-k8s.io/pod-group`` (label or annotation) make it a gang
  claim (design: Gangs) of the group's ``sco/gang-size``, else its PodGroup's ``spec.minMember``
  where that API is served (`K8sSnapshot.pod_groups`, by the pods' namespace and the group's
  name), else the pods seen;
* backstop, first match wins per watched workload (settled ones, running or inactive, are no
  longer watched — except a running one whose desired replicas grew: its Deployments want more
  replicas than are available while its pods wait for capacity): a quota block of a
  Deployment / InferenceService predictor →
  ``POD_QUOTA_EXCEEDED_FAILED`` and teardown (with ``quota_block: queue`` a block whose request
  alone fits the quota's limit stays ``POD_QUEUED``); a Job's quota block → ``POD_CREATION_BLOCKED``
  (log only); an unschedulable pod no node and (elastic) no pool flavor could ever hold →
  ``POD_SCHEDULING_FAILED``; all replicas available → ``DEPLOYMENT_AVAILABLE``; unschedulable
  pods → ``POD_QUEUED``; pods bound but not ready → ``POD_INITIALIZING``. A token is only emitted
  when it is not the workload's last token, so a steady state logs nothing.
"""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, TypeVar

from scoctl.core.constraints import (
    HOSTNAME_LABEL,
    NAME_FIELD,
    ZONE_LABEL,
    pod_refusal,
    pool_labels,
    pools_for,
)
from scoctl.core.demand import (
    JOB_NAME_LABELS,
    KSERVE_ISVC_LABEL,
    POD_TEMPLATE_HASH_LABEL,
    deployment_available,
    deployment_quota_block,
    effective_request,
    events_quota_block,
    is_provisionable,
    max_allocatable,
    node_fits,
    scheduling_message,
    tolerates_reclaimable,
    workload_of,
)
from scoctl.core.gang import GANG_SIZE_ANNOTATION, pack_gang, pod_group_of, pod_group_size
from scoctl.core.intake.common import (
    Capacity,
    ClaimDecision,
    IntakeDecision,
    ObjectRef,
    TokenDecision,
    WorkloadRule,
    WorkloadState,
    _contract,
    _rule_for,
)
from scoctl.core.model import (
    ClaimPart,
    DeploymentInfo,
    EventInfo,
    InferenceServiceInfo,
    Isolation,
    JobInfo,
    NodeInfo,
    Placement,
    PodInfo,
    Pool,
    ReplicaSetInfo,
    WorkloadRef,
    flavor_allocatable,
    is_slug,
)
from scoctl.core.model.kubernetes import (
    DaemonSetInfo,
    PodGroupInfo,
    Taint,
    VolumeClaimInfo,
    VolumeInfo,
)
from scoctl.core.model.vocabulary import LABEL_MANAGED, PlacementToken, WorkloadStatus
from scoctl.core.quantity import CPU, MEMORY, QuantityError, Resources, fits, parse_quantity
from scoctl.core.tokens import INACTIVE_STATUSES, map_token
from scoctl.core.truth import Cluster, Units, Unplaced, not_isolated, unplaced

# Resources a Nova flavor does not describe: ignored when asking whether a flavor could hold a pod.
_NOT_FLAVOR_RESOURCES = frozenset({"ephemeral-storage", "pods"})


# --- values ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class K8sPolicy:
    """The config's Kubernetes rules for intake."""

    workloads: tuple[WorkloadRule, ...] = ()
    contracts: frozenset[str] = frozenset({"T1"})
    default_contract: str = "T1"
    workload_label: str = "sco/workload"
    contract_label: str = "sco/contract"
    quota_block: Literal["fail", "queue"] = "fail"
    capacity: Capacity = field(default_factory=Capacity)
    # `workloads[].isolation` by workload, and that of the others: an exclusive workload's
    # pending pods must tolerate and select its units (`core.truth`); a shared one's claim
    # grows by what others keep from its units
    isolation: Mapping[str, Isolation] = field(default_factory=dict)
    default_isolation: Isolation = "exclusive"
    unplaced_after: float = 30.0  # timeouts.unplaced

    def shared(self, workload: str) -> bool:
        """Whether `workload`'s units carry no workload taint."""
        return self.isolation.get(workload, self.default_isolation) == "shared"


@dataclass(frozen=True)
class K8sSnapshot:
    """One consistent read of the cluster plus the workload rows (newest per slug)."""

    pods: tuple[PodInfo, ...] = ()
    nodes: tuple[NodeInfo, ...] = ()
    deployments: tuple[DeploymentInfo, ...] = ()
    replicasets: tuple[ReplicaSetInfo, ...] = ()
    jobs: tuple[JobInfo, ...] = ()
    inference_services: tuple[InferenceServiceInfo, ...] = ()
    events: tuple[EventInfo, ...] = ()
    workloads: Mapping[str, WorkloadState] = field(default_factory=dict)
    claims: frozenset[str] = frozenset()  # workloads holding a non-empty k8s claim now
    # the zone of the PersistentVolume bound to each claim, by (namespace, claim name)
    volume_zones: Mapping[tuple[str, str], str] = field(default_factory=dict)
    daemonsets: tuple[DaemonSetInfo, ...] = ()
    # each PodGroup's spec.minMember by (namespace, name), where that API is served (design: Gangs)
    pod_groups: Mapping[tuple[str, str], int] = field(default_factory=dict)
    # placement truth (`core.truth`): now (Unix s; None: the truth loop does not run) and each
    # workload's units as the state knows them
    now: float | None = None
    units: Mapping[str, Units] = field(default_factory=dict)


def pod_group_sizes(groups: Iterable[PodGroupInfo]) -> dict[tuple[str, str], int]:
    """Each PodGroup's ``spec.minMember`` by (namespace, name): only those that set one."""
    return {(g.namespace, g.name): g.min_member for g in groups if g.min_member is not None}


def volume_zones(claims: Iterable[VolumeClaimInfo],
                 volumes: Iterable[VolumeInfo]) -> dict[tuple[str, str], str]:
    """The zone of the PersistentVolume each PersistentVolumeClaim is bound to, by (namespace,
    claim): only volumes of exactly one zone (one that may be used in several, or in any, pins
    no zone)."""
    zone = {v.name: v.zones[0] for v in volumes if len(v.zones) == 1}
    return {(c.namespace, c.name): zone[c.volume] for c in claims if c.volume in zone}


# --- small pure helpers ----------------------------------------------------------------------


_QUOTA_PARTS = re.compile(r"requested:\s*(?P<req>.*?),\s*used:\s*(?P<used>.*?),\s*"
                          r"limited:\s*(?P<lim>[^\s]*)", re.IGNORECASE)


def _quota_amounts(text: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep:
            raise ValueError(f"not name=quantity: {item!r}")
        base = key.split(".", 1)[1] if key.startswith(("requests.", "limits.")) else key
        out[key] = parse_quantity(base, value.strip())
    return out


def quota_request_fits(message: str) -> bool | None:
    """Whether the request alone is within the quota's limit, from the quota admission text
    (``exceeded quota: q, requested: requests.cpu=2, used: requests.cpu=8, limited:
    requests.cpu=8``): True means the quota is busy, not too small. None when the text does not
    say (``failed quota: …: must specify …`` or an unknown format)."""
    match = _QUOTA_PARTS.search(message)
    if match is None:
        return None
    try:
        requested = _quota_amounts(match.group("req"))
        limited = _quota_amounts(match.group("lim").rstrip("."))
    except (ValueError, QuantityError):
        return None
    return all(amount <= limited[key] for key, amount in requested.items() if key in limited)


def could_ever_hold(request: Resources, nodes: Sequence[NodeInfo],
                    capacity: Capacity) -> tuple[bool | None, str]:
    """Could any node, or (elastic) any pool's flavor, ever hold `request`? (fit.go's
    "Unresolvable": the whole allocatable, not what is free.)

    None when capacity cannot be judged (no nodes, or a requested extended resource no node
    advertises and no flavor offers) — never a false failure, as the gate's ``skipped``.
    """
    node = node_fits(request, nodes)
    if node is not None:
        return True, f"node {node.name} could hold it"
    if capacity.elastic:
        for flavor in capacity.pool_flavors():
            allocatable = flavor_allocatable(flavor, capacity.node_reserve)
            wanted = {k: v for k, v in request.items()
                      if k not in _NOT_FLAVOR_RESOURCES and not k.startswith("hugepages-")}
            if fits(wanted, allocatable):
                return True, f"flavor {flavor.name} could hold it"
    if not nodes:
        return None, "no nodes to judge by"
    unknown = [r for r in request if r not in (CPU, MEMORY) and max_allocatable(nodes, r) is None]
    if unknown:
        return None, f"no node advertises {', '.join(sorted(unknown))}"
    where = " or pool flavor" if capacity.elastic and capacity.pool_flavors() else ""
    return False, f"the request exceeds every node's allocatable{where}"


def _json_request(request: Resources) -> dict[str, int | float]:
    return {k: (v / 1000 if k == CPU and v % 1000 else (v // 1000 if k == CPU else v))
            for k, v in sorted(request.items())}


def _pod_ready(pod: PodInfo) -> bool:
    cond = pod.condition("Ready")
    return cond is not None and cond.status == "True"


def _initialising(pod: PodInfo) -> bool:
    """Bound to a node and not ready yet (init containers, image pulls, start-up probes)."""
    return bool(pod.node_name) and not pod.deleting and (
        pod.phase == "Pending" or (pod.phase == "Running" and not _pod_ready(pod)))


def _emit(state: WorkloadState | None, token: str) -> bool:
    """A token is news unless it is the workload's last one."""
    return state is None or state.last_token != token

# --- Kubernetes --------------------------------------------------------------------------------


def is_managed_pod(pod: PodInfo, policy: K8sPolicy) -> bool:
    """Whether a pod is demand scoctl manages: it carries the workload label, or its owner is a
    workload named in the config (other pending pods are not scoctl's business)."""
    if pod.labels.get(policy.workload_label):
        return True
    ref = workload_of(pod, policy.workload_label)
    return ref is not None and _rule_for((r for r in policy.workloads if r.source == "k8s"),
                                         ref.name, pod.namespace) is not None


@dataclass
class _K8sWorkload:
    slug: str
    kind: str
    contract: str
    namespace: str | None
    tolerates: bool = True
    node_labels: Mapping[str, str] = field(default_factory=dict)
    # the first demand pod of each distinct placement (shared values: one key per template)
    placements: dict[tuple[Placement | None, str], PodInfo] = field(default_factory=dict)
    demand: list[PodInfo] = field(default_factory=list)
    waiting: list[PodInfo] = field(default_factory=list)  # provisionable
    starting: list[PodInfo] = field(default_factory=list)  # bound, not ready
    owners: set[tuple[str, str, str]] = field(default_factory=set)  # (kind, namespace, name)
    requests: dict[str, int] = field(default_factory=dict)  # the sum over `demand`
    largest: dict[str, int] = field(default_factory=dict)
    shapes: dict[tuple[tuple[str, int], ...], PodInfo] = field(default_factory=dict)  # waiting
    # per distinct placement (as `placements`): its demand pods' requests, largest, count
    by_place: dict[tuple[Placement | None, str], _Demand] = field(default_factory=dict)
    # per pod group, by (namespace, name) as a PodGroup is named (design: Gangs): each seen pod's
    # sco/gang-size annotation (None: absent)
    groups: dict[tuple[str, str], list[str | None]] = field(default_factory=dict)
    # pods counted per (placement, identity of their shared request value) until `settle`:
    # the pods of one template add one request value, summed once times their count
    counted: dict[tuple[tuple[Placement | None, str], int], list[Any]] = field(
        default_factory=dict)
    # per ReplicaSet (namespace, name): its pods counted as demand, and its pods in transit
    # (Terminating, or not yet looked at by the scheduler) with their request and placement
    held: dict[tuple[str, str], int] = field(default_factory=dict)
    transit: dict[tuple[str, str], list[_Transit]] = field(default_factory=dict)

    def add(self, pod: PodInfo, request: Mapping[str, int],
            place: tuple[Placement | None, str]) -> None:
        self.demand.append(pod)
        key = (place, id(request))  # `counted` holds the value: its id is not reused
        seen = self.counted.get(key)
        if seen is None:
            self.counted[key] = [request, 1]
        else:
            seen[1] += 1

    def merge(self, piece: _K8sWorkload) -> None:
        """Add a bucket's partial reading of this workload (`_read_bucket`), left as it is:
        its pods after ours, its first placements and shapes where ours have none, its
        counts unsettled, its pods' tolerations and-ed in."""
        self.tolerates = self.tolerates and piece.tolerates
        self.owners |= piece.owners
        for group, sizes in piece.groups.items():
            self.groups.setdefault(group, []).extend(sizes)
        self.demand.extend(piece.demand)
        self.waiting.extend(piece.waiting)
        self.starting.extend(piece.starting)
        for place, pod in piece.placements.items():
            self.placements.setdefault(place, pod)
        for shape, pod in piece.shapes.items():
            self.shapes.setdefault(shape, pod)
        for key, (request, pods) in piece.counted.items():
            seen = self.counted.get(key)
            if seen is None:
                self.counted[key] = [request, pods]
            else:
                seen[1] += pods
        for owner, n in piece.held.items():
            self.held[owner] = self.held.get(owner, 0) + n
        for owner, moving in piece.transit.items():
            self.transit.setdefault(owner, []).extend(moving)

    def in_transit(self, replicas: Mapping[tuple[str, str], int]) -> None:
        """Count the pods in transit a ReplicaSet still wants (issue 49): an evicted pod is
        Terminating before its ReplicaSet has made the replacement, and a replacement is
        pending before the scheduler has looked at it — counting neither would make a drain
        dip the claim by one pod per eviction, and the plan flap. Of each ReplicaSet's pods in
        transit, as many count as its `replicas` (spec) exceed its pods counted already (not
        yet looked-at ones first): none once the replacement is counted, none after a
        scale-down (the ReplicaSet wants no more)."""
        for owner, moving in self.transit.items():
            room = replicas.get(owner, 0) - self.held.get(owner, 0)
            for t in sorted(moving, key=lambda t: t.pod.deleting)[:max(0, room)]:
                self.add(t.pod, t.request, t.place)
                self.placements.setdefault(t.place, t.pod)
        self.transit.clear()

    def settle(self) -> None:
        """The sums `add` counted: `requests` and `largest` over the demand, and per
        placement (`by_place`) its pods, requests and largest."""
        for (place, _), (request, pods) in self.counted.items():
            demand = self.by_place.get(place)
            if demand is None:
                demand = self.by_place[place] = _Demand()
            demand.pods += pods
            scaled = {name: amount * pods for name, amount in request.items()}
            _sum_into(self.requests, self.largest, scaled, request)
            _sum_into(demand.requests, demand.largest, scaled, request)
        self.counted.clear()


@dataclass(frozen=True)
class _Transit:
    """A pod in transit (`_K8sWorkload.in_transit`) with its request and placement key."""

    pod: PodInfo
    request: Mapping[str, int]
    place: tuple[Placement | None, str]


@dataclass
class _Demand:
    """The demand of the pods that share one placement."""

    requests: dict[str, int] = field(default_factory=dict)
    largest: dict[str, int] = field(default_factory=dict)
    pods: int = 0


def _sum_into(requests: dict[str, int], largest: dict[str, int],
              total: Mapping[str, int], request: Mapping[str, int]) -> None:
    """Add `total` (some pods' requests summed) into `requests`, and one pod's `request`
    into the per-resource `largest`."""
    for name, amount in total.items():
        requests[name] = requests.get(name, 0) + amount
    for name, amount in request.items():
        if amount > largest.get(name, 0):
            largest[name] = amount


# the labels besides the owners that name a pod's workload (`core.demand.workload_of`): with
# the owners value they key the memo of what many pods of one template share
OWNER_LABELS = (POD_TEMPLATE_HASH_LABEL, KSERVE_ISVC_LABEL, *JOB_NAME_LABELS)


T = TypeVar("T", DeploymentInfo, InferenceServiceInfo, JobInfo)


class _Index(Generic[T]):
    """Objects of one kind by namespace and name, by workload label and by name, so that each
    workload finds its own without scanning every object (1,000 workloads, 1,000 Deployments).
    Lookups give the objects in the snapshot's order."""

    def __init__(self, objects: Sequence[T], label: str, *, by_label: str = "") -> None:
        self.objects: Sequence[T] = objects
        self.ident: dict[tuple[str, str], list[int]] = {}
        self.labelled: dict[str, list[int]] = {}
        self.named: dict[str, list[int]] = {}
        self.by_label: dict[tuple[str, str], list[int]] = {}  # (namespace, `by_label` value)
        for position, obj in enumerate(objects):
            self.ident.setdefault((obj.namespace, obj.name), []).append(position)
            self.labelled.setdefault(obj.labels.get(label, ""), []).append(position)
            self.named.setdefault(obj.name, []).append(position)
            if by_label:
                key = (obj.namespace, obj.labels.get(by_label, ""))
                self.by_label.setdefault(key, []).append(position)

    def pick(self, positions: Iterable[int]) -> list[T]:
        return [self.objects[p] for p in sorted(set(positions))]


@dataclass
class _Objects:
    """The snapshot's Deployments, InferenceServices, Jobs and ReplicaSets, indexed once."""

    deployments: _Index[DeploymentInfo]
    isvcs: _Index[InferenceServiceInfo]
    jobs: _Index[JobInfo]
    replicasets: dict[tuple[str, str, str], list[ReplicaSetInfo]]  # (ns, "uid"|"name", value)

    @classmethod
    def of(cls, snap: K8sSnapshot, label: str) -> _Objects:
        replicasets: dict[tuple[str, str, str], list[ReplicaSetInfo]] = {}
        for rs in snap.replicasets:
            for owner in rs.owners:
                if owner.kind == "Deployment":
                    for key in ((rs.namespace, "uid", owner.uid), (rs.namespace, "name",
                                                                   owner.name)):
                        if not replicasets.get(key) or replicasets[key][-1] is not rs:
                            replicasets.setdefault(key, []).append(rs)
        return cls(deployments=_Index(snap.deployments, label, by_label=KSERVE_ISVC_LABEL),
                   isvcs=_Index(snap.inference_services, label), jobs=_Index(snap.jobs, label),
                   replicasets=replicasets)

    def replicasets_of(self, deployment: DeploymentInfo) -> list[ReplicaSetInfo]:
        """The ReplicaSets `newest_replicaset` could pick for `deployment` (owned by its uid
        or name), each once."""
        found = list(self.replicasets.get((deployment.namespace, "name", deployment.name), ()))
        if deployment.uid:
            found += [rs for rs in self.replicasets.get(
                (deployment.namespace, "uid", deployment.uid), ()) if rs not in found]
        return found


def _matching(index: _Index[T], w: _K8sWorkload, kind: str, namespaces: set[str],
              configured: bool) -> list[int]:
    """Positions of the objects owned by `w` (as `kind`), labelled with its slug, or named
    after it (configured, or in one of its namespaces)."""
    positions = [p for owner_kind, ns, name in w.owners if owner_kind == kind
                 for p in index.ident.get((ns, name), ())]
    positions += index.labelled.get(w.slug, ())
    positions += [p for p in index.named.get(w.slug, ())
                  if configured or index.objects[p].namespace in namespaces]
    return positions


def _objects_of(w: _K8sWorkload, objects: _Objects, configured: bool,
                ) -> tuple[list[DeploymentInfo], list[InferenceServiceInfo], list[JobInfo]]:
    namespaces = {ns for _, ns, _ in w.owners} | ({w.namespace} if w.namespace else set())
    isvcs = objects.isvcs.pick(_matching(objects.isvcs, w, "inference", namespaces, configured))
    deployment_positions = _matching(objects.deployments, w, "deployment", namespaces,
                                     configured)
    for key in [(i.namespace, i.name) for i in isvcs] + [
            (ns, name) for kind, ns, name in w.owners if kind == "inference"]:
        deployment_positions += objects.deployments.by_label.get(key, ())
    deployments = objects.deployments.pick(deployment_positions)
    jobs = objects.jobs.pick(_matching(objects.jobs, w, "job", namespaces, configured))
    return deployments, isvcs, jobs


def _teardown_refs(w: _K8sWorkload, deployments: Sequence[DeploymentInfo],
                   isvcs: Sequence[InferenceServiceInfo]) -> tuple[ObjectRef, ...]:
    """The objects a failed workload leaves behind: its InferenceServices (KServe would recreate
    their predictor Deployments), else its Deployments."""
    if isvcs:
        return tuple(ObjectRef("InferenceService", i.namespace, i.name,
                               i.labels.get(LABEL_MANAGED) == "true") for i in isvcs)
    return tuple(ObjectRef("Deployment", d.namespace, d.name,
                           d.labels.get(LABEL_MANAGED) == "true") for d in deployments)


class IntakeMemo:
    """What `decide_k8s_intake` read of each bucket of pods — the pods of one namespace sharing
    one owners value (the adapter builds one per template, so a bucket is a template's pods) —
    kept between passes by a long-lived caller (the controller), so that a pass reads again
    only the buckets whose pods changed (design: Controller, issue 29: a change costs what changed).

    A bucket's reading is reused only for the very same pod values in the same order, under
    the same managed nodes and policy; anything else reads it afresh. It holds the values it
    read, so no id it is keyed by is reused while it is kept. Reusing it gives the decision a
    fresh read would (`tests/core/test_intake_memo.py` checks this property)."""

    def __init__(self) -> None:
        self.inputs: tuple[frozenset[str], K8sPolicy] | None = None
        self.parts: dict[tuple[str, int], _Bucket] = {}
        self.read = 0  # buckets read afresh, and reused, by the last decision
        self.reused = 0

    def pending(self) -> int:
        """`count_pending` over the pods of the last decision, from its buckets' counts."""
        return sum(part.pending for part in self.parts.values())


@dataclass
class _Bucket:
    """One bucket's pods as read (`_read_bucket`): per workload its partial aggregate, unsettled
    (`_K8sWorkload.counted`, `tolerates` over the pods only), the rule's `tolerates` it starts
    from, and the names that are not slugs."""

    pods: list[PodInfo]
    owners: Any  # the shared owners value: its id keys the bucket, so it is kept alive
    found: dict[str, _K8sWorkload]
    starts: dict[str, bool]
    bad: set[str]
    pending: int = 0  # its pods that are demand scoctl manages (`count_pending`)


def count_pending(pods: Iterable[PodInfo], policy: K8sPolicy) -> int:
    """How many of `pods` are pending demand scoctl manages (provisionable and managed)."""
    return sum(1 for pod in pods if is_provisionable(pod) and is_managed_pod(pod, policy))


def _read_pods(snap: K8sSnapshot, policy: K8sPolicy, rules: Sequence[WorkloadRule],
               memo: IntakeMemo | None = None) -> tuple[dict[str, _K8sWorkload], set[str]]:
    """The managed workloads the pods belong to, with their demand; and the workload names
    that are not slugs (their pods are skipped).

    The pods are read by bucket (`IntakeMemo`): a bucket the `memo` read last pass with the
    same pods is not read again. Buckets come in the order of their first pod, and a
    workload's buckets are merged in that order (its kind, contract and namespace are its
    first pod's)."""
    managed_nodes = frozenset(n.name for n in snap.nodes
                              if n.labels.get(LABEL_MANAGED) == "true")
    memo = memo if memo is not None else IntakeMemo()
    if memo.inputs is None or memo.inputs[0] != managed_nodes or memo.inputs[1] != policy:
        memo.parts.clear()
        memo.inputs = (managed_nodes, policy)
    buckets: dict[tuple[str, int], list[PodInfo]] = {}
    for pod in snap.pods:
        key = (pod.namespace, id(pod.owners))
        bucket = buckets.get(key)
        if bucket is None:
            buckets[key] = [pod]
        else:
            bucket.append(pod)
    parts: dict[tuple[str, int], _Bucket] = {}
    memo.read = memo.reused = 0
    for key, pods in buckets.items():
        old = memo.parts.get(key)
        if old is not None and len(old.pods) == len(pods) \
                and all(map(operator.is_, old.pods, pods)):
            parts[key] = old
            memo.reused += 1
        else:
            parts[key] = _read_bucket(pods, policy, rules, managed_nodes)
            memo.read += 1
    memo.parts = parts
    found: dict[str, _K8sWorkload] = {}
    bad_slugs: set[str] = set()
    for part in parts.values():
        bad_slugs |= part.bad
        for slug, piece in part.found.items():
            w = found.get(slug)
            if w is None:
                w = found[slug] = _K8sWorkload(
                    slug=slug, kind=piece.kind, contract=piece.contract,
                    namespace=piece.namespace, tolerates=part.starts[slug],
                    node_labels=piece.node_labels)
            w.merge(piece)
    replicas = {(rs.namespace, rs.name): rs.replicas for rs in snap.replicasets}
    for w in found.values():
        w.in_transit(replicas)
        w.settle()
    return found, bad_slugs


def _read_bucket(pods: Sequence[PodInfo], policy: K8sPolicy, rules: Sequence[WorkloadRule],
                 managed_nodes: frozenset[str]) -> _Bucket:
    """One bucket's pods read (see `_read_pods`).

    What many pods share is worked out once: the owning object per owners value, the rule and
    slug check per name, and the effective request per container set (the pods of one
    template share one owners and one container value: the adapter builds each distinct one
    once). The memos keyed by identity are right for any pods: the bucket holds its pods, so
    no value is freed and no id reused while they are in use, and pods with equal but
    separate values only miss the memo.
    """
    label = policy.workload_label
    found: dict[str, _K8sWorkload] = {}
    starts: dict[str, bool] = {}
    bad_slugs: set[str] = set()
    owners: dict[tuple[str, int, tuple[str | None, ...]], WorkloadRef | None] = {}
    names: dict[tuple[str, str], tuple[WorkloadRule | None, bool]] = {}
    requests: dict[tuple[int, int], tuple[dict[str, int], tuple[tuple[str, int], ...]]] = {}
    for pod in pods:
        if pod.phase in ("Succeeded", "Failed"):
            continue
        # keyed by the identity of the (shared) owners value, alive as long as `owners` is
        key = (pod.namespace, id(pod.owners), tuple(map(pod.labels.get, OWNER_LABELS)))
        try:
            owner = owners[key]
        except KeyError:  # the owning object, whatever the label says
            owner = owners[key] = workload_of(pod, "")
        named = pod.labels.get(label, "")
        if not named and owner is None:
            continue
        name = named or (owner.name if owner else "")
        at = (name, pod.namespace)
        judged = names.get(at)
        if judged is None:
            judged = names[at] = (_rule_for(rules, name, pod.namespace), is_slug(name))
        rule, slug = judged
        if not named and rule is None:
            continue  # not scoctl's business
        if not slug:
            bad_slugs.add(name)
            continue
        w = found.get(name)
        if w is None:
            contract = _contract(pod.labels.get(policy.contract_label), policy.contracts,
                                 rule.contract if rule else policy.default_contract)
            default_kind = owner.kind if owner else "job"
            starts[name] = rule.tolerates_reclaimable if rule else True
            w = found[name] = _K8sWorkload(
                slug=name, kind=rule.kind if rule else default_kind, contract=contract,
                namespace=rule.namespace if rule and rule.namespace else pod.namespace,
                tolerates=True, node_labels=rule.node_labels if rule else {})
        if owner is not None:
            w.owners.add((owner.kind, owner.namespace, owner.name))
        group = pod_group_of(pod.labels, pod.annotations)
        if group and not pod.deleting:
            w.groups.setdefault((pod.namespace, group), []).append(
                pod.annotations.get(GANG_SIZE_ANNOTATION))
        provisionable = is_provisionable(pod)
        on_ours = bool(pod.node_name) and pod.node_name in managed_nodes and not pod.deleting
        owner_rs = _replicaset_of(pod)
        if owner_rs is not None and not (provisionable or on_ours) \
                and _moving(pod, managed_nodes):
            request, _ = _request_of(pod, requests)
            at_ns = pod.namespace if pod.placement is not None \
                and pod.placement.volume_claims else ""
            w.transit.setdefault(owner_rs, []).append(_Transit(pod, request,
                                                               (pod.placement, at_ns)))
        if provisionable or on_ours:
            if owner_rs is not None:
                w.held[owner_rs] = w.held.get(owner_rs, 0) + 1
            request, shape = _request_of(pod, requests)
            placement = pod.placement
            at_ns = pod.namespace if placement is not None and placement.volume_claims else ""
            w.add(pod, request, (placement, at_ns))
            w.tolerates = w.tolerates and tolerates_reclaimable(pod)
            w.placements.setdefault((placement, at_ns), pod)
            if provisionable:
                w.waiting.append(pod)
                w.shapes.setdefault(shape, pod)
        if not provisionable and _initialising(pod):
            w.starting.append(pod)
    return _Bucket(list(pods), pods[0].owners if pods else (), found, starts, bad_slugs,
                   count_pending(pods, policy))


def _replicaset_of(pod: PodInfo) -> tuple[str, str] | None:
    """The (namespace, name) of the ReplicaSet controlling `pod`, if one does."""
    for owner in pod.owners:
        if owner.controller and owner.kind == "ReplicaSet":
            return pod.namespace, owner.name
    return None


def _moving(pod: PodInfo, managed_nodes: frozenset[str]) -> bool:
    """A pod in transit: Terminating where it was demand (pending, or on scoctl's node), or
    pending and not yet looked at by the scheduler (no PodScheduled condition)."""
    if pod.phase in ("Succeeded", "Failed"):
        return False
    if pod.deleting:
        return not pod.node_name or pod.node_name in managed_nodes
    return not pod.node_name and not pod.nominated_node_name and not pod.scheduling_gates \
        and pod.condition("PodScheduled") is None


def _request_of(pod: PodInfo, memo: dict[tuple[int, int], tuple[dict[str, int],
                                                                   tuple[tuple[str, int], ...]]]
                ) -> tuple[dict[str, int], tuple[tuple[str, int], ...]]:
    """The pod's effective request and its shape (sorted items), computed once per shared
    container value. Keyed by identity: those values are alive (the snapshot holds the pods)
    for as long as `memo` is, and a pod with pod-level requests or overhead is not memoised."""
    if pod.pod_requests or pod.overhead:
        request = effective_request(pod)
        return request, tuple(sorted(request.items()))
    key = (id(pod.containers), id(pod.init_containers))
    if key not in memo:
        request = effective_request(pod)
        memo[key] = (request, tuple(sorted(request.items())))
    return memo[key]


@dataclass(frozen=True)
class _Placed:
    """Where a workload's pods may run: the pools some pod's placement rules out (the first
    constraint found per pool), and the placements no pool satisfies (pod, constraint)."""

    ineligible: Mapping[str, str] = field(default_factory=dict)
    nowhere: tuple[tuple[PodInfo, str, tuple[str, ...]], ...] = ()  # pod, why, volume zones
    zone_spread: int = 0  # the smallest maxSkew of a DoNotSchedule zone spread, 0: none
    parts: tuple[ClaimPart, ...] = ()  # when the pods differ in where they may run
    preferred: Mapping[str, int] = field(default_factory=dict)  # soft terms' weight per pool


_UNPLACED = _Placed()


def _volume_zones(pod: PodInfo, snap: K8sSnapshot) -> tuple[str, ...]:
    if pod.placement is None or not pod.placement.volume_claims:
        return ()
    zones = (snap.volume_zones.get((pod.namespace, c)) for c in pod.placement.volume_claims)
    return tuple(sorted({z for z in zones if z}))


def _placed(w: _K8sWorkload, snap: K8sSnapshot, policy: K8sPolicy) -> _Placed:
    """`_Placed` of `w` (design: Constraints): a pool is eligible only if every demand pod could run
    on a node with its units' labels."""
    if all(placement is None for placement, _ in w.placements):
        return _UNPLACED
    pools = policy.capacity.pools
    extra = {p.name: {**p.labels, **w.node_labels} for p in pools}
    ineligible: dict[str, str] = {}
    nowhere: list[tuple[PodInfo, str, tuple[str, ...]]] = []
    # the placements grouped by the pools they rule out (a placement none can use is left
    # out: its pods fail), for the parts
    groups: dict[frozenset[str], list[tuple[tuple[Placement | None, str], Mapping[str, str],
                                            Mapping[str, int]]]] = {}
    preferred: dict[str, int] = {}
    for place, pod in w.placements.items():
        placement = place[0]
        zones = _volume_zones(pod, snap)
        out: Mapping[str, str] = {}
        soft: Mapping[str, int] = {}
        if placement is not None or zones:
            found = pools_for(placement, pools, workload=w.slug, contract=w.contract,
                              extra=extra, volume_zones=zones)
            out, soft = found.ineligible, found.preferred
        if pools and len(out) == len(pools):
            reasons = sorted(set(out.values()))
            nowhere.append((pod, "; ".join(reasons[:3]) + ("; ..." if len(reasons) > 3
                                                           else ""), zones))
        elif place in w.by_place:
            groups.setdefault(frozenset(out), []).append((place, out, soft))
        for pool, why in out.items():
            ineligible.setdefault(pool, why)
        _add_weights(preferred, soft)
    spread = zone_spread(p for p, _ in w.placements)
    if len(groups) < 2:
        return _Placed(ineligible, tuple(nowhere), spread,
                       preferred={p: n for p, n in sorted(preferred.items())
                                  if p not in ineligible})
    # pods that differ in where they may run are separate claims (design: Constraints): the workload
    # rules out only the pools no part may use
    parts = tuple(_part(w, members) for _, members in sorted(
        groups.items(), key=lambda g: (-len(g[0]), sorted(g[0]))))
    common = {p: why for p, why in ineligible.items()
              if all(p in part.ineligible for part in parts)}
    return _Placed(common, tuple(nowhere), spread, parts)


def _add_weights(into: dict[str, int], weights: Mapping[str, int]) -> None:
    for pool, weight in weights.items():
        into[pool] = into.get(pool, 0) + weight


def _part(w: _K8sWorkload,
          members: Sequence[tuple[tuple[Placement | None, str], Mapping[str, str],
                                  Mapping[str, int]]]
          ) -> ClaimPart:
    """The claim part of the placements in `members` (they rule out the same pools)."""
    total = _Demand()
    ineligible: dict[str, str] = {}
    preferred: dict[str, int] = {}
    for place, out, soft in members:
        _add_weights(preferred, soft)
        demand = w.by_place[place]
        total.pods += demand.pods
        for name, amount in demand.requests.items():
            total.requests[name] = total.requests.get(name, 0) + amount
        for name, amount in demand.largest.items():
            total.largest[name] = max(total.largest.get(name, 0), amount)
        for pool, why in out.items():
            ineligible.setdefault(pool, why)
    return ClaimPart(requests={k: v for k, v in total.requests.items() if v},
                     largest_pod={k: v for k, v in total.largest.items() if v},
                     pods=total.pods, ineligible=dict(sorted(ineligible.items())),
                     zone_spread=zone_spread(place[0] for place, _, _ in members),
                     preferred=dict(sorted(preferred.items())))


RECLAIMABLE_TAINT = Taint("reclaimable", "NoSchedule", "true")  # core.userdata's, on its units


def daemon_overhead(workload: str, contract: str, node_labels: Mapping[str, str],
                    daemonsets: Sequence[DaemonSetInfo], pools: Sequence[Pool],
                    ineligible: Mapping[str, str]) -> dict[str, dict[str, int]]:
    """Per flavor, what the pods of the DaemonSets that would land on a new unit of the
    workload request (design: Constraints): a DaemonSet counts on a pool's unit when its pod
    template's
    node selector, required affinity and tolerations admit that unit's labels and taints (the
    reclaimable taint on reclaimable pools), as the DaemonSet controller's
    `NodeShouldRunDaemonPod` decides; a flavor takes the most of its eligible pools'."""
    if not daemonsets:
        return {}
    out: dict[str, dict[str, int]] = {}
    for pool in pools:
        if pool.name in ineligible:
            continue
        labels = pool_labels(pool, workload=workload, contract=contract,
                             extra={**pool.labels, **node_labels})
        taints = (RECLAIMABLE_TAINT,) if pool.tier == "reclaimable" else ()
        total: dict[str, int] = {}
        for ds in daemonsets:
            if pod_refusal(ds.pod, labels, taints) is None:
                for name, amount in effective_request(ds.pod).items():
                    total[name] = total.get(name, 0) + amount
        if total:
            most = out.setdefault(pool.flavor, {})
            for name, amount in total.items():
                most[name] = max(most.get(name, 0), amount)
    return out


def zone_spread(placements: Iterable[Placement | None]) -> int:
    """The smallest maxSkew of the ``DoNotSchedule`` topology spread constraints over
    ``topology.kubernetes.io/zone`` of `placements` (0: none asks for one)."""
    skews = [s.max_skew for p in placements if p is not None for s in p.spread
             if s.topology_key == ZONE_LABEL and s.when_unsatisfiable == "DoNotSchedule"]
    return max(1, min(skews)) if skews else 0


def _node_admits(pod: PodInfo, request: Resources, nodes: Sequence[NodeInfo],
                 zones: Sequence[str]) -> bool:
    """Some existing node could ever take `pod`: its placement, taints and allocatable."""
    for node in nodes:
        labels = {**node.labels, NAME_FIELD: node.name}
        if (pod_refusal(pod, labels, node.taints, volume_zones=zones, new_node=False) is None
                and node_fits(request, (node,)) is not None):
            return True
    return False


def decide_k8s_intake(snap: K8sSnapshot, policy: K8sPolicy,
                      memo: IntakeMemo | None = None) -> IntakeDecision:
    """Claims and status tokens for the Kubernetes side (see the module docstring). `memo`:
    what the previous passes read of the pods (`IntakeMemo`; the decision is the same
    without it)."""
    label = policy.workload_label
    warnings: list[str] = []
    found, bad_slugs = _read_pods(snap, policy, [r for r in policy.workloads
                                                 if r.source == "k8s"], memo)
    for slug in sorted(bad_slugs):
        warnings.append(f"workload name {slug!r} is not a slug ([a-z0-9][a-z0-9.-]{{0,46}}): "
                        "its pods are skipped")

    # workloads known without pods: configured, labelled objects, or active rows
    extra: dict[str, tuple[str, str | None, str]] = {}
    for rule in policy.workloads:
        if rule.source == "k8s":
            extra.setdefault(rule.name, (rule.kind, rule.namespace, rule.contract))
    for obj_kind, objs in (("deployment", snap.deployments), ("job", snap.jobs),
                           ("inference", snap.inference_services)):
        for obj in objs:
            slug = obj.labels.get(label, "")
            if slug and is_slug(slug):
                contract = obj.labels.get(policy.contract_label) or policy.default_contract
                extra.setdefault(slug, (obj_kind, obj.namespace, contract))
    for state in snap.workloads.values():
        if state.source == "k8s" and not state.settled:
            extra.setdefault(state.slug, (state.kind, state.namespace, policy.default_contract))
    for slug, (kind, namespace, contract) in extra.items():
        if slug not in found:
            found[slug] = _K8sWorkload(slug=slug, kind=kind, namespace=namespace,
                                       contract=_contract(contract, policy.contracts,
                                                          policy.default_contract))

    claims: list[ClaimDecision] = []
    tokens: list[TokenDecision] = []
    rules = {r.name for r in policy.workloads if r.source == "k8s"}
    objects = _Objects.of(snap, label)
    holds: dict[tuple[tuple[str, int], ...], tuple[bool | None, str]] = {}
    truth: list[Cluster] = []  # built once, for the first workload with pods waiting
    for slug in sorted(found):
        w = found[slug]
        current = snap.workloads.get(slug)
        placed = _placed(w, snap, policy)
        lost = _unplaced(w, snap, policy, truth)
        token = None
        # settled workloads are no longer watched, unless a running one grew
        if current is None or not current.settled or _grown(w, current, objects,
                                                             configured=slug in rules):
            token = _k8s_token(w, current, snap, policy, objects, holds, placed, lost,
                               configured=slug in rules)
            if token is not None:
                tokens.append(token)
        ending = token is not None and map_token(token.token).status in INACTIVE_STATUSES
        inactive = ending or (current is not None and current.status in INACTIVE_STATUSES)
        if w.demand and not inactive:
            gang, problems = gang_of(w.groups, snap.pod_groups)
            warnings.extend(f"workload {slug}: {problem}" for problem in problems)
            # shared: the room others took is claimed again, until the pods place
            grown = (_plus(w.requests, lost.requests) if lost and policy.shared(slug)
                     else w.requests)
            overhead = daemon_overhead(w.slug, w.contract, w.node_labels, snap.daemonsets,
                                       policy.capacity.pools, placed.ineligible)
            pods = len(w.demand)
            largest: Mapping[str, int] = w.largest
            if gang:
                gang, pods, largest = _packed(w, gang, placed, overhead, policy.capacity)
            claims.append(ClaimDecision(
                workload=slug, contract=w.contract, kind=w.kind, source="k8s",
                requests={k: v for k, v in grown.items() if v},
                largest_pod={k: v for k, v in largest.items() if v}, pods=pods,
                tolerates_reclaimable=w.tolerates, namespace=w.namespace,
                created=tuple(p.created for p in w.demand if p.created is not None),
                ineligible=placed.ineligible, zone_spread=placed.zone_spread,
                overhead=overhead, parts=placed.parts, preferred=placed.preferred, gang=gang))
        elif slug in snap.claims:
            claims.append(ClaimDecision(workload=slug, contract=w.contract, kind=w.kind,
                                        source="k8s", requests={}, largest_pod={}, pods=0,
                                        tolerates_reclaimable=w.tolerates,
                                        namespace=w.namespace))
    # a claim whose workload vanished altogether (no pods, no objects, no config)
    for slug in sorted(snap.claims - set(found)):
        claims.append(ClaimDecision(workload=slug, contract=policy.default_contract,
                                    kind="deployment", source="k8s", requests={},
                                    largest_pod={}, pods=0))
    return IntakeDecision(claims=tuple(claims), tokens=tuple(tokens), warnings=tuple(warnings),
                          workloads=len(found))


def _packed(w: _K8sWorkload, size: int, placed: _Placed,
            overhead: Mapping[str, Mapping[str, int]], capacity: Capacity
            ) -> tuple[int, int, Mapping[str, int]]:
    """A gang of pods packed by their requests (`core.gang.pack_gang`, design: Gangs, Truth): its
    members per gang are units, each holding an even share of the gang's pods; the claim
    counts members (as a Slurm gang's counts nodes) and its largest pod is one member's
    pods. One pod per unit where they ask for one per node (a ``DoNotSchedule`` spread over
    ``kubernetes.io/hostname``, or a required pod anti-affinity over it). Returns members
    per gang, members, the largest member."""
    flavors = {f.name: f for f in capacity.flavors}
    allocatable = []
    for pool in capacity.pools:
        flavor = flavors.get(pool.flavor)
        if flavor is None or pool.name in placed.ineligible or (
                pool.tier == "reclaimable" and not w.tolerates):
            continue
        alloc = flavor_allocatable(flavor, capacity.node_reserve)
        taken = overhead.get(flavor.name, {})
        allocatable.append({k: v - taken.get(k, 0) for k, v in alloc.items()})
    one_per_node = any(place.alone or any(
        s.topology_key == HOSTNAME_LABEL and s.when_unsatisfiable == "DoNotSchedule"
        for s in place.spread) for place, _ in w.placements if place is not None)
    packing = pack_gang(size, w.largest, allocatable, one_per_node=one_per_node)
    if packing.pods <= 1:
        return size, len(w.demand), w.largest
    gangs = max(1, len(w.demand) // size)
    return (packing.units, gangs * packing.units,
            {k: v * packing.pods for k, v in w.largest.items()})


def _plus(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b.get(k, 0) for k in {*a, *b}}


def _unplaced(w: _K8sWorkload, snap: K8sSnapshot, policy: K8sPolicy,
              truth: list[Cluster]) -> Unplaced | None:
    """The truth loop of `w` (`core.truth.unplaced`): None unless pods wait, the snapshot
    says when it is and the workload has units."""
    units = snap.units.get(w.slug)
    if not w.waiting or snap.now is None or units is None:
        return None
    if not truth:
        truth.append(Cluster(snap.nodes, snap.pods))
    return unplaced(w.slug, w.waiting, truth[0], units, now=snap.now,
                    after=policy.unplaced_after, label=policy.workload_label)


def gang_of(groups: Mapping[tuple[str, str], Sequence[str | None]],
            min_members: Mapping[tuple[str, str], int] | None = None) -> tuple[int, list[str]]:
    """A workload's members per gang from its pod groups, by (namespace, name): each group's
    seen pods' ``sco/gang-size`` annotations, else its PodGroup's ``spec.minMember`` (in
    `min_members` where that API is served), else the pods seen (`core.gang.pod_group_size`);
    and the problems: 0 without a group; groups of different sizes are planned as gangs of the
    largest."""
    sizes: dict[str, int] = {}
    problems: list[str] = []
    names = Counter(name for _, name in groups)
    for key in sorted(groups):
        seen = groups[key]
        # a group is named by its name, and by its namespace too where two namespaces share it
        name = key[1] if names[key[1]] == 1 else f"{key[0]}/{key[1]}"
        size, problem = pod_group_size(seen, (min_members or {}).get(key), len(seen))
        sizes[name] = size
        if problem:
            problems.append(f"pod group {name}: {problem}")
    if len(set(sizes.values())) > 1:
        problems.append("pod groups of different sizes (" + ", ".join(
            f"{n}: {s}" for n, s in sizes.items()) + f"); planned as gangs of "
            f"{max(sizes.values())}")
    return max(sizes.values(), default=0), problems


def _grown(w: _K8sWorkload, state: WorkloadState, objects: _Objects, *,
           configured: bool) -> bool:
    """A running workload whose desired replicas grew (a scale-up): its pods wait for capacity
    and one of its Deployments wants more replicas than it has available. A rolling update
    whose replicas are all available is no news."""
    if state.status != WorkloadStatus.RUNNING or not w.waiting:
        return False
    deployments, _, _ = _objects_of(w, objects, configured)
    return any(d.replicas > d.available_replicas for d in deployments)


def _k8s_token(w: _K8sWorkload, state: WorkloadState | None, snap: K8sSnapshot,
               policy: K8sPolicy, objects: _Objects,
               holds_memo: dict[tuple[tuple[str, int], ...], tuple[bool | None, str]],
               placed: _Placed, lost: Unplaced | None, *,
               configured: bool) -> TokenDecision | None:
    deployments, isvcs, jobs = _objects_of(w, objects, configured)
    kind = w.kind
    if isvcs and kind == "deployment":
        kind = "inference"

    def make(token: str, detail: dict[str, Any],
             teardown: tuple[ObjectRef, ...] = ()) -> TokenDecision | None:
        if not _emit(state, token):
            return None
        return TokenDecision(slug=w.slug, token=token, detail=detail, kind=kind, source="k8s",
                             contract=w.contract, namespace=w.namespace, teardown=teardown)

    # 1. quota blocks: pods that are never created
    if kind in ("deployment", "inference"):
        for dep in deployments:
            message = deployment_quota_block(dep, objects.replicasets_of(dep))
            if message is None:
                continue
            detail = {"object": f"Deployment {dep.namespace}/{dep.name}", "message": message}
            if policy.quota_block == "queue" and quota_request_fits(message):
                return make("POD_QUEUED", {**detail, "reason": "quota busy: the request alone "
                                           "fits the quota's limit"})
            return make("POD_QUOTA_EXCEEDED_FAILED", detail, _teardown_refs(w, deployments, isvcs))
    else:
        for job in jobs:
            message = events_quota_block(e for e in snap.events
                                         if e.involved_kind == "Job" and e.involved_name == job.name
                                         and e.namespace == job.namespace)
            if message is not None:
                return make("POD_CREATION_BLOCKED",
                            {"object": f"Job {job.namespace}/{job.name}", "message": message})
    # 2. a pod no node or pool could ever hold
    for shape, pod in w.shapes.items():  # each distinct request once (per intake)
        request = dict(shape)
        if shape not in holds_memo:
            holds_memo[shape] = could_ever_hold(request, snap.nodes, policy.capacity)
        holds, why = holds_memo[shape]
        if holds is False:
            teardown = _teardown_refs(w, deployments, isvcs) if kind != "job" else ()
            return make("POD_SCHEDULING_FAILED",
                        {"pod": f"{pod.namespace}/{pod.name}", "request": _json_request(request),
                         "reason": why, "message": scheduling_message(pod)}, teardown)
    # 2b. a pod whose placement no pool's units and no node could ever satisfy (design: Constraints)
    for pod, why, zones in placed.nowhere:
        request = effective_request(pod)
        if pod.node_name or _node_admits(pod, request, snap.nodes, zones):
            continue
        teardown = _teardown_refs(w, deployments, isvcs) if kind != "job" else ()
        return make("POD_SCHEDULING_FAILED",
                    {"pod": f"{pod.namespace}/{pod.name}", "request": _json_request(request),
                     "constraint": why, "reason": f"no pool or node satisfies its {why}",
                     "message": scheduling_message(pod)}, teardown)
    # 3. available
    if kind in ("deployment", "inference") and not w.waiting:
        ready_isvc = any(any(c.type == "Ready" and c.status == "True" for c in i.conditions)
                         for i in isvcs)
        if ready_isvc or (deployments and all(deployment_available(d) for d in deployments)):
            names = [f"{d.namespace}/{d.name}" for d in deployments]
            return make("DEPLOYMENT_AVAILABLE", {"deployments": names})
    # 4. placement truth (design: Truth): pods that cannot reach their units, or whose units
    # others fill
    lacking = None if policy.shared(w.slug) else not_isolated(w.waiting, w.slug)
    if lacking is not None:
        return make(PlacementToken.NOT_ISOLATED, lacking.detail())
    if lost is not None:
        return make(PlacementToken.UNPLACED, lost.detail())
    # 5. waiting for capacity
    if w.waiting:
        first = w.waiting[0]
        return make("POD_QUEUED", {"pods": len(w.waiting),
                                   "message": scheduling_message(first)})
    # 6. scheduled, starting
    if w.starting:
        return make("POD_INITIALIZING", {"pods": len(w.starting),
                                         "nodes": sorted({p.node_name for p in w.starting})})
    return None
