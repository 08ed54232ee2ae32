"""Server-side Table output (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``) for
Pods, Nodes and Events, with the columns and cells of upstream's printers
(``pkg/printers/internalversion/printers.go``: `printPod`, `printNode`, `printEvent`; ages by
apimachinery ``util/duration`` `HumanDuration`). kubectl asks for Tables on every ``get``; a
kind without a printer here is answered in JSON, and kubectl prints it with its own fallback.

Each row carries its object as ``PartialObjectMetadata`` (the default ``includeObject``), the
whole object for ``includeObject=Object``, none for ``None``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

Obj = dict[str, Any]


def _column(name: str, description: str, *, priority: int = 0, type_: str = "string",
            format_: str = "") -> Obj:
    return {"name": name, "type": type_, "format": format_, "description": description,
            "priority": priority}


NAME = _column("Name", "Name must be unique within a namespace.", format_="name")
AGE = _column("Age", "CreationTimestamp is a timestamp representing the server time when this "
                     "object was created.")

POD_COLUMNS = [
    NAME,
    _column("Ready", "The aggregate readiness state of this pod for accepting traffic."),
    _column("Status", "The aggregate status of the containers in this pod."),
    _column("Restarts", "The number of times the containers in this pod have been restarted "
                        "and when the last container in this pod has restarted."),
    AGE,
    _column("IP", "IP address allocated to the pod.", priority=1),
    _column("Node", "Name of the node this pod is assigned to.", priority=1),
    _column("Nominated Node", "Name of the node this pod is nominated to run on.", priority=1),
    _column("Readiness Gates", "The readiness gates of this pod.", priority=1),
]
NODE_COLUMNS = [
    NAME,
    _column("Status", "The status of the node"),
    _column("Roles", "The roles of the node"),
    AGE,
    _column("Version", "Kubelet Version reported by the node."),
    _column("Internal-IP", "List of internal IPs of the node.", priority=1),
    _column("External-IP", "List of external IPs of the node.", priority=1),
    _column("OS-Image", "OS image reported by the node.", priority=1),
    _column("Kernel-Version", "Kernel version reported by the node.", priority=1),
    _column("Container-Runtime", "Container runtime reported by the node.", priority=1),
]
EVENT_COLUMNS = [
    _column("Last Seen", "Time when last this event was observed."),
    _column("Type", "Type of this event (Normal, Warning), new types could be added in the "
                    "future."),
    _column("Reason", "A machine-readable description of why this event was generated."),
    _column("Object", "The object this event is about."),
    _column("Message", "A human-readable description of the status of this operation."),
    _column("Subobject", "The subobject this event is about.", priority=1),
    _column("Source", "The component reporting this event.", priority=1),
    _column("First Seen", "Time when this event was first observed.", priority=1),
    _column("Count", "The number of times this event has occurred.", priority=1,
            type_="integer"),
    _column("Name", "The name of this event.", priority=1, format_="name"),
]


def human_duration(seconds: float) -> str:
    """apimachinery util/duration `HumanDuration`."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d" if hours % 24 == 0 else f"{hours // 24}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // 24 // 365, (hours // 24) % 365
        return f"{years}y" if days == 0 else f"{years}y{days}d"
    return f"{hours // 24 // 365}y"


