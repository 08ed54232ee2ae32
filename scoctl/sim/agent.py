"""The node agent of `scoctl sim`: what kubelets, a cloud controller and kube-scheduler would do.

Every poll it reads the Nova emulator's servers and the Kubernetes emulator's objects, then:

* each ACTIVE server tagged ``sco:managed`` becomes a Node named after the server (plus the
  scenario's `node_suffix`, e.g. ``.novalocal``), with ``spec.providerID =
  openstack:///<server id>``, the label ``sco/instance=<server id>`` (as the join script sets
  it), the labels and taints its user-data asks for
  (the contract JSON of the bundled template, else kubelet's ``--node-labels`` /
  ``--register-with-taints`` flags anywhere in the user-data), and capacity / allocatable from
  its flavor; the Node registers NotReady and turns Ready `ready_after` seconds later. A server
  whose contract names a Slurm node does not join Kubernetes;
* a server in ERROR makes its Node NotReady; a server gone (or DELETED) takes its Node with it;
  the pods bound there stay until PodGC deletes them after its quarantine (`podgc_quarantine`,
  upstream 40 s), and their ReplicaSets replace them with new pending pods;
* kubelets report while their server is ACTIVE; a Node whose kubelet stopped (server in
  ERROR, or ``scoctl sim fail-node``: the server stays ACTIVE, `fail_node`) turns
  ``Ready=Unknown`` after the node-monitor grace period (`node_monitor_grace`, upstream 40 s),
  and a failed one never turns Ready again;
* spot reclaims: at `reclaim_rate_per_hour` (random, seeded) and on demand (`reclaim`, used by
  ``scoctl sim reclaim``), a reclaimable ACTIVE server is taken back through the emulator; with
  a notice (``scoctl sim reclaim --notice 60s``) the server gets the metadata key
  ``sco:reclaim-at`` through Nova's API, and the agent takes it back when that time comes;
* a ReplicaSet below its replica count (a pod was evicted) gets new pending pods at once, and
  one scaled down (`scale`) deletes the pods the ReplicaSet controller would
  (`k8s_controllers.pods_to_delete`: those on nodes holding more of its pods first);
* pending pods are bound as kube-scheduler would (`scoctl.sim.k8s_scheduler`, written from
  upstream's filter plugins, not from scoctl's rules); a pod no node fits gets
  PodScheduled=False/Unschedulable with upstream's message, a pod using a field the simulated
  scheduler does not implement PodScheduled=False/SchedulerError naming it (and a warning);
  Deployment / ReplicaSet status follows the pods (Available once enough replicas run).

The decisions are pure functions over the JSON objects (`plan_nodes`, `schedule`,
`replacement_pods`, `missing_pods`, `scale_changes`, `deployment_status`, `pick_reclaim`,
`due_reclaims`, and the controllers of `k8s_controllers`); `Agent.step` reads,
decides and acts; `scale` (``scoctl sim scale``) sets a Deployment's replicas, `fail_node`
(``scoctl sim fail-node``) stops a Node's kubelet.
The agent talks to the emulators' control APIs (``/_sim/``) over httpx.

Run as a process: ``python -m scoctl.sim.agent --settings F [--ready-file R]``.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
import logging
import os
import random
import re
import signal
import ssl
import sys
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from scoctl.core.model.vocabulary import META_RECLAIM_AT as RECLAIM_AT
from scoctl.core.notice import parse_notice_time
from scoctl.sim import agent_nodes, agent_workloads, k8s_scheduler
from scoctl.sim import k8s_controllers as controllers
from scoctl.sim.k8s_controllers import NODE_MONITOR_GRACE_S, PODGC_QUARANTINE_S

log = logging.getLogger("scoctl.sim.agent")

Obj = dict[str, Any]
MANAGED_TAG = "sco:managed"
PROVIDER_PREFIX = "openstack:///"
INSTANCE_LABEL = "sco/instance"
CONTRACT_PATH = "/etc/scoctl/contract.json"
BATCH_CHUNK = 500  # /_sim/ operations a node agent request carries (`SimApi.batch`)
_LABELS_FLAG = re.compile(r"--node-labels=([^\s\"']+)")
_TAINTS_FLAG = re.compile(r"--register-with-taints=([^\s\"']+)")
_INDEX_SUFFIX = re.compile(r"^(.*)-(\d+)$")
REPLACEMENT_MESSAGE = ("0/{n} nodes are available: the pod's node was removed (instance "
                       "reclaimed); waiting for capacity.")


def now_rfc3339() -> str:
    """The current time as the Kubernetes API writes it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- user-data → registration (pure) -----------------------------------------------------------


@dataclass(frozen=True)
class Registration:
    """What a booting instance's user-data asks its kubelet to register with."""

    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[str, ...] = ()  # "key=value:Effect"
    reclaimable: bool = True
    slurm_node: str | None = None


def decode_user_data(value: str | None) -> str:
    """Nova's base64 user_data as text ("" when absent or not base64)."""
    if not value:
        return ""
    try:
        return base64.b64decode(value, validate=True).decode("utf-8", errors="replace")
    except (binascii.Error, ValueError):
        return ""


def registration(user_data: str) -> Registration:
    """Labels, taints, tier and Slurm node name from rendered user-data (text)."""
    from scoctl.core.userdata import parse_boot_contract

    contract = parse_boot_contract(user_data) if user_data else None
    if contract is not None:
        labels = contract.get("labels")
        taints = contract.get("taints")
        slurm = contract.get("slurm")
        return Registration(
            labels={str(k): str(v) for k, v in labels.items()} if isinstance(labels, Mapping)
            else {},
            taints=tuple(str(t) for t in taints) if isinstance(taints, list) else (),
            reclaimable=bool(contract.get("reclaimable", True)),
            slurm_node=str(slurm.get("node_name")) if isinstance(slurm, Mapping)
            and slurm.get("node_name") else None,
        )
    labels_match = _LABELS_FLAG.search(user_data)
    taints_match = _TAINTS_FLAG.search(user_data)
    flag_labels: dict[str, str] = {}
    if labels_match:
        for item in labels_match.group(1).split(","):
            key, sep, value = item.partition("=")
            if sep and key:
                flag_labels[key] = value
    flag_taints = tuple(t for t in taints_match.group(1).split(",") if t) if taints_match else ()
    reclaimable = flag_labels.get("sco/reclaimable", "true") != "false"
    return Registration(labels=flag_labels, taints=flag_taints, reclaimable=reclaimable)


