"""Kubelet heartbeats, node Leases, the taint-eviction controller and the Events of the
scheduler, the kubelet and the node lifecycle controller, as pure functions over API objects.

Each follows one upstream rule (kubernetes/kubernetes) and names it:

* the kubelet's node status (pkg/kubelet/kubelet_node_status.go `setNodeStatus`,
  `nodestatus.NodeAddress`, `ReadyCondition`): `heartbeat_status` (every condition's
  ``lastHeartbeatTime``, the addresses InternalIP/Hostname, nodeInfo) — posted when the status
  changes or every ``nodeStatusReportFrequency``, the Lease being the frequent heartbeat;
* the node lease (pkg/kubelet/nodelease, k8s.io/component-helpers/apimachinery/lease
  `controller.newLease`): `node_lease` in ``kube-node-lease`` (coordination.k8s.io/v1), owned
  by its Node, renewed every leaseDuration/4 (`renew_due`: the oldest first, a bounded batch a
  step, so thousands of nodes cost a bounded number of writes);
* the taint-eviction controller (pkg/controller/tainteviction/taint_eviction.go
  `processPodOnNode`, `getMinTolerationTime`): `noexecute_evictions` — a pod on a node with a
  NoExecute taint it does not tolerate is deleted now, one tolerating every such taint for a
  while (``tolerationSeconds``) once that is over, one tolerating them for ever never; the
  DefaultTolerationSeconds admission plugin's 300 s toleration of not-ready/unreachable applies
  to pods that do not name one;
* Events (k8s.io/client-go/tools/record): `event` builds a core/v1 Event (the scheduler's
  ``Scheduled`` / ``FailedScheduling``, the node lifecycle controller's ``NodeNotReady``, the
  taint manager's ``TaintManagerEviction``); `EventBudget` is the recorder's rate limit (a
  bounded number an agent step, the rest dropped and counted, as the broadcaster drops events
  it cannot send).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from scoctl.sim import k8s_controllers as controllers
from scoctl.sim import k8s_scheduler

Obj = dict[str, Any]

LEASE_NAMESPACE = "kube-node-lease"  # v1.NamespaceNodeLease
LEASE_DURATION_S = 40  # kubelet --node-lease-duration-seconds
LEASE_BATCH = 500  # leases renewed in one agent step at most
DEFAULT_TOLERATION_S = 300  # plugin/pkg/admission/defaulttolerationseconds
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def micro_time(moment: datetime) -> str:
    """metav1.MicroTime as the API writes it (a Lease's renewTime)."""
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


# --- the kubelet's heartbeat --------------------------------------------------------------------


def internal_ip(name: str) -> str:
    """A stable InternalIP for a simulated node (10.x.y.z from its name)."""
    digest = hashlib.sha256(name.encode()).digest()
    return f"10.{digest[0]}.{digest[1]}.{max(1, digest[2])}"


def heartbeat_status(node: Mapping[str, Any], stamp: str) -> Obj:
    """`setNodeStatus`: the Node's conditions with ``lastHeartbeatTime`` now (status and
    transition times as they were), its addresses (InternalIP, Hostname) and nodeInfo."""
    status = node.get("status") or {}
    name = str(_meta(node).get("name"))
    conditions = [{**c, "lastHeartbeatTime": stamp} for c in status.get("conditions") or []]
    addresses = list(status.get("addresses") or []) or [
        {"type": "InternalIP", "address": internal_ip(name)},
        {"type": "Hostname", "address": name}]
    out: Obj = {"conditions": conditions, "addresses": addresses}
    if status.get("nodeInfo"):
        out["nodeInfo"] = dict(status["nodeInfo"])
    return out


def node_lease(node: Mapping[str, Any], renew: datetime,
               duration: int = LEASE_DURATION_S) -> Obj:
    """`newLease`: the Node's Lease, named after it, held by it, owned by it."""
    meta = _meta(node)
    name = str(meta.get("name"))
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": LEASE_NAMESPACE,
                         "ownerReferences": [{"apiVersion": "v1", "kind": "Node", "name": name,
                                              "uid": meta.get("uid")}]},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": duration,
                     "renewTime": micro_time(renew)}}


def renew_due(last: Mapping[str, float], alive: Iterable[str], now: float, interval: float,
              cap: int = LEASE_BATCH) -> list[str]:
    """The nodes whose lease is due (not renewed for `interval` seconds), the longest
    waiting first, `cap` at most."""
    due = [(last.get(n, float("-inf")), n) for n in alive
           if now - last.get(n, float("-inf")) >= interval]
    return [n for _, n in sorted(due)[:cap]]


# --- the taint-eviction controller --------------------------------------------------------------


