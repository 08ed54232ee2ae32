"""Kubernetes Events from scoctl's decisions (design: Visibility): which core/v1 Events should
stand, and
which writes bring the cluster's Events there. Pure: values in, values out.

What scoctl says, and on what:

* ``Nominated`` (Normal) on a pending pod scoctl manages whose workload has a feasible plan with
  units: how many units, in which pools, from which plan generation (Karpenter's ``Nominated``);
* ``FailedProvisioning`` (Warning) on such a pod whose workload's plan is infeasible, or whose
  workload failed (the gate, a quota block): the reason;
* ``NotIsolated`` / ``Unplaced`` (Warning) on such a pod whose workload is queued because its
  pods lack the workload's toleration or node selector (``POD_NOT_ISOLATED``), or because its
  Ready units have no room for them (``PODS_UNPLACED``): the reason;
* ``DisruptionStarted`` (Normal) on a Node scoctl drains (its instance is ``draining``), and
  ``DisruptionBlocked`` (Warning) on a Node whose disruption the budget holds back;
* ``ReclaimNoticed`` (Warning) on a Node under an open reclaim notice.

Events name their object as ``kubectl describe`` finds them (its field selector on
``involvedObject.kind/name/namespace/uid``): a Pod by kind, namespace, name and uid; a Node,
cluster-scoped, in the ``default`` namespace with its name as uid, as the kubelet records Node
events (``pkg/kubelet/kubelet.go`` ``nodeRef``, UID = node name; ``kubectl describe node`` looks
up both the Node's uid and its name, ``staging/src/k8s.io/kubectl/pkg/describe/describe.go``
``NodeDescriber.Describe``), and the namespace ``default`` as client-go's ``makeEvent`` gives a
cluster-scoped object (``tools/record/event.go``).

Series (core/v1 semantics, ``tools/record/events_cache.go`` ``EventCorrelator``): one Event object
per (object, reason), its name derived from both so a restarted scoctl finds it again
(`event_name`); a repeat patches ``count``, ``lastTimestamp`` and ``message``. Unlike client-go —
which records every repeat and aggregates what it sees within 10 minutes — scoctl's Events are
*level* facts recomputed every pass, so a pass that finds the same fact writes nothing. A write
happens when (`plan_writes`):

* the fact is new (create, ``count`` 1), or returns after it had ended (patch, ``count`` + 1);
* its message or type changed (patch, ``count`` + 1: a new plan, a new reason);
* it has stood unchanged for `REFRESH_S` (patch, ``count`` + 1, ``lastTimestamp`` now), so the
  apiserver's Event TTL (``--event-ttl``, 1 h by default) never expires a condition that holds.

A steady state therefore adds no Event writes between refreshes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from functools import cached_property
from operator import attrgetter
from typing import Any, Literal

from scoctl.core.demand import is_provisionable, workload_of
from scoctl.core.intake.k8s import OWNER_LABELS, K8sPolicy, is_managed_pod
from scoctl.core.model import (
    InstanceRecord,
    NoticedRecord,
    PlanWorkloadRecord,
    PodInfo,
    WorkloadRecord,
    WorkloadRef,
)
from scoctl.core.model.vocabulary import (
    DisruptionReason,
    InstanceStatus,
    PlacementToken,
    WorkloadStatus,
)

COMPONENT = "scoctl"  # source.component and reportingComponent (reportingController)
NOMINATED = "Nominated"
FAILED_PROVISIONING = "FailedProvisioning"
DISRUPTION_STARTED = "DisruptionStarted"
DISRUPTION_BLOCKED = "DisruptionBlocked"
RECLAIM_NOTICED = "ReclaimNoticed"
NOT_ISOLATED = "NotIsolated"
UNPLACED = "Unplaced"
REASONS = (NOMINATED, FAILED_PROVISIONING, DISRUPTION_STARTED, DISRUPTION_BLOCKED,
           RECLAIM_NOTICED, NOT_ISOLATED, UNPLACED)
# the placement-truth tokens of a queued workload, and the Event its pending pods get
_PLACEMENT_EVENTS = {PlacementToken.NOT_ISOLATED: NOT_ISOLATED,
                     PlacementToken.UNPLACED: UNPLACED}
NODE_EVENT_NAMESPACE = "default"
REFRESH_S = 1800.0  # half the apiserver's default --event-ttl (1 h)
FORGET_S = 3600.0  # an ended series older than the TTL is gone from the API: forget it too
MAX_MESSAGE = 1024  # events.k8s.io's note limit; core/v1 messages kept as short
MAX_NAME = 253

EventType = Literal["Normal", "Warning"]
Key = tuple[str, str, str, str, str]  # kind, namespace, name, uid, reason


@dataclass(frozen=True)
class ObjectRef:
    """An Event's involvedObject."""

    kind: str
    name: str
    namespace: str = ""
    uid: str = ""
    api_version: str = "v1"

    @property
    def event_namespace(self) -> str:
        """Where its Events live: its own namespace, ``default`` for a cluster-scoped one."""
        return self.namespace or NODE_EVENT_NAMESPACE

    def as_dict(self) -> dict[str, str]:
        out = {"apiVersion": self.api_version, "kind": self.kind, "name": self.name}
        if self.namespace:
            out["namespace"] = self.namespace
        if self.uid:
            out["uid"] = self.uid
        return out