def taint_object(text: str) -> Obj:
    """``key=value:Effect`` as a Node taint object."""
    key_value, _, effect = text.partition(":")
    key, _, value = key_value.partition("=")
    out: Obj = {"key": key, "effect": effect or "NoSchedule"}
    if value:
        out["value"] = value
    return out


def _condition(type_: str, status: str, reason: str, message: str, stamp: str) -> Obj:
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastHeartbeatTime": stamp, "lastTransitionTime": stamp}


def node_name(server: Mapping[str, Any], suffix: str = "") -> str:
    """The name a server's Node registers under: the server's, plus `suffix` (a real cloud
    often names Nodes ``<server>.novalocal``)."""
    return f"{server['name']}{suffix}"


def node_for(server: Mapping[str, Any], shape: Mapping[str, Mapping[str, str]],
             reg: Registration, stamp: str, suffix: str = "") -> Obj:
    """The NotReady Node an ACTIVE server registers as: named `node_name`, with the
    ``sco/instance=<server id>`` label the join script sets and the providerID a cloud
    controller sets."""
    name = node_name(server, suffix)
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
              "kubernetes.io/arch": "amd64",
              "node.kubernetes.io/instance-type": str(server.get("flavor") or ""),
              **({"topology.kubernetes.io/zone": str(server["az"])} if server.get("az") else {}),
              **reg.labels, INSTANCE_LABEL: str(server["id"])}
    capacity = {**shape.get("capacity", {}), "pods": "110", "ephemeral-storage": "100Gi"}
    allocatable = {**shape.get("allocatable", shape.get("capacity", {})), "pods": "110",
                   "ephemeral-storage": "100Gi"}
    spec: Obj = {"providerID": f"{PROVIDER_PREFIX}{server['id']}"}
    if reg.taints:
        spec["taints"] = [taint_object(t) for t in reg.taints]
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": labels,
                     "annotations": {"scoctl.sim/server": str(server["id"])}},
        "spec": spec,
        "status": {
            "capacity": capacity, "allocatable": allocatable,
            "conditions": [_condition("Ready", "False", "KubeletNotReady",
                                      "container runtime network not ready: the node is "
                                      "booting", stamp)],
            "nodeInfo": {"architecture": "amd64", "bootID": "", "containerRuntimeVersion":
                         "containerd://1.7", "kernelVersion": "6.1", "kubeProxyVersion":
                         "v1.32.0", "kubeletVersion": "v1.32.0", "machineID": "",
                         "operatingSystem": "linux", "osImage": "Debian 12",
                         "systemUUID": str(server["id"])},
        },
    }


# --- nodes (pure) ------------------------------------------------------------------------------


def is_ready(node: Mapping[str, Any]) -> bool:
    """The node's Ready condition is True."""
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


KUBELET_ANNOTATION = "scoctl.sim/kubelet"
KUBELET_STOPPED = "stopped"


def kubelet_stopped(node: Mapping[str, Any]) -> bool:
    """`scoctl sim fail-node` stopped this Node's kubelet for good: it reports nothing more."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    return annotations.get(KUBELET_ANNOTATION) == KUBELET_STOPPED


def server_of(node: Mapping[str, Any]) -> str | None:
    """The Nova server id behind a node (from its providerID), or None for other nodes."""
    provider = str((node.get("spec") or {}).get("providerID") or "")
    return provider[len(PROVIDER_PREFIX):] if provider.startswith(PROVIDER_PREFIX) else None


@dataclass(frozen=True)
class NodeActions:
    """What to change in Kubernetes so that nodes follow servers."""

    create: tuple[Obj, ...] = ()
    ready: tuple[str, ...] = ()
    not_ready: tuple[str, ...] = ()
    delete: tuple[str, ...] = ()
    skipped: tuple[str, ...] = ()  # servers that do not join Kubernetes (Slurm nodes)


def plan_nodes(servers: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]],
               registered_at: Mapping[str, float], now: float, ready_after: float,
               shapes: Mapping[str, Mapping[str, Mapping[str, str]]], stamp: str,
               suffix: str = "", unregistered: frozenset[str] = frozenset()) -> NodeActions:
    """Nodes for ACTIVE managed servers (named `node_name(server, suffix)`); NotReady → Ready
    after `ready_after`; NotReady for ERROR servers; nodes of servers gone (or DELETED)
    removed; a node whose kubelet `fail-node` stopped is left alone (never Ready again); a
    server booted from an image in `unregistered` (ids) never registers a Node (a bad image).
    `registered_at` maps node names to when the agent first saw them."""
    managed = {str(s["id"]): s for s in servers if MANAGED_TAG in (s.get("tags") or [])}
    by_server = {sid: n for n in nodes if (sid := server_of(n)) is not None}
    names = {str(n["metadata"]["name"]) for n in nodes}
    create: list[Obj] = []
    skipped: list[str] = []
    ready: list[str] = []
    not_ready: list[str] = []
    for sid, server in sorted(managed.items(), key=lambda kv: str(kv[1]["name"])):
        node = by_server.get(sid)
        status = str(server.get("status"))
        if node is None:
            if status != "ACTIVE" or node_name(server, suffix) in names:
                continue
            reg = registration(decode_user_data(server.get("user_data")))
            if reg.slurm_node or str(server.get("image") or "") in unregistered:
                skipped.append(str(server["name"]))
                continue
            shape = shapes.get(str(server.get("flavor")), {})
            create.append(node_for(server, shape, reg, stamp, suffix))
            continue
        name = str(node["metadata"]["name"])
        if kubelet_stopped(node):
            continue  # its kubelet is gone: the node lifecycle controller has the node
        if status == "ACTIVE" and not is_ready(node):
            since = registered_at.get(name)
            if since is not None and now - since >= ready_after:
                ready.append(name)
        elif status not in ("ACTIVE", "BUILD") and status != "DELETED" and is_ready(node):
            not_ready.append(name)
    delete = sorted(str(n["metadata"]["name"]) for sid, n in by_server.items()
                    if sid not in managed or str(managed[sid].get("status")) == "DELETED")
    return NodeActions(tuple(create), tuple(ready), tuple(not_ready), tuple(delete),
                       tuple(skipped))


# --- pods (pure) -------------------------------------------------------------------------------


def is_pending(pod: Mapping[str, Any]) -> bool:
    """Unbound, Pending, not being deleted and not scheduling-gated."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    return (not spec.get("nodeName") and (pod.get("status") or {}).get("phase") == "Pending"
            and not meta.get("deletionTimestamp") and not spec.get("schedulingGates"))


