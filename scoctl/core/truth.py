"""Placement truth, pure: whether a workload's pods run on the units planned for them.

Kubernetes puts any pod on any node that fits and tolerates, so the pods of one workload, or a
tenant's, may fill the units planned for another while every plan says covered. Two checks,
both from what intake already reads (pods, Nodes) and the state's units:

* **isolation** (`not_isolated`): a pending managed pod of an ``exclusive`` workload must
  tolerate the taint ``sco/workload=<name>:NoSchedule`` its units carry and select them (a
  ``nodeSelector`` ``sco/workload=<name>``, or a required node affinity that asks for it);
  one that lacks either is reported at once (``POD_NOT_ISOLATED {pods, missing}``);
* **the truth loop** (`unplaced`): per workload, its pending pods are placed first-fit, in
  order (oldest first, then by name), on the free room of its units — each Ready, schedulable
  Node of the workload: its allocatable less the requests of every pod bound to it, DaemonSet
  pods included — by the scheduler's own filters (`core.constraints.pod_refusal`: selectors,
  affinity, taints; `core.quantity.fits`: requests). A pod that fits nowhere, pending
  `timeouts.unplaced` after both its creation and the newest of the workload's units turning
  Ready, with no unit still booting, is **unplaced**: ``PODS_UNPLACED {pods, reason,
  occupants}`` (the scheduler's message; the pods of others that fill the units). While a
  unit boots, room is on its way: nothing is unplaced.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scoctl.core.constraints import NAME_FIELD, WORKLOAD_KEY, pod_refusal, untolerated_taint
from scoctl.core.demand import effective_request, scheduling_message
from scoctl.core.model import NodeInfo, PodInfo, Taint
from scoctl.core.model.vocabulary import LABEL_MANAGED
from scoctl.core.quantity import Resources, fits

# at most this many pods are named in a PODS_UNPLACED / POD_NOT_ISOLATED detail
NAMED_MOST = 10
_ENDED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Units:
    """A workload's units as the state knows them: how many are still booting (launched,
    their Node not Ready yet: room on its way), and when the newest Ready one turned Ready
    (Unix seconds; None: none is Ready)."""

    booting: int = 0
    last_ready: float | None = None


@dataclass(frozen=True)
class Unplaced:
    """A workload's pods that its units have no room for (`unplaced`)."""

    pods: tuple[str, ...]  # namespace/name, oldest first
    requests: Resources  # their requests summed
    reason: str  # the scheduler's message on the first of them
    occupants: tuple[str, ...]  # the pods of others on the workload's Ready units

    def detail(self) -> dict[str, object]:
        """The ``PODS_UNPLACED`` detail."""
        return {"pods": len(self.pods), "names": list(self.pods[:NAMED_MOST]),
                "reason": self.reason or "no room on its units",
                "occupants": list(self.occupants[:NAMED_MOST])}


def _name(pod: PodInfo) -> str:
    return f"{pod.namespace}/{pod.name}"


def _order(pods: Iterable[PodInfo]) -> list[PodInfo]:
    return sorted(pods, key=lambda p: (p.created if p.created is not None else 0.0,
                                       p.namespace, p.name))


# --- isolation ------------------------------------------------------------------------------


def isolation_taint(workload: str) -> Taint:
    """The taint an exclusive workload's units carry (`core.constraints.workload_taint`)."""
    return Taint(WORKLOAD_KEY, "NoSchedule", workload)


def selects_workload(pod: PodInfo, workload: str) -> bool:
    """Whether the pod asks for its workload's units: a node without the label
    ``sco/workload=<workload>`` is refused by its nodeSelector or required node affinity."""
    if pod.placement is None:
        return False
    if (WORKLOAD_KEY, workload) in pod.placement.node_selector:
        return True
    terms = pod.placement.required or ()
    return bool(terms) and all(
        any(r.key == WORKLOAD_KEY and r.operator == "In" and tuple(r.values) == (workload,)
            for r in term) for term in terms)


def missing_isolation(pod: PodInfo, workload: str) -> tuple[str, ...]:
    """What a managed pod of an exclusive workload lacks: the toleration of its units' taint,
    the node selector that keeps it on them (empty: nothing)."""
    missing = []
    if untolerated_taint(pod.tolerations, (isolation_taint(workload),)) is not None:
        missing.append(f"toleration {WORKLOAD_KEY}={workload}:NoSchedule")
    if not selects_workload(pod, workload):
        missing.append(f"nodeSelector {WORKLOAD_KEY}={workload}")
    return tuple(missing)


@dataclass(frozen=True)
class NotIsolated:
    """An exclusive workload's pending pods that lack its toleration or selector."""

    pods: tuple[str, ...]  # namespace/name, oldest first
    missing: tuple[str, ...]  # what they lack, sorted

    def detail(self) -> dict[str, object]:
        """The ``POD_NOT_ISOLATED`` detail."""
        return {"pods": len(self.pods), "names": list(self.pods[:NAMED_MOST]),
                "missing": list(self.missing),
                "reason": f"{len(self.pods)} pod(s) lack {', '.join(self.missing)}"}