def pod_ref(pod: PodInfo) -> ObjectRef:
    return ObjectRef("Pod", pod.name, pod.namespace, pod.uid)


def node_ref(name: str) -> ObjectRef:
    """A Node as the kubelet names it in its Events (UID = the node's name)."""
    return ObjectRef("Node", name, "", name)


@dataclass(frozen=True)
class Wanted:
    """One Event that should stand: on `ref`, for `reason`, saying `message`."""

    ref: ObjectRef
    reason: str
    message: str
    type: EventType = "Normal"

    @cached_property
    def key(self) -> Key:
        r = self.ref
        return (r.kind, r.namespace, r.name, r.uid, self.reason)


@dataclass(frozen=True)
class Series:
    """What scoctl last wrote of one (object, reason) Event: its name, message, type, count,
    first and last timestamps (Unix seconds), and whether the fact still stood last pass."""

    name: str
    namespace: str
    message: str
    type: str
    count: int
    first: float
    last: float
    active: bool = True


@dataclass(frozen=True)
class Write:
    """One API write: create the Event `body`, or patch `body` (count, lastTimestamp, message,
    type) onto the Event `name`; `series` is the series once it succeeded."""

    op: Literal["create", "patch"]
    key: Key
    namespace: str
    name: str
    body: dict[str, Any]
    series: Series


def event_name(ref: ObjectRef, reason: str) -> str:
    """The Event's name: the object's name and a digest of (object, reason), so one object has
    one Event per reason, found again after a restart (client-go names them by time)."""
    digest = hashlib.sha256("/".join((ref.kind, ref.namespace, ref.name, ref.uid, reason))
                            .encode()).hexdigest()[:16]
    return f"{ref.name[:MAX_NAME - 17]}.{digest}"