def is_running(pod: Mapping[str, Any]) -> bool:
    """Running with Ready=True."""
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or [])


def schedule(pods: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]],
             namespaces: Sequence[Mapping[str, Any]] = ()) -> list[tuple[str, str, str]]:
    """(namespace, pod, node) bindings for pending pods, in queue order, as kube-scheduler
    would make them (`k8s_scheduler.schedule_round`, which also says why the others wait)."""
    result = k8s_scheduler.schedule_round(pods, nodes, namespaces)
    return [(b.namespace, b.pod, b.node) for b in result.bindings]


def _controller_uid(meta: Mapping[str, Any]) -> str | None:
    owner = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    return None if owner is None else str(owner.get("uid"))


def replacement_pods(lost: Sequence[Mapping[str, Any]], existing: Iterable[str],
                     node_count: int, stamp: str, *, room: Mapping[str, int] | None = None,
                     message: str = REPLACEMENT_MESSAGE) -> list[Obj]:
    """New pending pods for the controller-owned pods of removed nodes (standalone pods are not
    replaced). Names continue the owner's numbering: ``<rs>-00042`` after ``<rs>-00041``.

    `room` (owner uid → pods the owner still wants) caps the replacements as a ReplicaSet's
    replica count would: pods of an owner already at its count (scaled down) are not replaced;
    owners not in `room` are not capped."""
    left = dict(room or {})
    taken = set(existing)
    next_index: dict[str, int] = {}
    for name in taken:
        match = _INDEX_SUFFIX.match(name)
        if match:
            base, index = match.group(1), int(match.group(2))
            next_index[base] = max(next_index.get(base, 0), index + 1)
    out: list[Obj] = []
    for pod in lost:
        meta = pod.get("metadata") or {}
        uid = _controller_uid(meta)
        if uid is None:
            continue
        if uid in left:
            if left[uid] <= 0:
                continue
            left[uid] -= 1
        match = _INDEX_SUFFIX.match(str(meta["name"]))
        base = match.group(1) if match else str(meta["name"])
        index = next_index.get(base, 0)
        name = f"{base}-{index:05d}"
        while name in taken:
            index += 1
            name = f"{base}-{index:05d}"
        next_index[base] = index + 1
        taken.add(name)
        spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
        new_meta = {k: v for k, v in meta.items()
                    if k in ("namespace", "labels", "annotations", "ownerReferences")}
        new_meta["name"] = name
        out.append({
            "apiVersion": "v1", "kind": "Pod", "metadata": new_meta, "spec": spec,
            "status": {"phase": "Pending", "conditions": [{
                "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "message": message.format(n=node_count),
                "lastTransitionTime": stamp}]},
        })
    return out


SCALE_MESSAGE = ("0/{n} nodes are available: the Deployment was scaled up; waiting for "
                 "capacity.")


def _revision(obj: Mapping[str, Any]) -> int:
    value = ((obj.get("metadata") or {}).get("annotations") or {}).get(
        "deployment.kubernetes.io/revision", "0")
    return int(value) if str(value).isdigit() else 0


@dataclass(frozen=True)
class ScaleChanges:
    """What scaling a Deployment changes: spec patches (kind, namespace, name, replicas), pods
    to delete (names) and new pending pods."""

    replicas: tuple[tuple[str, str, str, int], ...]
    delete: tuple[str, ...]
    create: tuple[Obj, ...]


def scale_changes(deployment: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]],
                  pods: Sequence[Mapping[str, Any]], replicas: int, node_count: int,
                  stamp: str) -> ScaleChanges:
    """Scale a Deployment to `replicas` the way its controllers would: the Deployment and its
    newest ReplicaSet get the count (older ones 0); surplus pods go as the ReplicaSet
    controller picks them (`k8s_controllers.pods_to_delete`: unassigned, pending, not Ready,
    lower deletion cost, on a node holding more of the Deployment's pods, newer), so the
    survivors stay spread; missing pods are created pending from the template."""
    meta = deployment["metadata"]
    ns, uid = str(meta.get("namespace")), str(meta.get("uid"))
    owned = sorted((rs for rs in replicasets if rs["metadata"].get("namespace") == ns
                    and _controller_uid(rs["metadata"]) == uid), key=_revision)
    owned_uids = {str(rs["metadata"].get("uid")) for rs in owned}
    related = [p for p in pods if p["metadata"].get("namespace") == ns
               and _controller_uid(p["metadata"]) in owned_uids]
    now = controllers.parse_time(stamp)
    patches = [("Deployment", ns, str(meta["name"]), replicas)]
    delete: list[str] = []
    create: list[Obj] = []
    for position, rs in enumerate(reversed(owned)):
        wanted = replicas if position == 0 else 0
        rs_meta = rs["metadata"]
        patches.append(("ReplicaSet", ns, str(rs_meta["name"]), wanted))
        mine = [p for p in related if _controller_uid(p["metadata"]) == str(rs_meta.get("uid"))
                and not p["metadata"].get("deletionTimestamp")]
        surplus = len(mine) - wanted
        if surplus > 0:
            delete.extend(str(p["metadata"]["name"])
                          for p in controllers.pods_to_delete(mine, related, surplus, now))
        elif surplus < 0:
            create.extend(replacement_pods([_template_pod(rs)] * -surplus,
                                           (str(p["metadata"]["name"]) for p in pods),
                                           node_count, stamp, message=SCALE_MESSAGE))
    return ScaleChanges(tuple(patches), tuple(delete), tuple(create))