def since(stamp: Any, now: datetime | None = None) -> str:
    """printers.go `translateTimestampSince`: ``<unknown>`` for no time."""
    if not stamp:
        return "<unknown>"
    try:
        moment = datetime.strptime(str(stamp)[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
    except ValueError:
        return "<unknown>"
    return human_duration(((now or datetime.now(UTC)) - moment).total_seconds())


def _container_reason(status: Mapping[str, Any]) -> str | None:
    state = status.get("state") or {}
    waiting, terminated = state.get("waiting"), state.get("terminated")
    if waiting and waiting.get("reason"):
        return str(waiting["reason"])
    if terminated:
        if terminated.get("reason"):
            return str(terminated["reason"])
        if terminated.get("signal"):
            return f"Signal:{terminated['signal']}"
        return f"ExitCode:{terminated.get('exitCode', 0)}"
    return None


def pod_cells(pod: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    """printers.go `printPod` (the regular containers' part; init containers only through
    ``Init:`` when one is waiting or failed)."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    meta = pod.get("metadata") or {}
    total = len(spec.get("containers") or [])
    reason = str(status.get("reason") or status.get("phase") or "")
    if spec.get("schedulingGates") and not spec.get("nodeName"):
        reason = "SchedulingGated"
    ready = restarts = 0
    init_count = len(spec.get("initContainers") or [])
    for i, cs in enumerate(status.get("initContainerStatuses") or []):
        restarts += int(cs.get("restartCount") or 0)
        waiting = (cs.get("state") or {}).get("waiting")
        terminated = (cs.get("state") or {}).get("terminated")
        if terminated and int(terminated.get("exitCode") or 0) == 0:
            continue
        if terminated:
            reason = "Init:" + str(terminated.get("reason") or "Error")
        elif waiting and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{i}/{init_count}"
        break
    else:
        has_running = False
        for cs in reversed(status.get("containerStatuses") or []):
            restarts += int(cs.get("restartCount") or 0)
            container_reason = _container_reason(cs)
            if container_reason is not None:
                reason = container_reason
            elif cs.get("ready") and "running" in (cs.get("state") or {}):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
            reason = "Running" if conditions.get("Ready") == "True" else "NotReady"
    if meta.get("deletionTimestamp"):
        reason = "Unknown" if status.get("reason") == "NodeLost" else "Terminating"
    gates = spec.get("readinessGates") or []
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    gates_text = (f"{sum(1 for g in gates if conditions.get(g.get('conditionType')) == 'True')}"
                  f"/{len(gates)}") if gates else "<none>"
    return [meta.get("name", ""), f"{ready}/{total}", reason, str(restarts),
            since(meta.get("creationTimestamp"), now), status.get("podIP") or "<none>",
            spec.get("nodeName") or "<none>", status.get("nominatedNodeName") or "<none>",
            gates_text]


def node_cells(node: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    """printers.go `printNode` + `findNodeRoles`."""
    meta, spec, status = node.get("metadata") or {}, node.get("spec") or {}, (
        node.get("status") or {})
    ready = next((c.get("status") for c in status.get("conditions") or []
                  if c.get("type") == "Ready"), None)
    states = ["Ready" if ready == "True" else "NotReady" if ready is not None else "Unknown"]
    if spec.get("unschedulable"):
        states.append("SchedulingDisabled")
    labels = meta.get("labels") or {}
    roles = sorted({k.removeprefix("node-role.kubernetes.io/") for k in labels
                    if k.startswith("node-role.kubernetes.io/")}
                   | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role")
                      else set()))
    info = status.get("nodeInfo") or {}

    def address(kind: str) -> str:
        return next((a.get("address") for a in status.get("addresses") or []
                     if a.get("type") == kind), None) or "<none>"

    return [meta.get("name", ""), ",".join(states), ",".join(roles) or "<none>",
            since(meta.get("creationTimestamp"), now), info.get("kubeletVersion", ""),
            address("InternalIP"), address("ExternalIP"), info.get("osImage") or "<unknown>",
            info.get("kernelVersion") or "<unknown>",
            info.get("containerRuntimeVersion") or "<unknown>"]


def event_cells(event: Mapping[str, Any], now: datetime | None = None) -> list[Any]:
    """printers.go `printEvent`."""
    meta = event.get("metadata") or {}
    involved = event.get("involvedObject") or {}
    series = event.get("series") or {}
    last = (series.get("lastObservedTime") or event.get("lastTimestamp")
            or event.get("eventTime"))
    first = event.get("firstTimestamp") or event.get("eventTime")
    source = event.get("source") or {}
    source_text = str(source.get("component") or event.get("reportingComponent") or "")
    if source.get("host"):
        source_text += f", {source['host']}"
    return [since(last, now), event.get("type", ""), event.get("reason", ""),
            f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
            str(event.get("message", "")).strip(), involved.get("fieldPath", ""),
            source_text, since(first, now), int(event.get("count") or 1),
            meta.get("name", "")]


PRINTERS: Mapping[str, tuple[list[Obj], Callable[..., list[Any]]]] = {
    "Pod": (POD_COLUMNS, pod_cells), "Node": (NODE_COLUMNS, node_cells),
    "Event": (EVENT_COLUMNS, event_cells),
}


def wants_table(accept: str | None, kind: str) -> bool:
    """Whether the Accept header asks for a meta.k8s.io/v1 Table (kubectl get's first
    choice) and a printer exists for `kind`."""
    if kind not in PRINTERS or not accept:
        return False
    for choice in accept.split(","):
        params = {p.strip().partition("=")[0]: p.strip().partition("=")[2]
                  for p in choice.split(";")[1:]}
        if params.get("as") == "Table" and params.get("g") == "meta.k8s.io" and params.get(
                "v") == "v1":
            return True
    return False


def _row_object(obj: Mapping[str, Any], include: str | None) -> Obj | None:
    if include == "None":
        return None
    if include == "Object":
        return dict(obj)
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": dict(obj.get("metadata") or {})}


def table(kind: str, items: Sequence[Mapping[str, Any]], list_meta: Mapping[str, Any],
          include: str | None = None) -> Obj:
    """A meta.k8s.io/v1 Table of `items` (one row each)."""
    columns, cells = PRINTERS[kind]
    now = datetime.now(UTC)
    rows: list[Obj] = []
    for obj in items:
        row: Obj = {"cells": cells(obj, now)}
        if (embedded := _row_object(obj, include)) is not None:
            row["object"] = embedded
        rows.append(row)
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": dict(list_meta),
            "columnDefinitions": columns, "rows": rows}