def not_isolated(pods: Iterable[PodInfo], workload: str) -> NotIsolated | None:
    """The pending `pods` of an exclusive `workload` that lack its toleration or selector
    (None: every one has both)."""
    names: list[str] = []
    missing: set[str] = set()
    for pod in _order(pods):
        lacks = missing_isolation(pod, workload)
        if lacks:
            names.append(_name(pod))
            missing.update(lacks)
    return NotIsolated(tuple(names), tuple(sorted(missing))) if names else None


# --- the truth loop -------------------------------------------------------------------------


@dataclass
class _Room:
    """One unit's free room for the first-fit."""

    free: dict[str, int]
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[Taint, ...] = ()


class Cluster:
    """The Nodes and bound pods of one read, indexed once for every workload's truth loop:
    scoctl's Ready, schedulable Nodes by workload (by name), the unfinished pods by node."""

    def __init__(self, nodes: Iterable[NodeInfo], pods: Iterable[PodInfo]) -> None:
        self.units: dict[str, list[NodeInfo]] = {}
        for node in sorted(nodes, key=lambda n: n.name):
            if node.ready and not node.unschedulable \
                    and node.labels.get(LABEL_MANAGED) == "true":
                self.units.setdefault(node.labels.get(WORKLOAD_KEY, ""), []).append(node)
        held = {n.name for units in self.units.values() for n in units}
        self.on: dict[str, list[PodInfo]] = {}
        for pod in pods:
            if pod.node_name in held and pod.phase not in _ENDED:
                self.on.setdefault(pod.node_name, []).append(pod)

    def units_of(self, workload: str) -> list[NodeInfo]:
        """The workload's Ready, schedulable Nodes (scoctl's, labelled with it), by name."""
        return self.units.get(workload, [])


def bound_requests(pods: Iterable[PodInfo]) -> dict[str, dict[str, int]]:
    """Per node name, the requests of the unfinished pods bound to it."""
    used: dict[str, dict[str, int]] = {}
    for pod in pods:
        if pod.node_name and pod.phase not in _ENDED:
            into = used.setdefault(pod.node_name, {})
            for name, amount in effective_request(pod).items():
                into[name] = into.get(name, 0) + amount
    return used


def rooms_of(nodes: Sequence[NodeInfo], used: Mapping[str, Mapping[str, int]]) -> list[_Room]:
    """The free room of each of `nodes`, in order, `used` taken off (`bound_requests`)."""
    rooms = []
    for node in nodes:
        taken = used.get(node.name, {})
        free = {k: v - taken.get(k, 0) for k, v in node.allocatable.items()}
        rooms.append(_Room(free, {**node.labels, NAME_FIELD: node.name}, node.taints))
    return rooms


def first_fit(pending: Iterable[PodInfo], rooms: list[_Room]) -> list[PodInfo]:
    """Place `pending` (oldest first) on the first room that admits and holds each, taking
    what it requests; the pods that fit nowhere, in that order."""
    left = []
    for pod in _order(pending):
        request = effective_request(pod)
        for room in rooms:
            if pod_refusal(pod, room.labels, room.taints, new_node=False) is not None:
                continue
            if fits(request, room.free):
                for name, amount in request.items():
                    room.free[name] = room.free.get(name, 0) - amount
                break
        else:
            left.append(pod)
    return left


def unplaced(workload: str, pending: Sequence[PodInfo], cluster: Cluster, units: Units, *,
             now: float, after: float, label: str = WORKLOAD_KEY) -> Unplaced | None:
    """The workload's `pending` pods its units have no room for (see the module docstring),
    or None. `cluster` holds the Nodes and the pods bound to them, `after` is the
    `timeouts.unplaced` seconds; a pod on the units labelled `label` with another value (or
    none) is an occupant."""
    if not pending or units.booting or units.last_ready is None or now - units.last_ready < after:
        return None
    mine = cluster.units_of(workload)
    if not mine:
        return None
    bound = [p for node in mine for p in cluster.on.get(node.name, ())]
    left = first_fit(pending, rooms_of(mine, bound_requests(bound)))
    late = [p for p in left if p.created is None or now - p.created >= after]
    if not late:
        return None
    total: dict[str, int] = {}
    for pod in late:
        for name, amount in effective_request(pod).items():
            total[name] = total.get(name, 0) + amount
    occupants = sorted(_name(p) for p in bound
                       if not p.deleting and p.labels.get(label) != workload)
    return Unplaced(pods=tuple(_name(p) for p in late), requests=total,
                    reason=scheduling_message(late[0]), occupants=tuple(occupants))