def _template_pod(rs: Mapping[str, Any]) -> Obj:
    """A pod as the ReplicaSet's template makes it (named by `replacement_pods`)."""
    rs_meta, template = rs["metadata"], rs["spec"]["template"]
    template_meta = template.get("metadata") or {}
    annotations = dict(template_meta.get("annotations") or {})
    return {"metadata": {
        "name": f"{rs_meta['name']}-00000", "namespace": rs_meta.get("namespace"),
        "labels": dict(template_meta.get("labels") or {}),
        **({"annotations": annotations} if annotations else {}),
        "ownerReferences": [{"apiVersion": rs["apiVersion"], "kind": rs["kind"],
                             "name": rs_meta["name"], "uid": rs_meta["uid"],
                             "controller": True, "blockOwnerDeletion": True}]},
        "spec": template["spec"]}


EVICTED_MESSAGE = ("0/{n} nodes are available: the pod was evicted from a draining node; "
                   "waiting for a node.")


def missing_pods(replicasets: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]],
                 node_count: int, stamp: str) -> list[Obj]:
    """New pending pods for ReplicaSets below their replica count (an evicted pod is gone, and
    its ReplicaSet makes another at once), as the ReplicaSet controller would."""
    room = replica_room(replicasets, pods, ())
    out: list[Obj] = []
    names = [str(p["metadata"]["name"]) for p in pods]
    for rs in replicasets:
        wanted = room.get(str(rs["metadata"].get("uid")), 0)
        if wanted > 0:
            fresh = replacement_pods([_template_pod(rs)] * wanted, names, node_count, stamp,
                                     message=EVICTED_MESSAGE)
            names += [str(p["metadata"]["name"]) for p in fresh]
            out += fresh
    return out


def replica_room(replicasets: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]],
                 lost: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Per ReplicaSet uid, how many pods it still wants once the `lost` pods are gone."""
    gone = {(p["metadata"].get("namespace"), p["metadata"]["name"]) for p in lost}
    alive: dict[str, int] = {}  # per controller uid, in one pass over the pods
    for p in pods:
        uid = _controller_uid(p["metadata"])
        if uid is not None and (p["metadata"].get("namespace"), p["metadata"]["name"]) \
                not in gone and not p["metadata"].get("deletionTimestamp"):
            alive[uid] = alive.get(uid, 0) + 1
    room: dict[str, int] = {}
    for rs in replicasets:
        rs_uid = str(rs["metadata"].get("uid"))
        room[rs_uid] = int((rs.get("spec") or {}).get("replicas", 1)) - alive.get(rs_uid, 0)
    return room


# --- workload status (pure) --------------------------------------------------------------------


def _selects(selector: Mapping[str, Any] | None, pod: Mapping[str, Any]) -> bool:
    wanted = (selector or {}).get("matchLabels") or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return bool(wanted) and all(labels.get(k) == v for k, v in wanted.items())


class PodIndex:
    """The pods of one listing bucketed by namespace and the value of a selector's first label
    (built once per label key): `candidates` of an owner are the pods `_owned` could select,
    in listing order, so ``_owned(owner, index.candidates(owner)) == _owned(owner, pods)``
    without scanning every pod for every Deployment and ReplicaSet."""

    def __init__(self, pods: Sequence[Mapping[str, Any]]) -> None:
        self.pods = pods
        self.buckets: dict[str, dict[tuple[Any, Any], list[Mapping[str, Any]]]] = {}

    def candidates(self, owner: Mapping[str, Any]) -> Sequence[Mapping[str, Any]]:
        wanted = (((owner.get("spec") or {}).get("selector") or {}).get("matchLabels") or {})
        if not wanted:
            return ()  # `_selects` selects nothing without matchLabels
        if not all(isinstance(v, str) for v in wanted.values()):
            return self.pods  # not a valid selector: let `_owned` judge every pod
        key = min(wanted)
        buckets = self.buckets.get(key)
        if buckets is None:
            buckets = self.buckets[key] = {}
            for pod in self.pods:
                meta = pod.get("metadata") or {}
                labels = meta.get("labels") or {}
                if key in labels:
                    buckets.setdefault((meta.get("namespace"), labels[key]), []).append(pod)
        return buckets.get((owner["metadata"].get("namespace"), wanted[key]), [])


def _owned(owner: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    ns = owner["metadata"].get("namespace")
    selector = (owner.get("spec") or {}).get("selector")
    return [p for p in pods if p["metadata"].get("namespace") == ns and _selects(selector, p)
            and not p["metadata"].get("deletionTimestamp")]


def _max_unavailable(deployment: Mapping[str, Any], desired: int) -> int:
    strategy = (deployment.get("spec") or {}).get("strategy") or {}
    value = (strategy.get("rollingUpdate") or {}).get("maxUnavailable", "25%")
    if isinstance(value, str) and value.endswith("%"):
        return int(desired * float(value[:-1]) / 100)  # the apiserver rounds down
    return int(value)


def _keep_times(new: Obj, previous: Mapping[str, Any]) -> Obj:
    old = next((c for c in previous.get("conditions") or [] if c.get("type") == new["type"]),
               None)
    if old is not None and old.get("status") == new["status"]:
        for key in ("lastTransitionTime", "lastUpdateTime"):
            if old.get(key):
                new[key] = old[key]
        if old.get("reason") == new.get("reason"):
            new["lastUpdateTime"] = old.get("lastUpdateTime", new.get("lastUpdateTime"))
    return new


def deployment_status(deployment: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], *,
                      previous: Mapping[str, Any], stamp: str | None = None) -> Obj:
    """A Deployment's status from its pods: replicas, ready/available counts and the Available
    condition (enough replicas within maxUnavailable, 25% by default, as the controller does)."""
    stamp = stamp or now_rfc3339()
    owned = _owned(deployment, pods)
    desired = int((deployment.get("spec") or {}).get("replicas", 1))
    ready = sum(1 for p in owned if is_running(p))
    available_ok = ready >= desired - _max_unavailable(deployment, desired)
    all_ready = ready >= desired
    conditions = [
        _keep_times({"type": "Available", "status": "True" if available_ok else "False",
                     "reason": "MinimumReplicasAvailable" if available_ok
                     else "MinimumReplicasUnavailable",
                     "message": "Deployment has minimum availability." if available_ok
                     else "Deployment does not have minimum availability.",
                     "lastUpdateTime": stamp, "lastTransitionTime": stamp}, previous),
        _keep_times({"type": "Progressing", "status": "True",
                     "reason": "NewReplicaSetAvailable" if all_ready else "ReplicaSetUpdated",
                     "message": f'ReplicaSet of "{deployment["metadata"]["name"]}" has '
                     + ("successfully progressed." if all_ready else "is progressing."),
                     "lastUpdateTime": stamp, "lastTransitionTime": stamp}, previous),
    ]
    return {"observedGeneration": int(deployment["metadata"].get("generation", 1)),
            "replicas": len(owned), "updatedReplicas": len(owned), "readyReplicas": ready,
            "availableReplicas": ready, "unavailableReplicas": max(0, desired - ready),
            "conditions": conditions}


def replicaset_status(replicaset: Mapping[str, Any],
                      pods: Sequence[Mapping[str, Any]]) -> Obj:
    """A ReplicaSet's status from its pods."""
    owned = _owned(replicaset, pods)
    ready = sum(1 for p in owned if is_running(p))
    return {"replicas": len(owned), "fullyLabeledReplicas": len(owned), "readyReplicas": ready,
            "availableReplicas": ready,
            "observedGeneration": int(replicaset["metadata"].get("generation", 1))}