def _tolerations(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The pod's tolerations plus the DefaultTolerationSeconds admission's not-ready and
    unreachable ones (300 s) when it names none for them."""
    own = list((pod.get("spec") or {}).get("tolerations") or [])
    for key in (NOT_READY, UNREACHABLE):
        if not any(t.get("key") in (key, None, "") and t.get("effect") in (
                "NoExecute", None, "") for t in own):
            own.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                        "tolerationSeconds": DEFAULT_TOLERATION_S})
    return own


def min_toleration(pod: Mapping[str, Any], taints: Sequence[Mapping[str, Any]]
                   ) -> float | None:
    """`getMatchingTolerations` + `getMinTolerationTime`: -1 when some NoExecute taint is not
    tolerated (evict now), None when all are tolerated for ever, else the shortest
    ``tolerationSeconds``."""
    tolerations = _tolerations(pod)
    shortest: float | None = None
    for taint in taints:
        matching = []
        for t in tolerations:
            try:
                if k8s_scheduler.tolerates(t, taint):
                    matching.append(t)
            except k8s_scheduler.Unsupported:
                continue
        if not matching:
            return -1
        for t in matching:
            seconds = t.get("tolerationSeconds")
            if seconds is None:
                continue
            value = max(0.0, float(seconds))
            shortest = value if shortest is None else min(shortest, value)
    return shortest


@dataclass(frozen=True)
class Eviction:
    """A pod the taint manager deletes now (namespace, name, the taint's node)."""

    namespace: str
    name: str
    node: str


def noexecute_evictions(pods: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]],
                        now: datetime, first_seen: Mapping[tuple[str, str], datetime]
                        ) -> tuple[dict[tuple[str, str], datetime], list[Eviction]]:
    """`processPodOnNode` over the bound, not terminating pods of nodes with NoExecute taints:
    the pods to delete now and, per pod still tolerating for a while, when it was first seen
    so (the timer's start: the taint's ``timeAdded`` when given)."""
    tainted: dict[str, list[Mapping[str, Any]]] = {}
    for node in nodes:
        taints = [t for t in (node.get("spec") or {}).get("taints") or []
                  if t.get("effect") == "NoExecute"]
        if taints:
            tainted[str(_meta(node).get("name"))] = taints
    seen: dict[tuple[str, str], datetime] = {}
    out: list[Eviction] = []
    if not tainted:
        return seen, out
    for pod in pods:
        where = str((pod.get("spec") or {}).get("nodeName") or "")
        if where not in tainted or not controllers.is_pod_active(pod):
            continue
        key = (str(_meta(pod).get("namespace")), str(_meta(pod).get("name")))
        wait = min_toleration(pod, tainted[where])
        if wait is None:
            continue
        if wait < 0:
            out.append(Eviction(key[0], key[1], where))
            continue
        added = [controllers.parse_time(t["timeAdded"]) for t in tainted[where]
                 if t.get("timeAdded")]
        start = first_seen.get(key) or (min(added) if added else now)
        seen[key] = start
        if start + timedelta(seconds=wait) <= now:
            out.append(Eviction(key[0], key[1], where))
    return seen, out


def taint_eviction_status(pod: Mapping[str, Any], stamp: str) -> Obj:
    """`addConditionAndDeletePod`: ``DisruptionTarget=True/DeletionByTaintManager``."""
    status: Obj = dict(pod.get("status") or {})
    status["conditions"] = [c for c in status.get("conditions") or []
                            if c.get("type") != "DisruptionTarget"] + [{
        "type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
        "message": "Taint manager: deleting due to NoExecute taint",
        "lastTransitionTime": stamp}]
    return status


# --- Events -------------------------------------------------------------------------------------


def event(involved: Mapping[str, Any], reason: str, message: str, stamp: str, *,
          component: str, type_: str = "Normal", host: str | None = None) -> Obj:
    """A core/v1 Event about `involved` (`record.makeEvent`: named ``<object>.<unique>``, in
    the object's namespace, ``default`` for cluster-scoped ones such as Nodes)."""
    meta = _meta(involved)
    namespace = str(meta.get("namespace") or "default")
    unique = hashlib.sha256(f"{meta.get('uid')}{reason}{message}{stamp}".encode()
                            ).hexdigest()[:16]
    source: Obj = {"component": component}
    if host:
        source["host"] = host
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta.get('name')}.{unique}"[:253], "namespace": namespace},
            "involvedObject": {"apiVersion": str(involved.get("apiVersion") or "v1"),
                               "kind": str(involved.get("kind")),
                               "name": str(meta.get("name")),
                               **({"namespace": meta["namespace"]}
                                  if meta.get("namespace") else {}),
                               "uid": meta.get("uid")},
            "reason": reason, "message": message, "type": type_, "count": 1,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "source": source,
            "reportingComponent": component}


class EventBudget:
    """The recorder's rate limit: `take` grants at most `per_step` events a step; the rest are
    dropped and counted in `dropped`."""

    def __init__(self, per_step: int) -> None:
        self.per_step = per_step
        self.left = per_step
        self.dropped = 0

    def reset(self) -> None:
        self.left = self.per_step

    def take(self, events: Sequence[Obj]) -> list[Obj]:
        granted = list(events[:max(0, self.left)])
        self.left -= len(granted)
        self.dropped += len(events) - len(granted)
        return granted