def _stamp(at: float) -> str:
    """A metav1.Time: RFC 3339 to the second, UTC."""
    return datetime.fromtimestamp(int(at), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _message(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[:MAX_MESSAGE - 1] + "…"


def event_body(wanted: Wanted, series: Series, host: str) -> dict[str, Any]:
    """The core/v1 Event a create writes (client-go makeEvent, with scoctl as the source and
    the reporting controller)."""
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": series.name, "namespace": series.namespace},
        "involvedObject": wanted.ref.as_dict(),
        "reason": wanted.reason, "message": series.message, "type": series.type,
        "count": series.count, "firstTimestamp": _stamp(series.first),
        "lastTimestamp": _stamp(series.last),
        "source": {"component": COMPONENT, **({"host": host} if host else {})},
        "reportingComponent": COMPONENT, "reportingInstance": host or COMPONENT,
    }


def patch_body(series: Series) -> dict[str, Any]:
    """What a repeat patches (events_cache.go: count, lastTimestamp, message; and the type)."""
    return {"count": series.count, "lastTimestamp": _stamp(series.last),
            "message": series.message, "type": series.type}


def needed(wanted: Iterable[Wanted], known: Mapping[Key, Series], now: float, *,
           refresh: float = REFRESH_S) -> list[tuple[Wanted, Series | None]]:
    """Which of `wanted` call for a write, given the series `known` (see the module docstring),
    each with its series (None: a create). One per key, in `wanted`'s order. Cheap: no body is
    built here, so a pass whose writes the rate limit defers builds none of them."""
    out: list[tuple[Wanted, Series | None]] = []
    seen: set[Key] = set()
    for w in wanted:
        key = w.key
        if key in seen:
            continue
        seen.add(key)
        old = known.get(key)
        if old is not None and old.active and old.type == w.type \
                and now - old.last < refresh and old.message == _message(w.message):
            continue
        out.append((w, old))
    return out


def write_of(w: Wanted, old: Series | None, now: float, *, host: str = "") -> Write:
    """The write that brings `w` about after `old` (None: a create, ``count`` 1)."""
    message = _message(w.message)
    if old is None:
        series = Series(event_name(w.ref, w.reason), w.ref.event_namespace, message, w.type,
                        1, now, now)
        return Write("create", w.key, series.namespace, series.name,
                     event_body(w, series, host), series)
    series = replace(old, message=message, type=w.type, count=old.count + 1, last=now,
                     active=True)
    return Write("patch", w.key, old.namespace, old.name, patch_body(series), series)


def plan_writes(wanted: Iterable[Wanted], known: Mapping[Key, Series], now: float, *,
                host: str = "", refresh: float = REFRESH_S) -> list[Write]:
    """The writes that bring the cluster's Events to `wanted`, given the series `known`
    (`needed`, each made by `write_of`). One per key, in `wanted`'s order."""
    return [write_of(w, old, now, host=host)
            for w, old in needed(wanted, known, now, refresh=refresh)]


def settle(known: Mapping[Key, Series], wanted: Iterable[Wanted],
           updates: Mapping[Key, Series], now: float, *,
           forget: float = FORGET_S) -> dict[Key, Series]:
    """The series after a pass: the `updates` (what was written, or found in the cluster);
    the others still `wanted` unchanged (a deferred or failed write is tried again); the ones
    no longer wanted marked ended (a return is a repeat); ended ones older than `forget`
    dropped."""
    out = {**known, **updates}
    keep = {w.key for w in wanted}
    for key, series in list(out.items()):
        if key in keep:
            continue
        if now - series.last >= forget:
            del out[key]
        elif series.active:
            out[key] = replace(series, active=False)
    return out


def adopted(raw: Mapping[str, Any], key: Key) -> Series | None:
    """The series of an Event already in the cluster (a create found it: scoctl restarted, or
    another pass's process wrote it); None when it is not one of scoctl's."""
    meta = raw.get("metadata") or {}
    if (raw.get("source") or {}).get("component") != COMPONENT or raw.get("reason") != key[4]:
        return None
    last = _seconds(raw.get("lastTimestamp")) or 0.0
    return Series(str(meta.get("name", "")), str(meta.get("namespace", "")),
                  str(raw.get("message", "")), str(raw.get("type", "Normal")),
                  int(raw.get("count") or 1), _seconds(raw.get("firstTimestamp")) or last, last)


def _seconds(text: Any) -> float | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


# --------------------------------------------------------------------------- what should stand


@dataclass(frozen=True)
class Blocked:
    """A disruption the budget held back in the last reconcile: the server, its node, why."""

    server_id: str
    node: str
    reason: str
    detail: str


def _units(plan: PlanWorkloadRecord) -> int:
    return sum(u.units for u in plan.pools)


def _pools(plan: PlanWorkloadRecord) -> str:
    return ", ".join(f"{u.pool} ({u.units})" for u in plan.pools if u.units)


_PodEvent = tuple[str, str, EventType]  # (reason, message, type)
_BY_NAME = attrgetter("namespace", "name")


class PodEventMemo:
    """What `pod_events` worked out per pod, kept between passes by a long-lived writer (the
    controller's): for the very same pod value under the same policy, whether it waits and
    for which workload, and the Event it got last — reused while its workload's Event says
    the same. The decision is the same without it; it holds the pods it keys by id, so no id
    is reused while it is kept."""

    def __init__(self) -> None:
        self.policy: K8sPolicy | None = None
        # id(pod) → (pod, its workload, its Event, the workload's Event it was made from)
        self.pods: dict[int, tuple[PodInfo, WorkloadRef | None, Wanted | None,
                                   _PodEvent | None]] = {}
        # each workload's Event last pass: the very same tuple while it says the same, so
        # that a pod's Event is reused on an identity check, not a comparison of messages
        self.said: dict[str, _PodEvent | None] = {}


def pod_events(pods: Iterable[PodInfo], policy: K8sPolicy,
               plans: Mapping[str, PlanWorkloadRecord],
               workloads: Mapping[str, WorkloadRecord],
               memo: PodEventMemo | None = None) -> list[Wanted]:
    """``Nominated`` / ``FailedProvisioning`` for the pending pods scoctl manages (sorted by
    namespace and name).

    What the pods of one template share is worked out once, as intake does
    (`core.intake.k8s._read_bucket`): the workload per (namespace, owners value, naming labels)
    — keyed by the identity of the shared owners value, alive while `pods` is — and the
    Event (reason, message, type) per workload; and per pod, with a `memo`, once while the pod
    and its workload's Event stay as they are."""
    label = policy.workload_label
    memo = memo if memo is not None else PodEventMemo()
    if memo.policy != policy:
        memo.policy, memo.pods, memo.said = policy, {}, {}
    known, before = memo.pods, memo.said
    kept: dict[int, tuple[PodInfo, WorkloadRef | None, Wanted | None, _PodEvent | None]] = {}
    refs: dict[tuple[Any, ...], WorkloadRef | None] = {}
    said: dict[str, _PodEvent | None] = {}
    out: list[Wanted] = []
    for pod in sorted(pods, key=_BY_NAME):
        entry = known.get(id(pod))
        if entry is None or entry[0] is not pod:
            ref = None
            if is_provisionable(pod):
                key = (pod.namespace, id(pod.owners), pod.labels.get(label),
                       tuple(map(pod.labels.get, OWNER_LABELS)))
                try:
                    ref = refs[key]
                except KeyError:
                    ref = refs[key] = (workload_of(pod, label) if is_managed_pod(pod, policy)
                                       else None)
            entry = (pod, ref, None, None)
        ref, last = entry[1], entry[2]
        if ref is None:
            kept[id(pod)] = entry
            continue
        try:
            event = said[ref.name]
        except KeyError:
            event = _pod_event(ref.name, plans.get(ref.name), workloads.get(ref.name))
            old = before.get(ref.name)
            if old is not None and old == event:
                event = old  # the same words: the same tuple, for the check below
            said[ref.name] = event
        if event is None:
            wanted = None
        elif last is not None and entry[3] is event:
            wanted = last
        else:
            wanted = Wanted(pod_ref(pod), *event)
        kept[id(pod)] = (pod, ref, wanted, event)
        if wanted is not None:
            out.append(wanted)
    memo.pods, memo.said = kept, said
    return out


def _pod_event(name: str, plan: PlanWorkloadRecord | None, record: WorkloadRecord | None
               ) -> _PodEvent | None:
    """The Event the pending pods of workload `name` carry: (reason, message, type)."""
    if record is not None and record.status == WorkloadStatus.FAILED:
        why = record.last_queued_reason or record.last_token or "failed"
        return (FAILED_PROVISIONING, f"scoctl cannot provision workload {name}: {why}",
                "Warning")
    if (record is not None and record.status == WorkloadStatus.QUEUED
            and record.last_token in _PLACEMENT_EVENTS):
        reason = _PLACEMENT_EVENTS[PlacementToken(record.last_token)]
        return (reason, f"scoctl: workload {name} is queued ({record.last_token}): "
                f"{record.last_queued_reason or 'see scoctl status'}", "Warning")
    if plan is not None and not plan.feasible:
        why = "; ".join(plan.reasons) or "no pool can hold it"
        return (FAILED_PROVISIONING, f"scoctl cannot place workload {name}: {why}", "Warning")
    if plan is not None and _units(plan):
        return (NOMINATED, f"Pod should schedule on: {_units(plan)} unit(s) of workload {name} "
                f"in pools {_pools(plan)} (plan generation {plan.generation})", "Normal")
    return None


def node_events(instances: Iterable[InstanceRecord], noticed: Iterable[NoticedRecord],
                blocked: Sequence[Blocked] = ()) -> list[Wanted]:
    """``ReclaimNoticed`` for the open notices, ``DisruptionStarted`` for the instances under
    a disruption (draining, or their replacement on its way: the reason is the instance's
    recorded one), ``DisruptionBlocked`` for the disruptions the budget holds back (by node)."""
    by_id = {i.id: i for i in instances}
    out: list[Wanted] = []
    open_notices = {}
    for row in sorted(noticed, key=lambda r: r.name):
        if row.outcome is not None:
            continue
        inst = by_id.get(row.server_id)
        node = (inst.node_name if inst is not None else None) or row.name
        open_notices[row.server_id] = row
        why = f" ({row.reason})" if row.reason else ""
        out.append(Wanted(node_ref(node), RECLAIM_NOTICED, (
            f"reclaim notice from {row.source}{why}: server {row.server_id} is reclaimed at "
            f"{row.deadline}; scoctl cordons and drains the node and replaces it"), "Warning"))
    for inst in sorted(by_id.values(), key=lambda i: i.name):
        if inst.status != InstanceStatus.DRAINING and not inst.disruption:
            continue  # neither draining nor a disruption in flight (its replacement first)
        reason = (DisruptionReason.NOTICED if inst.id in open_notices
                  else inst.disruption or DisruptionReason.EMPTY)
        out.append(Wanted(node_ref(inst.node_name or inst.name), DISRUPTION_STARTED, (
            f"scoctl is disrupting the node (reason {reason}): cordoned, draining, then the "
            f"server {inst.id} is deleted")))
    for b in blocked:
        out.append(Wanted(node_ref(b.node), DISRUPTION_BLOCKED,
                          f"disruption (reason {b.reason}) blocked: {b.detail}", "Warning"))
    return out