def _comparable(status: Mapping[str, Any]) -> Any:
    conditions = [{k: v for k, v in c.items() if not k.endswith("Time")}
                  for c in status.get("conditions") or []]
    return {**status, "conditions": conditions}


# --- reclaims (pure) ---------------------------------------------------------------------------


def reclaimable(server: Mapping[str, Any]) -> bool:
    """A managed ACTIVE server whose contract is reclaimable (unknown contracts count)."""
    return (MANAGED_TAG in (server.get("tags") or []) and server.get("status") == "ACTIVE"
            and registration(decode_user_data(server.get("user_data"))).reclaimable)


def pick_reclaim(servers: Sequence[Mapping[str, Any]], count: int,
                 rng: random.Random) -> list[Mapping[str, Any]]:
    """`count` reclaimable servers chosen at random (repeatable for a seeded `rng`); servers
    under a notice already are left to it."""
    candidates = sorted((s for s in servers if reclaimable(s)
                         and RECLAIM_AT not in (s.get("metadata") or {})),
                        key=lambda s: str(s["id"]))
    return rng.sample(candidates, min(count, len(candidates)))


def due_reclaims(servers: Sequence[Mapping[str, Any]],
                 now: datetime) -> list[Mapping[str, Any]]:
    """Servers whose ``sco:reclaim-at`` notice has come: the provider takes them now."""
    due = []
    for server in servers:
        value = (server.get("metadata") or {}).get(RECLAIM_AT)
        if not value or server.get("status") in ("DELETED",):
            continue
        try:
            deadline = parse_notice_time(str(value))  # what scoctl reads, read the same way
        except ValueError:
            continue
        if deadline <= now:
            due.append(server)
    return due


# --- the imperative shell ----------------------------------------------------------------------


class SimApi:
    """The emulators' control APIs (``/_sim/``) over httpx."""

    def __init__(self, k8s_url: str, nova_url: str, *, timeout: float = 10.0,
                 k8s_ca: str | ssl.SSLContext | None = None) -> None:
        """`k8s_ca`: the CA file (PEM), or a client context trusting it, the Kubernetes
        emulator's HTTPS certificate is signed by (the system's trust store when None)."""
        import httpx

        verify: ssl.SSLContext | bool = (ssl.create_default_context(cafile=k8s_ca)
                                         if isinstance(k8s_ca, str) else k8s_ca or True)
        self._k8s = httpx.Client(base_url=k8s_url.rstrip("/"), timeout=timeout, verify=verify)
        nova_root = nova_url.rstrip("/").removesuffix("/v2.1")
        self._nova = httpx.Client(base_url=nova_root, timeout=timeout)

    def close(self) -> None:
        self._k8s.close()
        self._nova.close()

    def k8s(self, op: str, **body: Any) -> Any:
        """POST /_sim/<op> to the Kubernetes emulator; raises RuntimeError on a refusal."""
        response = self._k8s.post(f"/_sim/{op}", json=body)
        if response.status_code >= 400:
            raise RuntimeError(f"kubernetes /_sim/{op}: {response.status_code} "
                               f"{response.text[:300]}")
        return response.json()

    def batch(self, ops: Sequence[Mapping[str, Any]], *, stop_on_error: bool = False,
              chunk: int = BATCH_CHUNK) -> list[Obj]:
        """Several ``/_sim/<op>`` operations (``{"op": "bind-pod", …}``), `chunk` to a request,
        in order: each one's ``{"ok", "result"}`` or ``{"ok": false, "code", "message"}``;
        with `stop_on_error` none after the first failure."""
        results: list[Obj] = []
        for start in range(0, len(ops), chunk):
            part: list[Obj] = self.k8s("batch", ops=list(ops[start:start + chunk]),
                                       stop_on_error=stop_on_error)["results"]
            results += part
            if stop_on_error and any(not r["ok"] for r in part):
                break
        return results

    def objects(self, kind: str) -> list[Obj]:
        items: list[Obj] = self.k8s("list", kind=kind)["items"]
        return items

    def servers(self) -> list[Obj]:
        """Every server of every project, with tags and (base64) user_data."""
        response = self._nova.get("/_sim/servers")
        response.raise_for_status()
        servers: list[Obj] = response.json()["servers"]
        return servers

    def reclaim(self, server_id: str, mode: str = "delete") -> None:
        """Take a server back like a spot reclaim (`delete` or `error`)."""
        response = self._nova.post("/_sim/reclaim", json={"server_id": server_id, "mode": mode})
        if response.status_code >= 400:
            raise RuntimeError(f"nova /_sim/reclaim {server_id}: {response.text[:300]}")

    def set_metadata(self, server: Mapping[str, Any], key: str, value: str) -> None:
        """Set one metadata item through Nova's own API, as a reclaimer would."""
        response = self._nova.put(f"/v2.1/servers/{server['id']}/metadata/{key}",
                                  json={"meta": {key: value}},
                                  headers={"X-Auth-Token": f"admin:{server['project']}"})
        if response.status_code >= 400:
            raise RuntimeError(f"nova metadata of {server['id']}: {response.text[:300]}")


