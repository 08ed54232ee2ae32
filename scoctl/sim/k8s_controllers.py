"""The simulated cluster's controllers, as pure functions over API objects (JSON dicts).

Each function follows one upstream rule (kubernetes/kubernetes) and names it; the Kubernetes
emulator (`k8s_emulator`) and the node agent (`agent`) read the objects, call these, and write
what they return:

* the disruption controller (pkg/controller/disruption/disruption.go): `disruption_status`
  writes a PodDisruptionBudget's ``status`` (`trySync`, `getExpectedPodCount`,
  `getExpectedScale`, `countHealthyPods`, `buildDisruptedPodMap`, `updatePdbStatus`, `failSafe`);
* the eviction subresource (pkg/registry/core/pod/storage/eviction.go): `judge_eviction`
  decides an eviction from that status (`canIgnorePDB`, ``unhealthyPodEvictionPolicy``,
  `checkAndDecrement` and its 429s);
* the ReplicaSet controller's scale-down victims (pkg/controller/replicaset/replica_set.go
  `getPodsToDelete`, `getPodsRankedByRelatedPodsOnSameNode`; pkg/controller/controller_utils.go
  `ActivePodsWithRanks.Less`): `pods_to_delete`;
* the pod garbage collector (pkg/controller/podgc/gc_controller.go `gcOrphaned`):
  `orphaned_pods`, `podgc_failed_status`;
* the node lifecycle controller (pkg/controller/nodelifecycle/node_lifecycle_controller.go
  `tryUpdateNodeHealth`): `node_health`.

Time is passed in (``now``, a datetime for what is written into objects, seconds for the
agent's own clocks); nothing here does I/O.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

Obj = dict[str, Any]

# disruption.go: a pod an eviction spent budget on counts as disrupted this long at most
DELETION_TIMEOUT = timedelta(minutes=2)
# eviction.go createTooManyRequestsError: the Retry-After of "still being processed"
STILL_PROCESSING_RETRY_AFTER = 10
# eviction.go MaxDisruptedPodSize
MAX_DISRUPTED_PODS = 2000
# gc_controller.go quarantineTime: a node missing from the informer this long is gone for good
PODGC_QUARANTINE_S = 40.0
# kube-controller-manager --node-monitor-grace-period (40 s; 50 s since v1.32)
NODE_MONITOR_GRACE_S = 40.0
# k8s.io/api/core/v1 annotation read by ActivePodsWithRanks (feature PodDeletionCost, GA)
POD_DELETION_COST = "controller.kubernetes.io/pod-deletion-cost"
ALWAYS_ALLOW = "AlwaysAllow"
IF_HEALTHY_BUDGET = "IfHealthyBudget"
UNHEALTHY_POD_EVICTION_POLICIES = (IF_HEALTHY_BUDGET, ALWAYS_ALLOW)
EVICTION_REFUSED = "Cannot evict pod as it would violate the pod's disruption budget."

# the controllers whose scale a budget can read (getPodReplicaSet, getPodDeployment, and the
# scale subresource of the kinds the emulator serves); any other owner has no scale
_SCALABLE = {"ReplicaSet": "replicasets.apps", "Deployment": "deployments.apps"}
_PLURALS = {"Job": "jobs.batch", "InferenceService": "inferenceservices.serving.kserve.io",
            "StatefulSet": "statefulsets.apps", "DaemonSet": "daemonsets.apps"}


def rfc3339(moment: datetime) -> str:
    """A time as the API writes it."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_time(text: str) -> datetime:
    """An RFC 3339 time the API wrote."""
    return datetime.fromisoformat(str(text).replace("Z", "+00:00"))


def selector_matches(selector: Any, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels and matchExpressions) against labels; an empty
    selector selects everything, a missing one nothing (policy/v1)."""
    if not isinstance(selector, Mapping):
        return False
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or []:
        key, op = expr.get("key"), expr.get("operator")
        values = set(expr.get("values") or [])
        present = key in labels
        if (op == "In" and (not present or labels[key] not in values)) \
                or (op == "NotIn" and present and labels[key] in values) \
                or (op == "Exists" and not present) or (op == "DoesNotExist" and present):
            return False
    return True


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels: Mapping[str, str] = _meta(obj).get("labels") or {}
    return labels


def controller_ref(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """metav1.GetControllerOf: the owner reference with ``controller: true``."""
    return next((r for r in _meta(obj).get("ownerReferences") or [] if r.get("controller")),
                None)


def is_pod_ready(pod: Mapping[str, Any]) -> bool:
    """pkg/api/v1/pod `IsPodReady`: the Ready condition is True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _terminating(obj: Mapping[str, Any]) -> bool:
    return bool(_meta(obj).get("deletionTimestamp"))