def reclaim(api: SimApi, *, count: int | None = None, server_id: str | None = None,
            mode: str = "delete", rng: random.Random | None = None,
            notice: float | None = None, now: datetime | None = None) -> list[Obj]:
    """Reclaim one named server, or `count` random reclaimable ones; returns what was taken.

    With `notice` (seconds) nothing is taken yet: each server gets ``sco:reclaim-at`` = now +
    notice, and the node agent takes it at that time. Raises LookupError when the named
    server is not a managed server of the region.
    """
    servers = api.servers()
    if server_id is not None:
        chosen: list[Mapping[str, Any]] = [s for s in servers if s["id"] == server_id
                                           or s["name"] == server_id]
        if not chosen:
            raise LookupError(f"no server {server_id!r} in the simulated region")
    else:
        chosen = pick_reclaim(servers, count or 1, rng or random.Random())
    taken = []
    for server in chosen:
        item: Obj = {"id": server["id"], "name": server["name"], "mode": mode,
                     "tags": list(server.get("tags") or [])}
        if notice is None:
            api.reclaim(str(server["id"]), mode)
        else:
            deadline = (now or datetime.now(UTC)) + timedelta(seconds=notice)
            item["reclaim_at"] = deadline.strftime("%Y-%m-%dT%H:%M:%SZ")
            api.set_metadata(server, RECLAIM_AT, item["reclaim_at"])
        taken.append(item)
    return taken


SCALE_ATTEMPTS = 3  # listings `scale` makes when a pod name it chose was taken meanwhile


def scale(api: SimApi, namespace: str, name: str, replicas: int) -> Obj:
    """Set a Deployment's replicas and add or delete its pods as a ReplicaSet would; returns
    what changed. Raises LookupError when the Deployment does not exist."""
    deployments = [d for d in api.objects("Deployment")
                   if d["metadata"].get("namespace") == namespace and d["metadata"]["name"] == name]
    if not deployments:
        raise LookupError(f"no Deployment {namespace}/{name} in the simulated region")
    deployment = deployments[0]
    before = int((deployment.get("spec") or {}).get("replicas", 1))
    for attempt in range(SCALE_ATTEMPTS):
        changes = scale_changes(deployment, api.objects("ReplicaSet"), api.objects("Pod"),
                                replicas, max(1, len(api.objects("Node"))), now_rfc3339())
        # the new pods before the higher count: the agent's ReplicaSet controller
        # (`missing_pods`) makes pods for a ReplicaSet below its count, and would otherwise
        # race this for the same names
        try:
            if changes.create:
                api.k8s("add", objects=list(changes.create))
        except RuntimeError as exc:  # a name the agent took meanwhile: read again
            if ": 409 " not in str(exc) or attempt == SCALE_ATTEMPTS - 1:
                raise
            continue
        break
    for kind, ns, obj_name, count in changes.replicas:
        api.k8s("patch", kind=kind, namespace=ns, name=obj_name,
                patch={"spec": {"replicas": count}})
    for pod in changes.delete:  # after the lower count: no replacement is made for them
        try:
            api.k8s("delete", kind="Pod", namespace=namespace, name=pod)
        except RuntimeError as exc:  # the agent's ReplicaSet controller took it first
            if ": 404 " not in str(exc):
                raise
    return {"namespace": namespace, "name": name, "replicas_before": before,
            "replicas": replicas, "pods_deleted": list(changes.delete),
            "pods_created": [str(p["metadata"]["name"]) for p in changes.create]}


def fail_node(api: SimApi, server_id: str) -> Obj:
    """Stop the kubelet of a server's Node for good (``scoctl sim fail-node``): the server
    stays ACTIVE, the Node stops reporting, and the node lifecycle controller turns it
    ``Ready=Unknown`` once the grace period is over; the agent never makes it Ready again.
    Raises LookupError when the server (id or name) is not a managed server of the region or
    has no Node."""
    servers = [s for s in api.servers() if MANAGED_TAG in (s.get("tags") or [])
               and server_id in (s["id"], s["name"])]
    if not servers:
        raise LookupError(f"no server {server_id!r} in the simulated region")
    server = servers[0]
    node = next((n for n in api.objects("Node") if server_of(n) == str(server["id"])), None)
    if node is None:
        raise LookupError(f"server {server['name']} ({server['id']}) has no Kubernetes Node")
    name = str(node["metadata"]["name"])
    api.k8s("patch", kind="Node", name=name,
            patch={"metadata": {"annotations": {KUBELET_ANNOTATION: KUBELET_STOPPED}}})
    return {"id": server["id"], "name": server["name"], "node": name,
            "status": server.get("status")}