# --- the disruption controller -------------------------------------------------------------------


class SyncFailed(Exception):
    """`trySync` could not compute the budget (a pod's controller has no scale)."""


def _scaled(value: Any, total: int) -> int:
    """intstr.GetScaledValueFromIntOrPercent with roundUp=true."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(total * int(value[:-1]) / 100)
    return int(value)


def expected_scale(pods: Sequence[Mapping[str, Any]],
                   controllers: Mapping[str, Mapping[str, Any]]) -> tuple[int, list[str]]:
    """disruption.go `getExpectedScale`: the sum of the scales of the pods' controllers, each
    counted once, and the names of the pods without a controller (left out of the sum).

    `controllers` maps uid → the namespace's ReplicaSets and Deployments (any other kind has
    no scale here). A ReplicaSet a Deployment controls counts as the Deployment
    (`getPodDeployment`). Raises SyncFailed when a pod's controller is missing or is a kind
    without the scale subresource (a Job: `getScaleController`)."""
    scale: dict[str, int] = {}
    unmanaged: list[str] = []
    for pod in pods:
        ref = controller_ref(pod)
        name = str(_meta(pod).get("name"))
        if ref is None:
            unmanaged.append(name)
            continue
        uid, kind = str(ref.get("uid")), str(ref.get("kind"))
        if uid in scale:
            continue
        if kind not in _SCALABLE:
            plural = _PLURALS.get(kind, f"{kind.lower()}s")
            raise SyncFailed(f"{plural} does not implement the scale subresource")
        owner = controllers.get(uid)
        if owner is None or owner.get("kind") != kind:
            raise SyncFailed(f'found no controllers for pod "{name}"')
        top = owner
        if kind == "ReplicaSet":
            dep_ref = controller_ref(owner)
            deployment = controllers.get(str(dep_ref.get("uid"))) if dep_ref else None
            if deployment is not None and deployment.get("kind") == "Deployment":
                top = deployment
        top_uid = str(_meta(top).get("uid"))
        scale[uid] = 0  # seen; the scale is the top controller's, counted once
        scale[top_uid] = int((top.get("spec") or {}).get("replicas", 1))
    return sum(v for k, v in scale.items()), unmanaged


def expected_pod_count(pdb: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
                       controllers: Mapping[str, Mapping[str, Any]]) -> tuple[int, int]:
    """disruption.go `getExpectedPodCount`: (expectedCount, desiredHealthy). An integer
    ``minAvailable`` counts the selected pods; ``maxUnavailable`` and a percentage
    ``minAvailable`` scale with the controllers (`expected_scale`)."""
    spec = pdb.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        expected, _ = expected_scale(pods, controllers)
        return expected, max(0, expected - _scaled(spec["maxUnavailable"], expected))
    min_available = spec.get("minAvailable")
    if min_available is None:
        return 0, 0
    if isinstance(min_available, str) and min_available.endswith("%"):
        expected, _ = expected_scale(pods, controllers)
        return expected, _scaled(min_available, expected)
    return len(pods), int(min_available)


def disrupted_pod_map(pdb: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
                      now: datetime) -> dict[str, str]:
    """disruption.go `buildDisruptedPodMap`: the ``disruptedPods`` entries still to honour:
    pods not yet being deleted, within `DELETION_TIMEOUT` of their eviction."""
    recorded = (pdb.get("status") or {}).get("disruptedPods") or {}
    out: dict[str, str] = {}
    for pod in pods:
        name = str(_meta(pod).get("name"))
        if _terminating(pod) or name not in recorded:
            continue
        if parse_time(recorded[name]) + DELETION_TIMEOUT >= now:
            out[name] = recorded[name]
    return out


def count_healthy_pods(pods: Sequence[Mapping[str, Any]], disrupted: Mapping[str, str]) -> int:
    """disruption.go `countHealthyPods`: Ready pods neither being deleted nor disrupted."""
    return sum(1 for p in pods if not _terminating(p)
               and str(_meta(p).get("name")) not in disrupted and is_pod_ready(p))


def _allowed_condition(status: Obj, previous: Sequence[Mapping[str, Any]], now: datetime,
                       *, reason: str | None = None, message: str = "") -> Obj:
    """pdbhelper `UpdateDisruptionAllowedCondition` (apimeta.SetStatusCondition: the
    transition time stays while the status does)."""
    allowed = int(status.get("disruptionsAllowed", 0)) > 0 and reason is None
    cond: Obj = {"type": "DisruptionAllowed", "status": "True" if allowed else "False",
                 "reason": reason or ("SufficientPods" if allowed else "InsufficientPods"),
                 "message": message,
                 "observedGeneration": int(status.get("observedGeneration", 0)),
                 "lastTransitionTime": rfc3339(now)}
    old = next((c for c in previous if c.get("type") == "DisruptionAllowed"), None)
    if old is not None and old.get("status") == cond["status"] and old.get(
            "lastTransitionTime"):
        cond["lastTransitionTime"] = old["lastTransitionTime"]
    return cond


def disruption_status(pdb: Mapping[str, Any], pods: Sequence[Mapping[str, Any]],
                      controllers: Mapping[str, Mapping[str, Any]], now: datetime) -> Obj:
    """disruption.go `trySync` → `updatePdbStatus`: the status the disruption controller writes
    for `pdb` over its namespace's `pods` (all of them; the budget's selector picks its own,
    an empty selector every pod, as `getPodsForPdb` lists them).

    ``disruptionsAllowed`` = currentHealthy − desiredHealthy, and 0 when that is negative or
    no pod is expected (``expectedPods`` ≤ 0: bare pods under ``maxUnavailable`` or a
    percentage); ``observedGeneration`` = the budget's generation. When the expected count
    cannot be computed (a Job's pods under ``maxUnavailable``), `failSafe`: the status as it
    was with ``disruptionsAllowed`` 0 and ``DisruptionAllowed=False/SyncFailed`` (its
    ``observedGeneration`` is not advanced)."""
    previous: Obj = dict(pdb.get("status") or {})
    conditions = list(previous.get("conditions") or [])
    selector = (pdb.get("spec") or {}).get("selector")
    selected = [p for p in pods if selector_matches(selector, _labels(p))]
    try:
        expected, desired = expected_pod_count(pdb, selected, controllers)
    except SyncFailed as exc:
        failed = {**previous, "disruptionsAllowed": 0}
        failed["conditions"] = [c for c in conditions if c.get("type") != "DisruptionAllowed"]
        failed["conditions"].append(_allowed_condition(failed, conditions, now,
                                                       reason="SyncFailed", message=str(exc)))
        return failed
    disrupted = disrupted_pod_map(pdb, selected, now)
    healthy = count_healthy_pods(selected, disrupted)
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    status: Obj = {"currentHealthy": healthy, "desiredHealthy": desired,
                   "expectedPods": expected, "disruptionsAllowed": allowed,
                   "observedGeneration": int(_meta(pdb).get("generation", 0))}
    if disrupted:
        status["disruptedPods"] = disrupted
    status["conditions"] = [c for c in conditions if c.get("type") != "DisruptionAllowed"] + [
        _allowed_condition(status, conditions, now)]
    return status


# --- the eviction subresource --------------------------------------------------------------------


@dataclass(frozen=True)
class Eviction:
    """What the eviction subresource does with one eviction: delete the pod (`allowed`), after
    writing `status` into the budget `pdb` when it spent one of its disruptions; or refuse it
    with an API error (`code`, `reason`, `message`, the ``DisruptionBudget`` `cause`, and
    `retry_after` seconds)."""

    allowed: bool
    pdb: str | None = None
    status: Obj | None = None
    code: int = 201
    reason: str = ""
    message: str = ""
    cause: str = ""
    retry_after: int | None = None


def can_ignore_pdb(pod: Mapping[str, Any]) -> bool:
    """eviction.go `canIgnorePDB`: a terminal (Succeeded, Failed), Pending or terminating pod
    is deleted without asking any budget (it disrupts nothing that runs)."""
    return _phase(pod) in ("Succeeded", "Failed", "Pending") or _terminating(pod)


def budgets_of_pod(pod: Mapping[str, Any],
                   pdbs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """eviction.go `getPodDisruptionBudgets`: the budgets of the pod's namespace whose selector
    matches its labels (there, a nil or empty selector matches nothing)."""
    ns = _meta(pod).get("namespace")
    out = []
    for pdb in pdbs:
        selector = (pdb.get("spec") or {}).get("selector")
        if _meta(pdb).get("namespace") != ns or not isinstance(selector, Mapping) or not (
                selector.get("matchLabels") or selector.get("matchExpressions")):
            continue
        if selector_matches(selector, _labels(pod)):
            out.append(pdb)
    return out


def judge_eviction(pod: Mapping[str, Any], pdbs: Sequence[Mapping[str, Any]],
                   now: datetime) -> Eviction:
    """eviction.go `EvictionREST.Create` for `pod` under the namespace's `pdbs`, from their
    ``status`` as the disruption controller last wrote it:

    * `canIgnorePDB` pods go at once; so do pods no budget selects; two budgets: 500;
    * a pod that is not Ready goes without spending the budget when its
      ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``, or (``IfHealthyBudget``, the default)
      while currentHealthy ≥ desiredHealthy > 0;
    * else `checkAndDecrement`: 429 "… is still being processed by the server." with
      Retry-After 10 while ``observedGeneration < generation``; 403 for a negative count or
      too many ``disruptedPods``; 429 "needs N healthy pods and has M currently" when
      ``disruptionsAllowed`` is 0; otherwise one disruption is spent (``disruptionsAllowed``
      − 1, the pod recorded in ``disruptedPods``) and the pod goes."""
    if can_ignore_pdb(pod):
        return Eviction(True)
    matching = budgets_of_pod(pod, pdbs)
    if len(matching) > 1:
        return Eviction(False, code=500, reason="InternalError",
                        message="This pod has more than one PodDisruptionBudget, which the "
                                "eviction subresource does not support.")
    if not matching:
        return Eviction(True)
    pdb = matching[0]
    name = str(_meta(pdb).get("name"))
    status: Obj = dict(pdb.get("status") or {})
    healthy, desired = int(status.get("currentHealthy", 0)), int(status.get("desiredHealthy", 0))
    if not is_pod_ready(pod):
        policy = (pdb.get("spec") or {}).get("unhealthyPodEvictionPolicy")
        if policy == ALWAYS_ALLOW or (healthy >= desired and desired > 0):
            return Eviction(True)
    if int(status.get("observedGeneration", 0)) < int(_meta(pdb).get("generation", 0)):
        return Eviction(False, name, code=429, reason="TooManyRequests",
                        message=EVICTION_REFUSED,
                        cause=f"The disruption budget {name} is still being processed by the "
                              "server.", retry_after=STILL_PROCESSING_RETRY_AFTER)
    allowed = int(status.get("disruptionsAllowed", 0))
    disrupted = dict(status.get("disruptedPods") or {})
    if allowed < 0:
        return Eviction(False, name, code=403, reason="Forbidden",
                        message=f'poddisruptionbudgets.policy "{name}" is forbidden: pdb '
                                "disruptions allowed is negative")
    if len(disrupted) > MAX_DISRUPTED_PODS:
        return Eviction(False, name, code=403, reason="Forbidden",
                        message=f'poddisruptionbudgets.policy "{name}" is forbidden: '
                                "DisruptedPods map too big - too many evictions not confirmed "
                                "by PDB controller")
    if allowed == 0:
        return Eviction(False, name, code=429, reason="TooManyRequests",
                        message=EVICTION_REFUSED,
                        cause=f"The disruption budget {name} needs {desired} healthy pods and "
                              f"has {healthy} currently")
    status["disruptionsAllowed"] = allowed - 1
    disrupted[str(_meta(pod).get("name"))] = rfc3339(now)
    status["disruptedPods"] = disrupted
    if allowed - 1 == 0:
        conditions = list(status.get("conditions") or [])
        status["conditions"] = [c for c in conditions if c.get("type") != "DisruptionAllowed"]
        status["conditions"].append(_allowed_condition(status, conditions, now))
    return Eviction(True, name, status)


# --- the ReplicaSet controller's scale-down victims ----------------------------------------------


def is_pod_active(pod: Mapping[str, Any]) -> bool:
    """controller_utils.go `IsPodActive`: neither finished nor being deleted."""
    return _phase(pod) not in ("Succeeded", "Failed") and not _terminating(pod)


_PHASE_ORDINAL = {"Pending": 0, "Unknown": 1, "Running": 2}


def _deletion_cost(pod: Mapping[str, Any]) -> int:
    value = (_meta(pod).get("annotations") or {}).get(POD_DELETION_COST)
    return int(value) if value is not None and re.fullmatch(r"-?\d+", str(value)) else 0


def _ready_time(pod: Mapping[str, Any]) -> datetime | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True" and cond.get(
                "lastTransitionTime"):
            return parse_time(cond["lastTransitionTime"])
    return None


def _created(pod: Mapping[str, Any]) -> datetime | None:
    stamp = _meta(pod).get("creationTimestamp")
    return parse_time(stamp) if stamp else None


def _log_rank(moment: datetime, now: datetime) -> int:
    """controller_utils.go `logarithmicRankDiff`'s rank of one time: log2 of its age in ns."""
    age = (now - moment) / timedelta(microseconds=1) * 1000
    return int(math.log2(age)) if age > 0 else -1


def _time_order(a: datetime | None, b: datetime | None, now: datetime) -> int:
    """-1 when the pod at `a` goes first: a missing time first, then the newer (in log2 age
    buckets, LogarithmicScaleDown); 0 when they tie (then by uid)."""
    if a == b:
        return 0
    if a is None or b is None:
        return -1 if a is None else 1
    diff = _log_rank(a, now) - _log_rank(b, now)
    return (diff > 0) - (diff < 0)


def _max_restarts(pod: Mapping[str, Any]) -> int:
    return max((int(c.get("restartCount") or 0)
                for c in (pod.get("status") or {}).get("containerStatuses") or []), default=0)


def _less(a: Mapping[str, Any], rank_a: int, b: Mapping[str, Any], rank_b: int,
          now: datetime) -> bool:
    """controller_utils.go `ActivePodsWithRanks.Less`: True when `a` should go before `b`."""
    node_a = str((a.get("spec") or {}).get("nodeName") or "")
    node_b = str((b.get("spec") or {}).get("nodeName") or "")
    if node_a != node_b and (not node_a or not node_b):
        return not node_a  # 1. unassigned < assigned
    phase_a, phase_b = _PHASE_ORDINAL.get(_phase(a), 0), _PHASE_ORDINAL.get(_phase(b), 0)
    if phase_a != phase_b:
        return phase_a < phase_b  # 2. Pending < Unknown < Running
    if is_pod_ready(a) != is_pod_ready(b):
        return not is_pod_ready(a)  # 3. not ready < ready
    if _deletion_cost(a) != _deletion_cost(b):
        return _deletion_cost(a) < _deletion_cost(b)  # 4. lower pod-deletion-cost
    if rank_a != rank_b:
        return rank_a > rank_b  # 5. doubled up < not doubled up
    uid_a, uid_b = str(_meta(a).get("uid") or ""), str(_meta(b).get("uid") or "")
    if is_pod_ready(a) and is_pod_ready(b):  # 6. ready for less time < more time
        order = _time_order(_ready_time(a), _ready_time(b), now)
        if _ready_time(a) != _ready_time(b):
            return order < 0 if order else uid_a < uid_b
    if _max_restarts(a) != _max_restarts(b):
        return _max_restarts(a) > _max_restarts(b)  # 7. more restarts first
    if _created(a) != _created(b):  # 8. newer < older
        order = _time_order(_created(a), _created(b), now)
        return order < 0 if order else uid_a < uid_b
    return False


def pods_to_delete(pods: Sequence[Mapping[str, Any]], related: Sequence[Mapping[str, Any]],
                   count: int, now: datetime) -> list[Mapping[str, Any]]:
    """replica_set.go `getPodsToDelete`: the `count` pods of a ReplicaSet to remove, ranked by
    `getPodsRankedByRelatedPodsOnSameNode` (each pod's rank: the active pods of `related` —
    the pods of every ReplicaSet of its Deployment — on its node) and sorted by
    `ActivePodsWithRanks.Less`: unassigned, Pending, not Ready, lower
    ``controller.kubernetes.io/pod-deletion-cost``, more related pods on the same node, Ready
    for less time, more restarts, newer (times in log2 buckets of their age, ties by uid) —
    so a scale-down leaves the survivors spread over the nodes."""
    if count <= 0:
        return []
    on_node: dict[str, int] = {}
    for pod in related:
        if is_pod_active(pod):
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            on_node[node] = on_node.get(node, 0) + 1
    ranked = [(pod, on_node.get(str((pod.get("spec") or {}).get("nodeName") or ""), 0))
              for pod in pods]

    def compare(x: tuple[Mapping[str, Any], int], y: tuple[Mapping[str, Any], int]) -> int:
        if _less(x[0], x[1], y[0], y[1], now):
            return -1
        if _less(y[0], y[1], x[0], x[1], now):
            return 1
        # a tie (upstream's unstable sort leaves it to chance): the later name, usually the
        # newer pod of the same second, first
        name_x, name_y = str(_meta(x[0]).get("name")), str(_meta(y[0]).get("name"))
        return (name_x < name_y) - (name_x > name_y)

    ranked.sort(key=functools.cmp_to_key(compare))
    return [pod for pod, _ in ranked[:count]]


# --- the pod garbage collector -------------------------------------------------------------------


def orphaned_pods(pods: Sequence[Mapping[str, Any]], nodes: Sequence[str],
                  missing_since: Mapping[str, float], now: float,
                  quarantine: float = PODGC_QUARANTINE_S
                  ) -> tuple[dict[str, float], list[Mapping[str, Any]]]:
    """gc_controller.go `gcOrphaned`: pods bound to a node that does not exist are deleted once
    the node has been missing for `quarantine` seconds (`quarantineTime`: it may be coming
    back). `missing_since` (node → when it was first seen missing, in the caller's clock) is
    the delaying queue; returns it updated (nodes seen again dropped) and the pods to delete."""
    existing = set(nodes)
    since: dict[str, float] = {}
    doomed: list[Mapping[str, Any]] = []
    for pod in pods:
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        if not node or node in existing:
            continue
        first = since.setdefault(node, missing_since.get(node, now))
        if now - first >= quarantine:
            doomed.append(pod)
    return since, doomed


def podgc_failed_status(pod: Mapping[str, Any], now: datetime) -> Obj:
    """gc_controller.go `markFailedAndDeletePodWithCondition` for an orphan: phase Failed
    (unless already finished) with ``DisruptionTarget=True/DeletionByPodGC``, written before
    the pod is deleted with grace period 0."""
    status: Obj = dict(pod.get("status") or {})
    if status.get("phase") not in ("Succeeded", "Failed"):
        status["phase"] = "Failed"
    status["conditions"] = [c for c in status.get("conditions") or []
                            if c.get("type") != "DisruptionTarget"] + [{
        "type": "DisruptionTarget", "status": "True", "reason": "DeletionByPodGC",
        "message": "PodGC: node no longer exists", "lastTransitionTime": rfc3339(now)}]
    return status


# --- the node lifecycle controller ---------------------------------------------------------------

_NODE_CONDITIONS = ("Ready", "MemoryPressure", "DiskPressure", "PIDPressure")


def node_health(node: Mapping[str, Any], last_heard: float | None, now: float,
                stamp: datetime, grace: float = NODE_MONITOR_GRACE_S) -> list[Obj] | None:
    """node_lifecycle_controller.go `tryUpdateNodeHealth`: once the kubelet has not posted the
    Node's status for `grace` seconds (node-monitor-grace-period), the Ready condition (and
    the kubelet's other conditions) become ``Unknown`` with reason ``NodeStatusUnknown``,
    "Kubelet stopped posting node status." (a Node that never posted one:
    ``NodeStatusNeverUpdated``). Returns the new conditions, or None when nothing changes.
    `last_heard` is when the kubelet last reported, in the caller's clock (None: never)."""
    if last_heard is not None and now - last_heard < grace:
        return None
    conditions = list((node.get("status") or {}).get("conditions") or [])
    by_type = {c.get("type"): c for c in conditions}
    out: list[Obj] = []
    changed = False
    for cond in conditions:
        if cond.get("type") in _NODE_CONDITIONS and cond.get("status") != "Unknown":
            out.append({**cond, "status": "Unknown", "reason": "NodeStatusUnknown",
                        "message": "Kubelet stopped posting node status.",
                        "lastTransitionTime": rfc3339(stamp)})
            changed = True
        else:
            out.append(dict(cond))
    if "Ready" not in by_type:
        out.append({"type": "Ready", "status": "Unknown", "reason": "NodeStatusNeverUpdated",
                    "message": "Kubelet never posted node status.",
                    "lastHeartbeatTime": rfc3339(stamp), "lastTransitionTime": rfc3339(stamp)})
        changed = True
    return out if changed else None