class Agent:
    """One node agent: `step()` once per poll."""

    def __init__(self, settings: Mapping[str, Any], api: SimApi | None = None,
                 clock: Any = time.monotonic) -> None:
        self.settings = settings
        self.api = api or SimApi(str(settings["k8s_url"]), str(settings["nova_url"]),
                                 k8s_ca=settings.get("k8s_ca_file"))
        self.clock = clock
        self.shapes: dict[str, Mapping[str, Mapping[str, str]]] = dict(settings.get("flavors")
                                                                       or {})
        self.ready_after = float(settings.get("ready_after", 2.0))
        self.rate = float(settings.get("reclaim_rate_per_hour", 0.0))
        self.mode = str(settings.get("reclaim_mode", "delete"))
        self.node_suffix = str(settings.get("node_suffix") or "")
        self.unregistered = frozenset(str(i) for i in settings.get("unregistered_images") or ())
        seed = settings.get("seed")
        self.rng = random.Random(seed) if seed is not None else random.Random()
        self.registered_at: dict[str, float] = {}
        self.last_step: float | None = None
        self.failed_names: set[str] = set()
        self.skipped: set[str] = set()
        # the node lifecycle controller's grace period and PodGC's quarantine, scaled down
        # from upstream's 40 s each (k8s_controllers)
        self.node_grace = float(settings.get("node_monitor_grace", NODE_MONITOR_GRACE_S))
        self.quarantine = float(settings.get("podgc_quarantine", PODGC_QUARANTINE_S))
        self.heard: dict[str, float] = {}  # node → when its kubelet last reported
        self.missing_since: dict[str, float] = {}  # PodGC: node → first seen missing
        self.workloads = agent_workloads.Workloads(self.api)
        self.kubelets = agent_nodes.Kubelets(self.api, self.node_grace)

    def step(self) -> None:
        """Read Nova and Kubernetes, then register/ready/remove nodes, reclaim, schedule pods
        and refresh Deployment status."""
        now = self.clock()
        stamp = now_rfc3339()
        servers = self.api.servers()
        nodes = self.api.objects("Node")
        for node in nodes:
            self.registered_at.setdefault(str(node["metadata"]["name"]), now)
        actions = plan_nodes(servers, nodes, self.registered_at, now, self.ready_after,
                             self.shapes, stamp, self.node_suffix, self.unregistered)
        for name in actions.skipped:
            if name not in self.skipped:
                self.skipped.add(name)
                log.info("server %s is a Slurm node or of an unregistered image: not joining "
                         "Kubernetes", name)
        for node in actions.create:
            name = node["metadata"]["name"]
            if name in self.failed_names:
                continue
            try:
                self.api.k8s("add", objects=[node])
            except RuntimeError as exc:
                self.failed_names.add(name)
                log.error("node %s not registered: %s", name, exc)
                continue
            self.registered_at[name] = now
            taints = ",".join(f"{t['key']}={t.get('value', '')}:{t['effect']}"
                              for t in node["spec"].get("taints", []))
            log.info("node %s registered NotReady (server %s, taints %s)", name,
                     server_of(node), taints or "none")
        for name in actions.ready:
            self.api.k8s("node-ready", name=name, ready=True)
            log.info("node %s Ready", name)
        for name in actions.not_ready:
            self.api.k8s("node-ready", name=name, ready=False)
            log.info("node %s NotReady: its server is in error", name)
            self.kubelets.node_not_ready({"apiVersion": "v1", "kind": "Node", "metadata": next(
                (n["metadata"] for n in nodes if n["metadata"]["name"] == name),
                {"name": name})}, stamp)
        if actions.delete:
            self._remove_nodes(actions.delete)
        self._node_lifecycle(servers, nodes, actions, now)
        # a Node whose Ready changed this step is not reported from the stale listing
        gone = set(actions.delete) | set(actions.ready) | set(actions.not_ready)
        self.kubelets.beat([n for n in nodes if n["metadata"]["name"] not in gone
                            and self.heard.get(n["metadata"]["name"]) == now
                            and not kubelet_stopped(n)], now, stamp)
        for server in due_reclaims(servers, datetime.now(UTC)):
            self.api.reclaim(str(server["id"]), self.mode)
            log.info("reclaim at the notice deadline: server %s (%s)", server["name"],
                     self.mode)
        if self.rate > 0 and self.last_step is not None:
            chance = self.rate / 3600.0 * (now - self.last_step)
            if self.rng.random() < chance:
                for server in reclaim(self.api, count=1, mode=self.mode, rng=self.rng):
                    log.info("spot reclaim (rate %.1f/h): server %s (%s)", self.rate,
                             server["name"], self.mode)
        self.last_step = now
        self._schedule_and_report(stamp)

    def _remove_nodes(self, names: Sequence[str]) -> None:
        """The cloud node controller deletes the Nodes of servers gone; their pods stay bound
        to them until PodGC (`_collect_orphans`) takes them."""
        for name in names:
            self.api.k8s("delete", kind="Node", name=name)
            self.registered_at.pop(name, None)
            self.heard.pop(name, None)
            log.info("node %s removed: its server is gone", name)

    def _node_lifecycle(self, servers: Sequence[Mapping[str, Any]],
                        nodes: Sequence[Mapping[str, Any]], actions: NodeActions,
                        now: float) -> None:
        """The kubelets report while their server is ACTIVE and `fail-node` did not stop them;
        a Node not heard from for the grace period turns Ready=Unknown
        (`k8s_controllers.node_health`)."""
        status = {str(s["id"]): str(s.get("status")) for s in servers}
        gone = set(actions.delete)
        listed = {str(n["metadata"]["name"]) for n in nodes} - gone  # once, not per node
        self.heard = {k: v for k, v in self.heard.items() if k in listed}
        for node in nodes:
            name = str(node["metadata"]["name"])
            if name in gone:
                continue
            sid = server_of(node)  # a Node of no server (a static worker) always reports
            alive = (sid is None or status.get(sid) == "ACTIVE") and not kubelet_stopped(node)
            if alive or name not in self.heard:
                self.heard[name] = now
            if alive:
                continue
            conditions = controllers.node_health(node, self.heard.get(name), now,
                                                 datetime.now(UTC), self.node_grace)
            if conditions is None:
                continue
            self.api.k8s("patch", kind="Node", name=name,
                         patch={"status": {"conditions": conditions}})
            log.info("node %s Ready=Unknown: its kubelet stopped posting status %.0f s ago",
                     name, now - self.heard[name])
            self.kubelets.node_not_ready(node, now_rfc3339())

    def _collect_orphans(self, pods: Sequence[Mapping[str, Any]],
                         nodes: Sequence[Mapping[str, Any]], stamp: str) -> bool:
        """PodGC (`k8s_controllers.orphaned_pods`): pods bound to a Node gone for the
        quarantine are marked Failed (DisruptionTarget=DeletionByPodGC) and deleted; their
        ReplicaSets replace them with pending pods. Returns whether any pod went."""
        now = self.clock()
        names = [str(n["metadata"]["name"]) for n in nodes]
        self.missing_since, doomed = controllers.orphaned_pods(
            pods, names, self.missing_since, now, self.quarantine)
        if not doomed:
            return False
        moment = datetime.now(UTC)
        for pod in doomed:
            meta = pod["metadata"]
            self.api.k8s("patch", kind="Pod", namespace=meta.get("namespace"),
                         name=meta["name"],
                         patch={"status": controllers.podgc_failed_status(pod, moment)})
            self.api.k8s("delete", kind="Pod", namespace=meta.get("namespace"),
                         name=meta["name"])
        log.info("PodGC: %d pods of removed nodes deleted", len(doomed))
        room = replica_room(self.api.objects("ReplicaSet"), pods, doomed)
        fresh = replacement_pods(doomed, (str(p["metadata"]["name"]) for p in pods),
                                 max(1, len(nodes)), stamp, room=room)
        if fresh:
            self.api.k8s("add", objects=fresh)
            log.info("%d pods of removed nodes replaced by pending pods", len(fresh))
        return True

    def _schedule_and_report(self, stamp: str) -> None:
        pods = self.api.objects("Pod")
        nodes = self.api.objects("Node")
        if self._collect_orphans(pods, nodes, stamp):
            pods = self.api.objects("Pod")
        if self.kubelets.evict_tainted(pods, nodes, stamp):
            pods = self.api.objects("Pod")
        if self.workloads.reconcile(pods, max(1, len(nodes)), stamp, missing_pods):
            pods = self.api.objects("Pod")
        result = k8s_scheduler.schedule_round(pods, nodes, self.api.objects("Namespace"))
        bindings = result.bindings
        # one request per chunk of bindings, not per pod; the first refusal ends the step, as
        # one call per binding would
        for outcome in self.api.batch([{"op": "bind-pod", "namespace": b.namespace,
                                        "name": b.pod, "node": b.node, "running": True}
                                       for b in bindings], stop_on_error=True):
            if not outcome["ok"]:
                raise RuntimeError(f"kubernetes /_sim/bind-pod: {outcome['code']} "
                                   f"{str(outcome['message'])[:300]}")
        by_key = {(p["metadata"].get("namespace") or "default", p["metadata"]["name"]): p
                  for p in pods}
        patches: list[tuple[Obj, k8s_scheduler.Verdict]] = []
        for verdict in (*result.unschedulable, *result.refused):
            conditions = k8s_scheduler.scheduled_condition(
                by_key[(verdict.namespace, verdict.pod)], verdict, stamp)
            if conditions is None:
                continue
            if verdict.reason != "Unschedulable":
                log.warning("pod %s/%s not scheduled: %s", verdict.namespace, verdict.pod,
                            verdict.message)
            patches.append(({"op": "patch", "kind": "Pod", "namespace": verdict.namespace,
                             "name": verdict.pod,
                             "patch": {"status": {"conditions": conditions}}}, verdict))
        patched = 0
        outcomes = self.api.batch([op for op, _ in patches])
        for (_, verdict), outcome in zip(patches, outcomes, strict=True):
            if not outcome["ok"]:  # deleted since the listing: the next poll sees it
                log.info("pod %s/%s condition not written: kubernetes /_sim/patch: %s %s",
                         verdict.namespace, verdict.pod, outcome["code"],
                         str(outcome["message"])[:300])
                continue
            patched += 1
        if bindings:
            log.info("scheduled %d pods on %d nodes", len(bindings),
                     len({b.node for b in bindings}))
        self.kubelets.scheduler_events(
            [(by_key[(b.namespace, b.pod)], b.node) for b in bindings
             if (b.namespace, b.pod) in by_key],
            [(by_key[(v.namespace, v.pod)], v.message) for _, v in patches
             if v.reason == "Unschedulable"], stamp)
        if bindings or patched:
            pods = self.api.objects("Pod")
        # ReplicaSet, Deployment and InferenceService status (agent_workloads)
        self.workloads.report(pods, stamp, PodIndex(pods), replicaset_status)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the agent until SIGTERM/SIGINT; write the ready file after the first good step."""
    parser = argparse.ArgumentParser(prog="python -m scoctl.sim.agent",
                                     description="scoctl sim node agent")
    parser.add_argument("--settings", required=True, help="JSON settings written by sim up")
    parser.add_argument("--ready-file", help="written with the PID after the first step")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s agent %(levelname)s %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per request is noise
    with open(args.settings, encoding="utf-8") as fh:
        settings = json.load(fh)
    agent = Agent(settings)
    done = threading.Event()

    def _stop(signum: int, frame: object) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    interval = float(settings.get("poll_interval", 0.5))
    ready_written = False
    while not done.is_set():
        try:
            agent.step()
        except Exception as exc:  # noqa: BLE001 - keep polling; the emulators may be restarting
            log.warning("step failed: %s: %s", type(exc).__name__, exc)
        else:
            if not ready_written and args.ready_file:
                tmp = f"{args.ready_file}.tmp"
                with open(tmp, "w", encoding="utf-8") as fh:
                    json.dump({"pid": os.getpid()}, fh)
                os.replace(tmp, args.ready_file)
                ready_written = True
        done.wait(interval)
    agent.api.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
