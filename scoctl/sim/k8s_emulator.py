"""A small Kubernetes API server on 127.0.0.1 for tests, CI dry-runs and `scoctl sim`.

It serves the real `kubernetes` client and kubectl (through a kubeconfig that points at it) the
parts of the API scoctl uses, with the semantics scoctl's logic depends on:

* HTTPS by default, with a CA of its own (`scoctl.sim.k8s_tls`) that every kubeconfig it writes
  carries as ``certificate-authority-data`` (client-go sends no credentials to a plain
  ``http://`` server); plain HTTP only on request (``tls=False``, ``--plain-http``);

* core/v1 namespaces, nodes, pods (+ ``status``, ``eviction``), resourcequotas,
  persistentvolumeclaims, persistentvolumes (stored as given), events,
  secrets (``stringData`` stored base64 in ``data``, the ``type`` field selector: bootstrap
  token Secrets in kube-system);
  apps/v1 deployments, replicasets (+ ``status``), daemonsets (stored as given); batch/v1
  jobs; policy/v1 poddisruptionbudgets; discovery (``/api``, ``/apis``, ``/version``);
* custom resources, each served (routes and discovery) only while its CustomResourceDefinition
  is installed (`crds`, `install_crd`; else 404, as the apiextensions-apiserver answers): the
  KServe serving.kserve.io/v1beta1 inferenceservices (installed by default) and the
  scheduler-plugins PodGroup scheduling.x-k8s.io/v1alpha1 podgroups (`PODGROUP_CRD`; its
  schema's integers checked); no strategic merge patch, a delete answers the object;
* PodDisruptionBudgets through a disruption-controller step (`k8s_controllers`): a budget's
  ``status`` (``currentHealthy``, ``desiredHealthy``, ``expectedPods`` from the owning
  Deployment's or ReplicaSet's scale, ``disruptionsAllowed``, ``disruptedPods``,
  ``observedGeneration``, the ``DisruptionAllowed`` condition) is written `disruption_delay`
  after a change to its namespace's pods, budgets or controllers (`sync_disruption` at once);
  the Eviction API judges from that status as the apiserver does: terminal, Pending and
  terminating pods go without a budget, ``unhealthyPodEvictionPolicy`` is honoured, 429
  ``TooManyRequests`` with the ``DisruptionBudget`` cause when no disruption is left, and with
  Retry-After 10 while the budget is "still being processed" (``observedGeneration <
  generation``), 500 when two budgets select the pod; an eviction spends one disruption at
  once;
* list (``limit``/``continue`` pagination, label and field selectors) and watch (chunked, one JSON
  event per line) with one etcd-like resourceVersion counter and a per-type history: a watch from
  an RV replays what happened after it, ``""``/``"0"`` sends synthetic ADDED events first, a
  compacted RV gets the apiserver's ``ERROR`` event with a 410 ``Expired`` Status, and
  ``timeoutSeconds`` ends the stream; objects moving in or out of a selector are ADDED/DELETED;
* the node lifecycle controller's taints: ``node.kubernetes.io/unschedulable:NoSchedule`` on a
  cordoned Node, ``node.kubernetes.io/not-ready`` (Ready=False) or ``…/unreachable``
  (Ready=Unknown) with NoSchedule and NoExecute, written as the controller's own update
  (`lifecycle_taints`; NoExecute evicts nothing here);
* graceful pod deletion: a delete or an eviction leaves the pod Terminating
  (``deletionTimestamp``, ``deletionGracePeriodSeconds``; an eviction adds
  ``DisruptionTarget=True/EvictionByEvictionAPI``) for its grace period (the DeleteOptions'
  ``gracePeriodSeconds``, else ``terminationGracePeriodSeconds``, default 30; 0, unbound and
  finished pods go at once), times ``grace_scale`` (1; less in the simulated region), then
  deletes it as the kubelet would; the test-side `K8sEmulator.delete` is a forced deletion;
* create (``generateName``), replace (optimistic concurrency: 409 on a stale resourceVersion),
  patch (JSON merge patch, strategic merge patch with each field's patch strategy; JSON
  patch), delete with propagation (Background/Foreground
  cascade through ownerReferences, Orphan, and the batch/v1 default of Orphan);
* authentication and RBAC (`scoctl.sim.k8s_auth`): bearer tokens (`tokens`, default scoctl's
  ServiceAccount `SCOCTL_TOKEN` and the admin's `ADMIN_TOKEN`; none or unknown: 401), every
  request of a user outside ``system:masters`` authorized by the stored ClusterRoles, Roles and
  bindings (rbac.authorization.k8s.io/v1; 403 with upstream's message); `authorized` counts
  what RBAC allowed; the ``/_sim/`` control API is the simulator's own, not the Kubernetes API,
  and takes no token;
* ``/status`` apart from the main resource (`prepare_update`); list pages from the first page's
  snapshot; a restart (``start`` after ``stop``, or a new process: versions start from the
  clock) expires the watches from before;
* Status error bodies (400, 401, 403, 404, 409, 410, 422; 500 for a handler's bug; injected
  429/500/503);
* strict objects: required fields checked and every quantity a string, so that the client 37.x
  pydantic models deserialize everything served.

Test-side API: `K8sEmulator.add`/`apply`/`update`/`delete`/`get`/`objects`, `set_pod_unschedulable`,
`bind_pod`, `set_node_ready`, `sync_disruption`, `set_replica_failure`, `compact`,
`close_watches`, `fail_next`, `install_crd`, the `requests` log, and the `make_*` builders of
schema-valid objects.

Run as a process (for `scoctl sim`): ``python -m scoctl.sim.k8s_emulator --port 0 --ready-file F``
writes ``{"url": …, "pid": …, "ca": <PEM or null>}`` to F once it listens (``--tls-dir D``
keeps the CA and certificate in D, made there by the first start); the same test-side API is
reachable as JSON under ``/_sim/`` (``POST /_sim/apply {"objects": [...]}``, ``POST
/_sim/compact``, ``POST /_sim/install-crd {"name": …}``, …: `_control`; ``POST /_sim/batch``
runs several in one request: `_batch`); ``--crd NAME`` installs a CRD at start.
"""

from __future__ import annotations

import argparse
import base64
import bisect
import collections
import contextlib
import copy
import functools
import json
import os
import re
import signal
import socket
import ssl
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from scoctl.core.syntax import split_top_level
from scoctl.sim import k8s_controllers as controllers
from scoctl.sim import k8s_discovery as discovery
from scoctl.sim import k8s_gc, k8s_protobuf, k8s_quota
from scoctl.sim import k8s_openapi as openapi
from scoctl.sim import k8s_tables as tables
from scoctl.sim import k8s_workloads as workloads
from scoctl.sim.k8s_auth import (
    ADMIN,
    ANONYMOUS,
    PRIVILEGED_GROUP,
    RBAC_GROUP,
    SCOCTL,
    Attributes,
    Policy,
    User,
    authenticate,
    authorize,
    forbidden_message,
    policy_of,
    request_attributes,
)
from scoctl.sim.k8s_fields import check_fields
from scoctl.sim.k8s_rbac_bootstrap import bootstrap_objects
from scoctl.sim.k8s_tls import LOOPBACK_NAMES, TlsMaterial
from scoctl.sim.k8s_tls import generate as generate_tls
from scoctl.sim.k8s_tls import loopback as loopback_tls

Obj = dict[str, Any]


# --- resource types ------------------------------------------------------------------------------


@dataclass(frozen=True)
class ResourceType:
    """One API resource the emulator serves."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    custom: bool = False  # a custom resource: served only while its CRD is installed

    @property
    def crd(self) -> str:
        """The name of its CustomResourceDefinition: ``<plural>.<group>``, the name the
        apiextensions-apiserver requires of a CRD and looks a request's resource up by."""
        return f"{self.plural}.{self.group}"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def singular(self) -> str:
        return self.kind.lower()


TYPES: tuple[ResourceType, ...] = (
    ResourceType("", "v1", "namespaces", "Namespace", False, ("status",)),
    ResourceType("", "v1", "nodes", "Node", False, ("status",)),
    ResourceType("", "v1", "pods", "Pod", True, ("status", "eviction")),
    ResourceType("", "v1", "resourcequotas", "ResourceQuota", True, ("status",)),
    ResourceType("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, ("status",)),
    ResourceType("", "v1", "persistentvolumes", "PersistentVolume", False, ("status",)),
    ResourceType("", "v1", "events", "Event", True),
    ResourceType("", "v1", "secrets", "Secret", True),
    ResourceType("", "v1", "serviceaccounts", "ServiceAccount", True),
    ResourceType("apps", "v1", "deployments", "Deployment", True, ("status", "scale")),
    ResourceType("apps", "v1", "replicasets", "ReplicaSet", True, ("status", "scale")),
    ResourceType("apps", "v1", "daemonsets", "DaemonSet", True, ("status",)),
    ResourceType("coordination.k8s.io", "v1", "leases", "Lease", True),
    ResourceType("batch", "v1", "jobs", "Job", True, ("status",)),
    ResourceType("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True,
                 ("status",)),
    ResourceType("serving.kserve.io", "v1beta1", "inferenceservices", "InferenceService", True,
                 ("status",), custom=True),
    # scheduler-plugins' coscheduling PodGroup (manifests/coscheduling/crd.yaml: namespaced,
    # v1alpha1, the status subresource)
    ResourceType("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", True, ("status",),
                 custom=True),
    ResourceType(RBAC_GROUP, "v1", "clusterroles", "ClusterRole", False),
    ResourceType(RBAC_GROUP, "v1", "clusterrolebindings", "ClusterRoleBinding", False),
    ResourceType(RBAC_GROUP, "v1", "roles", "Role", True),
    ResourceType(RBAC_GROUP, "v1", "rolebindings", "RoleBinding", True),
)
_RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
KSERVE_CRD = "inferenceservices.serving.kserve.io"
PODGROUP_CRD = "podgroups.scheduling.x-k8s.io"
CRDS = frozenset(t.crd for t in TYPES if t.custom)  # the CRDs the emulator can serve
DEFAULT_CRDS: tuple[str, ...] = (KSERVE_CRD,)  # installed in a new emulator
_BY_PATH = {(t.group, t.version, t.plural): t for t in TYPES}
_BY_NAME: dict[str, ResourceType] = {}
for _t in TYPES:
    for _alias in (_t.kind, _t.kind.lower(), _t.plural):
        _BY_NAME[_alias] = _t


def resource_type(name: str) -> ResourceType:
    """A served type by kind (``Pod``) or plural (``pods``)."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"the emulator does not serve {name!r}") from None


# Field selectors the apiserver accepts per kind (beyond metadata.name / metadata.namespace).
_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec.nodeName", "status.phase", "spec.schedulerName", "spec.restartPolicy",
            "spec.serviceAccountName", "status.podIP", "status.nominatedNodeName"),
    "Node": ("spec.unschedulable",),
    "Event": ("involvedObject.kind", "involvedObject.name", "involvedObject.namespace",
              "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.fieldPath",
              "involvedObject.resourceVersion", "reason", "type", "source", "reportingComponent"),
    "Namespace": ("status.phase",),
    "Secret": ("type",),
    "Job": ("status.successful",),
    "ReplicaSet": ("status.replicas",),
}
_QUANTITY_MAPS = frozenset({"requests", "limits", "allocatable", "capacity", "hard", "used",
                            "overhead"})
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_GEN_CHARS = "bcdfghjklmnpqrstvwxz2456789"
# pkg/apis/core/v1/defaults.go `SetDefaults_PodSpec` (v1.DefaultTerminationGracePeriodSeconds)
DEFAULT_TERMINATION_GRACE_SECONDS = 30
DISRUPTION_DELAY_S = 0.05  # a change to a budget's status: the controller's reaction time
_DISRUPTION_INPUTS = frozenset({"Pod", "PodDisruptionBudget", "ReplicaSet", "Deployment"})
_DELETION_FIELDS = ("deletionTimestamp", "deletionGracePeriodSeconds")


# --- errors and small helpers --------------------------------------------------------------------


class StatusError(Exception):
    """An API error, served as a `Status` object with this HTTP code."""

    def __init__(
        self, code: int, reason: str, message: str, details: Obj | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details

    def body(self) -> Obj:
        out: Obj = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                    "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            out["details"] = self.details
        return out


def _not_found(rt: ResourceType, name: str) -> StatusError:
    return StatusError(404, "NotFound", f'{rt.plural}{_group_suffix(rt)} "{name}" not found',
                       {"name": name, "group": rt.group, "kind": rt.plural})


def _group_suffix(rt: ResourceType) -> str:
    return f".{rt.group}" if rt.group else ""


def _invalid(rt: ResourceType, name: str, causes: list[tuple[str, str]]) -> StatusError:
    text = ", ".join(f"{f}: {m}" for f, m in causes)
    return StatusError(
        422, "Invalid", f'{rt.kind} "{name}" is invalid: {text}',
        {"name": name, "group": rt.group, "kind": rt.kind,
         "causes": [{"reason": "FieldValueRequired" if m == "Required value"
                     else "FieldValueInvalid", "message": m, "field": f} for f, m in causes]},
    )


def now_rfc3339() -> str:
    """The current time as the API writes it (``2026-01-02T03:04:05Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _clone(obj: Any) -> Any:
    return json.loads(json.dumps(obj))


@functools.lru_cache(maxsize=256)
def _path(path: str) -> tuple[str, ...]:
    return tuple(path.split("."))


def _dig(obj: Mapping[str, Any], path: str) -> Any:
    cur: Any = obj
    for part in _path(path):  # a field selector digs the same path in every object listed
        # stored objects are dicts: the exact check first (the Mapping ABC check is several
        # times slower, and a field selector over 40,000 pods makes a quarter million)
        if not isinstance(cur, dict) and not isinstance(cur, Mapping):
            return None
        cur = cur.get(part)
    return cur


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    labels = obj.get("metadata", {}).get("labels")
    return labels if isinstance(labels, dict) or isinstance(labels, Mapping) else {}


# --- selectors -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        present = self.key in labels
        if self.op == "exists":
            return present
        if self.op == "!":
            return not present
        if self.op in ("=", "in"):
            return present and labels[self.key] in self.values
        # "!=" and "notin" match objects without the label too (apimachinery semantics)
        return not present or labels[self.key] not in self.values


_SET_REQ = re.compile(r"^\s*([^\s!=()]+)\s+(in|notin)\s*\(([^()]*)\)\s*$")
_EQ_REQ = re.compile(r"^\s*([^\s!=()]+)\s*(==|=|!=)\s*([^\s=!(),]*)\s*$")
_EXISTS_REQ = re.compile(r"^\s*(!?)\s*([^\s!=()]+)\s*$")


def _split_top(text: str) -> list[str]:
    try:
        parts = split_top_level(text, "()")
    except ValueError as exc:
        raise StatusError(400, "BadRequest", f"unable to parse requirement: {exc}") from None
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str) -> tuple[_Requirement, ...]:
    """Parse ``a=b,c!=d,e in (x,y),f notin (z),g,!h``; raises StatusError 400 when malformed."""
    reqs = []
    for part in _split_top(text or ""):
        m = _SET_REQ.match(part)
        if m:
            values = frozenset(v.strip() for v in m.group(3).split(",") if v.strip())
            reqs.append(_Requirement(m.group(1), m.group(2), values))
            continue
        m = _EQ_REQ.match(part)
        if m:
            op = "=" if m.group(2) in ("=", "==") else "!="
            reqs.append(_Requirement(m.group(1), op, frozenset({m.group(3)})))
            continue
        m = _EXISTS_REQ.match(part)
        if m:
            reqs.append(_Requirement(m.group(2), "!" if m.group(1) else "exists"))
            continue
        raise StatusError(400, "BadRequest", f"unable to parse requirement: {part.strip()!r}")
    return tuple(reqs)


def parse_field_selector(rt: ResourceType, text: str) -> tuple[tuple[str, bool, str], ...]:
    """Parse ``f=v,g!=w`` into (field, equal, value) triples; unsupported fields give 400."""
    out = []
    allowed = ("metadata.name", "metadata.namespace", *_FIELDS.get(rt.kind, ()))
    for part in _split_top(text or ""):
        m = re.match(r"^\s*([^\s!=]+)\s*(==|=|!=)\s*(.*?)\s*$", part)
        if not m:
            raise StatusError(400, "BadRequest", f"invalid selector: {part!r}")
        name, op, value = m.groups()
        if name not in allowed:
            raise StatusError(
                400, "BadRequest",
                f'field label not supported: {name}' if rt.group == "" else
                f'"{name}" is not a known field selector: only "metadata.name", '
                f'"metadata.namespace"')
        out.append((name, op != "!=", value))
    return tuple(out)


def _field_value(obj: Mapping[str, Any], name: str) -> str:
    value = _dig(obj, name)
    if value is None:
        return "false" if name == "spec.unschedulable" else ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@dataclass(frozen=True)
class _Filter:
    namespace: str | None
    labels: tuple[_Requirement, ...] = ()
    fields: tuple[tuple[str, bool, str], ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata", {})
        if self.namespace is not None and meta.get("namespace") != self.namespace:
            return False
        labels = _labels(obj)
        # loops, not all() over generators: a list runs this once per stored object
        for req in self.labels:
            if not req.matches(labels):
                return False
        for name, equal, value in self.fields:
            if (_field_value(obj, name) == value) != equal:
                return False
        return True


# --- patches -------------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


# The lists a strategic merge patch merges, with their patchMergeKey, from the struct tags of
# k8s.io/api core/v1, apps/v1, batch/v1, policy/v1 and apimachinery's ObjectMeta (types.go:
# ``patchStrategy:"merge" patchMergeKey:"…"``); every other list (``taints``, ``tolerations``,
# ``containerStatuses``, ``args``, …) has no strategy and is replaced whole.
_MERGE_KEYS = {"containers": "name", "initContainers": "name", "ephemeralContainers": "name",
               "env": "name", "ports": "containerPort", "volumes": "name",
               "volumeMounts": "mountPath", "volumeDevices": "devicePath",
               "conditions": "type", "ownerReferences": "uid", "imagePullSecrets": "name",
               "schedulingGates": "name", "resourceClaims": "name", "hostAliases": "ip",
               "podIPs": "ip", "addresses": "type"}
# lists of scalars with ``patchStrategy:"merge"``: a patch adds its values (a set union)
_MERGE_SCALARS = frozenset({"finalizers", "podCIDRs"})
_DELETE_FROM = "$deleteFromPrimitiveList/"
_ORDER = "$setElementOrder/"


def strategic_merge_patch(target: Any, patch: Any, key: str = "") -> Any:
    """Strategic merge patch (apimachinery ``strategicpatch.StrategicMergePatch``) with each
    field's patch strategy from the API types (`_MERGE_KEYS`, `_MERGE_SCALARS`): maps merge
    recursively, ``null`` deletes a key; a list with a merge key merges element-wise by it
    (``$patch: delete`` on an element removes it, an element ``{"$patch": "replace"}`` makes
    the patch's elements the whole list); a mergeable list of scalars gets the patch's values
    added (``$deleteFromPrimitiveList/<field>`` removes values); every other list is replaced;
    ``$patch: replace`` on a map replaces it, ``$patch: delete`` removes it;
    ``$setElementOrder/<field>`` and ``$retainKeys`` directives are accepted (order and
    retention are not modelled)."""
    if isinstance(patch, dict):
        directive = patch.get("$patch")
        if directive == "replace":
            return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
        if directive not in (None, "merge"):
            raise ValueError(f"unknown patch directive {directive!r} in a map")
        out = dict(target) if isinstance(target, dict) else {}
        for k, value in patch.items():
            if k.startswith(_DELETE_FROM):
                name = k[len(_DELETE_FROM):]
                if not isinstance(value, list):
                    raise ValueError(f"{k} must be a list")
                if isinstance(out.get(name), list):
                    out[name] = [v for v in out[name] if v not in value]
                continue
            if k.startswith("$"):
                continue
            if value is None or (isinstance(value, dict) and value.get("$patch") == "delete"):
                out.pop(k, None)
            else:
                out[k] = strategic_merge_patch(out.get(k), value, k)
        return out
    if isinstance(patch, list) and key in _MERGE_SCALARS:
        result = list(target) if isinstance(target, list) else []
        result += [v for v in patch if v not in result]
        return result
    if isinstance(patch, list) and key in _MERGE_KEYS:
        if not all(isinstance(e, dict) for e in patch):
            raise ValueError(f"{key}: the elements of a list merged by "
                             f"{_MERGE_KEYS[key]!r} must be objects")
        mkey = _MERGE_KEYS[key]
        if any(e.get("$patch") == "replace" for e in patch):
            return [{k: copy.deepcopy(v) for k, v in e.items() if not k.startswith("$")}
                    for e in patch if e.get("$patch") != "replace"]
        result = [dict(e) for e in target] if isinstance(target, list) else []
        for element in patch:
            if mkey not in element:
                raise ValueError(f"{key}: an element has no merge key {mkey!r}")
            idx = next((i for i, e in enumerate(result)
                        if isinstance(e, dict) and e.get(mkey) == element.get(mkey)), None)
            if element.get("$patch") == "delete":
                if idx is not None:
                    result.pop(idx)
            elif idx is None:
                result.append(strategic_merge_patch({}, element, ""))
            else:
                result[idx] = strategic_merge_patch(result[idx], element, "")
        return result
    return copy.deepcopy(patch)


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"bad JSON pointer {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(target: Any, ops: Sequence[Mapping[str, Any]]) -> Any:
    """RFC 6902 JSON patch (add, remove, replace, test, move, copy)."""
    doc = copy.deepcopy(target)

    def parent(parts: list[str]) -> tuple[Any, str]:
        cur = doc
        for p in parts[:-1]:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        return cur, parts[-1]

    def get(parts: list[str]) -> Any:
        cur = doc
        for p in parts:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        return cur

    for op in ops:
        kind, parts = op.get("op"), _pointer(str(op.get("path", "")))
        if kind == "test":
            if get(parts) != op.get("value"):
                raise ValueError(f"test failed at {op.get('path')}")
            continue
        if kind in ("move", "copy"):
            value = copy.deepcopy(get(_pointer(str(op.get("from", "")))))
            if kind == "move":
                holder, last = parent(_pointer(str(op["from"])))
                del holder[int(last) if isinstance(holder, list) else last]
            kind, op = "add", {"value": value}
        if not parts:
            doc = copy.deepcopy(op.get("value"))
            continue
        holder, last = parent(parts)
        if kind == "add":
            if isinstance(holder, list):
                holder.insert(len(holder) if last == "-" else int(last), copy.deepcopy(op["value"]))
            else:
                holder[last] = copy.deepcopy(op["value"])
        elif kind == "replace":
            if isinstance(holder, list):
                holder[int(last)] = copy.deepcopy(op["value"])
            else:
                if last not in holder:
                    raise ValueError(f"replace of a missing path {op.get('path')}")
                holder[last] = copy.deepcopy(op["value"])
        elif kind == "remove":
            del holder[int(last) if isinstance(holder, list) else last]
        else:
            raise ValueError(f"unknown JSON patch op {kind!r}")
    return doc


# --- validation ----------------------------------------------------------------------------------


def _check_string_map(value: Any, where: str, causes: list[tuple[str, str]]) -> None:
    if value is None:
        return
    if not isinstance(value, dict):
        causes.append((where, "Invalid value: must be an object"))
        return
    for k, v in value.items():
        if not isinstance(v, str):
            causes.append((f"{where}[{k}]", "Invalid value: must be a string"))


def _walk_quantities(value: Any, where: str, causes: list[tuple[str, str]]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            sub = f"{where}.{k}" if where else k
            if k in _QUANTITY_MAPS and isinstance(v, dict):
                _check_string_map(v, sub, causes)
            else:
                _walk_quantities(v, sub, causes)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _walk_quantities(v, f"{where}[{i}]", causes)


def _check_pod_spec(spec: Any, where: str, causes: list[tuple[str, str]]) -> None:
    if not isinstance(spec, dict):
        causes.append((where, "Required value"))
        return
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        causes.append((f"{where}.containers", "Required value"))
        containers = []
    for group in ("containers", "initContainers"):
        for i, c in enumerate(spec.get(group) or []):
            if not isinstance(c, dict) or not isinstance(c.get("name"), str) or not c["name"]:
                causes.append((f"{where}.{group}[{i}].name", "Required value"))
    for i, t in enumerate(spec.get("tolerations") or []):
        if not isinstance(t, dict):
            causes.append((f"{where}.tolerations[{i}]", "Invalid value"))
    _check_string_map(spec.get("nodeSelector"), f"{where}.nodeSelector", causes)


def _check_conditions(obj: Obj, causes: list[tuple[str, str]]) -> None:
    status = obj.get("status")
    if not isinstance(status, dict):
        return
    for i, cond in enumerate(status.get("conditions") or []):
        if not isinstance(cond, dict):
            causes.append((f"status.conditions[{i}]", "Invalid value"))
            continue
        for req in ("type", "status"):
            if not isinstance(cond.get(req), str):
                causes.append((f"status.conditions[{i}].{req}", "Required value"))


def validate(rt: ResourceType, obj: Obj) -> None:
    """Reject (422) what the client's models could not deserialize or the apiserver refuses."""
    meta = obj.get("metadata")
    causes: list[tuple[str, str]] = []
    if not isinstance(meta, dict):
        raise _invalid(rt, "", [("metadata", "Required value")])
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        causes.append(("metadata.name", "Required value: name or generateName is required"))
        name = ""
    elif rt.kind in _RBAC_KINDS:  # ValidateRBACName: a path segment name (``:`` allowed)
        if name in (".", "..") or "/" in name or "%" in name:
            causes.append(("metadata.name", f"Invalid value: {name!r}: may not contain '/' "
                                            "or '%' and may not be '.' or '..'"))
    elif len(name) > 253 or not _NAME.match(name):
        causes.append(("metadata.name", f"Invalid value: {name!r}: a lowercase RFC 1123 "
                                        "subdomain must consist of lower case alphanumeric "
                                        "characters, '-' or '.'"))
    _check_string_map(meta.get("labels"), "metadata.labels", causes)
    _check_string_map(meta.get("annotations"), "metadata.annotations", causes)
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        for req in ("apiVersion", "kind", "name", "uid"):
            if not isinstance(ref, dict) or not isinstance(ref.get(req), str):
                causes.append((f"metadata.ownerReferences[{i}].{req}", "Required value"))
    spec = obj.get("spec")
    if rt.kind == "Pod":
        _check_pod_spec(spec, "spec", causes)
    elif rt.kind in ("Deployment", "ReplicaSet", "Job"):
        if not isinstance(spec, dict):
            causes.append(("spec", "Required value"))
        else:
            selector = spec.get("selector")
            if rt.kind != "Job" and not isinstance(selector, dict):
                causes.append(("spec.selector", "Required value"))
            template = spec.get("template")
            if rt.kind != "ReplicaSet" and not isinstance(template, dict):
                causes.append(("spec.template", "Required value"))
            if isinstance(template, dict):
                _check_pod_spec(template.get("spec"), "spec.template.spec", causes)
                if isinstance(selector, dict):
                    tmpl_labels = template.get("metadata", {}).get("labels") or {}
                    wanted = selector.get("matchLabels") or {}
                    if any(tmpl_labels.get(k) != v for k, v in wanted.items()):
                        causes.append(("spec.template.metadata.labels", "Invalid value: "
                                       "`selector` does not match template `labels`"))
    elif rt.kind == "Node":
        for i, taint in enumerate((spec or {}).get("taints") or []):
            for req in ("key", "effect"):
                if not isinstance(taint, dict) or not isinstance(taint.get(req), str):
                    causes.append((f"spec.taints[{i}].{req}", "Required value"))
    elif rt.kind == "PodDisruptionBudget":
        if not isinstance(spec, dict):
            causes.append(("spec", "Required value"))
        elif "minAvailable" in spec and "maxUnavailable" in spec:
            causes.append(("spec", "Invalid value: minAvailable and maxUnavailable cannot be "
                                   "both set"))
        else:
            for key in ("minAvailable", "maxUnavailable"):
                if key in spec and not _int_or_percent(spec[key]):
                    causes.append((f"spec.{key}", f"Invalid value: {spec[key]!r}: an integer "
                                                  "or a percentage"))
            policy = spec.get("unhealthyPodEvictionPolicy")
            if policy is not None and policy not in controllers.UNHEALTHY_POD_EVICTION_POLICIES:
                causes.append(("spec.unhealthyPodEvictionPolicy", f"Unsupported value: "
                               f"{policy!r}: supported values: \"IfHealthyBudget\", "
                               "\"AlwaysAllow\""))
    elif rt.kind == "Event":
        if not isinstance(obj.get("involvedObject"), dict):
            causes.append(("involvedObject", "Required value"))
    elif rt.kind == "InferenceService":
        if not isinstance(spec, dict) or not isinstance(spec.get("predictor"), dict):
            causes.append(("spec.predictor", "Required value"))
    elif rt.kind == "PodGroup":
        _check_pod_group(spec, causes)
    elif rt.kind == "Secret":
        _check_secret(obj, causes)
    _walk_quantities(obj.get("spec"), "spec", causes)
    _walk_quantities(obj.get("status"), "status", causes)
    _check_conditions(obj, causes)
    if causes:
        raise _invalid(rt, name, causes)


_INT32 = (-(2**31), 2**31 - 1)


def _check_pod_group(spec: Any, causes: list[tuple[str, str]]) -> None:
    """The PodGroup CRD's structural schema (scheduler-plugins manifests/coscheduling/crd.yaml:
    ``spec.minMember`` and ``spec.scheduleTimeoutSeconds`` are ``integer``, ``format: int32``),
    with the messages of the apiextensions-apiserver's schema validation."""
    if spec is None:
        return
    if not isinstance(spec, dict):
        causes.append(("spec", f'Invalid value: "{type(spec).__name__}": spec in body must be '
                               "of type object"))
        return
    for key in ("minMember", "scheduleTimeoutSeconds"):
        value = spec.get(key)
        if value is None:
            continue
        where = f"spec.{key}"
        if isinstance(value, bool) or not isinstance(value, int):
            kind = "string" if isinstance(value, str) else type(value).__name__
            causes.append((where, f'Invalid value: "{kind}": {where} in body must be of type '
                                  f'integer: "{kind}"'))
        elif not _INT32[0] <= value <= _INT32[1]:
            causes.append((where, f"Invalid value: {value}: {where} in body must be of type "
                                  "int32"))


# --- disruption budgets --------------------------------------------------------------------------


def _int_or_percent(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return value >= 0
    return isinstance(value, str) and bool(re.fullmatch(r"\d+%", value))


# --- the store -----------------------------------------------------------------------------------


@dataclass
class _Event:
    rv: int
    type: str
    obj: Obj
    prev: Obj | None


@dataclass
class _Fault:
    remaining: int
    status: int
    retry_after: int | None
    path_contains: str | None
    method: str | None


@dataclass
class _TypeState:
    objects: dict[tuple[str, str], Obj] = field(default_factory=dict)
    sorted_keys: list[tuple[str, str]] | None = None
    history: list[_Event] = field(default_factory=list)
    history_rvs: list[int] = field(default_factory=list)
    floor: int = 0  # watching from an RV below this gets 410 Expired
    # key -> (the object, its compact JSON) as last listed: a list writes a cached text while
    # the object listed is that very one (see `K8sEmulator._list_json`)
    encoded: dict[tuple[str, str], tuple[Obj, str]] = field(default_factory=dict)


SNAPSHOTS = 16  # list snapshots kept for their continue tokens
# json.dumps(obj, separators=(",", ":")) without building an encoder per call (per listed item)
_COMPACT = json.JSONEncoder(separators=(",", ":"))
SCOCTL_TOKEN = "scoctl-sim"
ADMIN_TOKEN = "scoctl-sim-admin"
DEFAULT_TOKENS: Mapping[str, User] = {SCOCTL_TOKEN: SCOCTL, ADMIN_TOKEN: ADMIN}
# the request bodies the emulator decodes (JSON: an object, or a JSON/merge/strategic patch);
# anything else (protobuf, CBOR) is 415
ACCEPTED_BODY_TYPES = ("application/json", "application/json-patch+json",
                       "application/merge-patch+json", "application/strategic-merge-patch+json")
JSON_BODY_TYPES = frozenset(ACCEPTED_BODY_TYPES)
HANDSHAKE_TIMEOUT_S = 10.0  # a TLS client that has not finished its handshake by then is dropped
# the paths a request without credentials may read (as system:anonymous)
ANONYMOUS_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version"})


class K8sEmulator:
    """An in-process Kubernetes API server on 127.0.0.1 (see the module docstring)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *, max_history: int = 200_000,
                 tokens: Mapping[str, User] | None = None, grace_scale: float = 1.0,
                 initial_rv: int | None = None,
                 disruption_delay: float | None = DISRUPTION_DELAY_S,
                 crds: Iterable[str] = DEFAULT_CRDS,
                 tls: TlsMaterial | bool = True) -> None:
        if grace_scale <= 0:
            raise ValueError("grace_scale must be above 0 (gracePeriodSeconds=0 deletes at once)")
        self._host = host
        self._port = port
        # HTTPS (the default) with this CA + certificate; None: plain HTTP, on request only
        self.tls: TlsMaterial | None = (
            (loopback_tls() if host in LOOPBACK_NAMES else generate_tls((host,)))
            if tls is True else tls or None)
        # bearer token → user (a static token file); requests without one of them get 401
        self.tokens: dict[str, User] = dict(tokens if tokens is not None else DEFAULT_TOKENS)
        # (user, verb, group, resource[/sub], namespace) of every request authorized by RBAC
        # (not by the privileged group): what a role is measured against
        self.authorized: collections.Counter[tuple[str, str, str, str, str]] = (
            collections.Counter())
        self.max_history = max_history
        self._cond = threading.Condition()
        # the CustomResourceDefinitions installed (by name): a custom resource is served only
        # while its CRD is, as the apiextensions-apiserver serves it (`install_crd`)
        self.crds: set[str] = set()
        for crd in crds:
            self.install_crd(crd)
        # etcd's revision survives an apiserver restart; this emulator keeps nothing, so a new
        # process starts from the clock (µs since the epoch): above every version an earlier
        # process on this port handed out, unless it made a million writes a second
        self._rv = int(time.time() * 1_000_000) if initial_rv is None else initial_rv
        self._snapshots: collections.OrderedDict[tuple[str, int], tuple[
            list[tuple[str, str]], dict[tuple[str, str], Obj]]] = collections.OrderedDict()
        self._types = {t: _TypeState(floor=self._rv) for t in TYPES}
        self._watch_epoch = 0
        self._stopping = False
        self._served = False
        self._faults: list[_Fault] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._conns: set[socket.socket] = set()
        self._uid_counter = 0
        self._gen_counter = 0
        # a Terminating pod goes after its grace period times this (the kubelet's part)
        self.grace_scale = grace_scale
        self._terminating: dict[tuple[str, str], tuple[float, str]] = {}  # → (due, uid)
        # owners deleted in the foreground, waiting for their dependents (k8s_gc)
        self._foreground: set[tuple[ResourceType, str, str]] = set()
        self._reaper: threading.Thread | None = None
        # the disruption controller syncs a namespace's budgets this long after a change to
        # its pods, budgets or controllers (None: only when `sync_disruption` is called)
        self.disruption_delay = disruption_delay
        self._disruption_dirty: set[str] = set()
        self._disruption_due: float | None = None
        self._disruption_cost = 0.0  # CPU seconds the last sync took
        self.requests: collections.deque[str] = collections.deque(maxlen=20_000)
        self.add(make_namespace("default"))
        self.add(make_namespace("kube-system"))
        self.add(make_namespace("kube-node-lease"))  # the node Leases' (v1.NamespaceNodeLease)
        # the RBAC post-start hook's roles and bindings (k8s_rbac_bootstrap)
        self.add_many(bootstrap_objects())

    # -- lifecycle

    def start(self) -> K8sEmulator:
        """Bind and serve in a daemon thread; returns self.

        Starting again after `stop` is an apiserver restart: its watch cache begins at the
        current revision (cacher.go), so a watch or a continue token from before gets 410
        Expired and the client re-lists; versions go on from where they were."""
        emulator = self
        if self._served:
            self.compact()
        self._served = True

        context = self.tls.server_context() if self.tls is not None else None

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            allow_reuse_address = True

            def get_request(self) -> tuple[Any, Any]:
                sock, addr = super().get_request()
                if context is None:
                    return sock, addr
                # the handshake runs in the connection's own thread (`_Handler.setup`), so
                # that a slow or silent client does not hold the accept loop; the connection
                # is tracked from here (a stop closes it even mid-handshake)
                wrapped = context.wrap_socket(sock, server_side=True,
                                              do_handshake_on_connect=False)
                emulator._conns.add(wrapped)
                return wrapped, addr

            def shutdown_request(self, request: Any) -> None:
                emulator._conns.discard(request)
                super().shutdown_request(request)

            def handle_error(self, request: Any, client_address: Any) -> None:
                if isinstance(sys.exc_info()[1], OSError):  # ssl.SSLError, a reset: no bug
                    return
                super().handle_error(request, client_address)

        class Handler(_Handler):
            pass

        Handler.emulator = emulator
        self._stopping = False
        self._server = Server((self._host, self._port), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.1},
                                        name="k8s-emulator", daemon=True)
        self._thread.start()
        self._reaper = threading.Thread(target=self._reap_forever, name="k8s-emulator-kubelet",
                                        daemon=True)
        self._reaper.start()
        return self

    def stop(self) -> None:
        """Stop serving: end every watch and close every connection."""
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        for conn in list(self._conns):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()  # its handler's own close is then a no-op
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._reaper is not None:
            self._reaper.join(timeout=5)
        self._server = None
        self._thread = None
        self._reaper = None

    def __enter__(self) -> K8sEmulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError("the emulator is not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``https://127.0.0.1:<port>`` (``http://`` when started without TLS)."""
        scheme = "https" if self.tls is not None else "http"
        return f"{scheme}://{self._host}:{self.port}"

    @property
    def ca_pem(self) -> bytes | None:
        """The CA (PEM) the server certificate is signed by; None without TLS."""
        return self.tls.ca_pem if self.tls is not None else None

    def client_context(self) -> ssl.SSLContext | None:
        """An SSL context trusting this emulator's CA (for urllib/httpx); None without TLS."""
        return self.tls.client_context() if self.tls is not None else None

    def kubeconfig(self, context: str = "scoctl-sim", namespace: str = "default", *,
                   user: User = SCOCTL) -> str:
        """A kubeconfig (YAML is a superset of JSON, so it is written as JSON) for this server,
        with the bearer token of `user` (scoctl's ServiceAccount; `ADMIN` for set-up)."""
        token = next((t for t, u in self.tokens.items() if u == user), None)
        if token is None:
            raise KeyError(f"the emulator has no token for {user.name!r}")
        cluster: Obj = {"server": self.url}
        if self.tls is not None:
            cluster["certificate-authority-data"] = self.tls.ca_data
        return json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": context,
            "clusters": [{"name": context, "cluster": cluster}],
            "users": [{"name": context, "user": {"token": token}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context,
                                                       "namespace": namespace}}],
        }, indent=2)

    @property
    def resource_version(self) -> int:
        """The current (latest) resourceVersion."""
        with self._cond:
            return self._rv

    # -- custom resources

    def install_crd(self, name: str) -> None:
        """Install the CustomResourceDefinition `name` (one of `CRDS`, e.g. `PODGROUP_CRD`), as
        ``kubectl apply -f`` of its manifest would: from now on its resource is served and
        discovered. Raises ValueError for a CRD the emulator does not know."""
        if name not in CRDS:
            raise ValueError(f"the emulator cannot serve the CRD {name!r} (it serves "
                             f"{', '.join(sorted(CRDS))})")
        with self._cond:
            self.crds.add(name)

    def served(self, rt: ResourceType) -> bool:
        """Whether `rt` is served: a built-in kind always, a custom one while its CRD is
        installed."""
        return not rt.custom or rt.crd in self.crds

    def served_types(self) -> tuple[ResourceType, ...]:
        """The resource types served now (discovery lists these)."""
        return tuple(t for t in TYPES if self.served(t))

    def _type(self, name: str) -> ResourceType:
        """A served type by kind or plural; KeyError for one not served (kubectl's "no matches
        for kind" when its CRD is not installed)."""
        rt = resource_type(name)
        if not self.served(rt):
            raise KeyError(f"no matches for kind {rt.kind!r} in version {rt.api_version!r}: "
                           f"the CRD {rt.crd} is not installed")
        return rt

    # -- test-side API

    def add(self, obj: Mapping[str, Any], *, validate_obj: bool = True,
            copy_obj: bool = True) -> Obj:
        """Create an object (namespaces are created on demand); returns the stored object.

        With ``copy_obj=False`` the emulator keeps the given dict itself (the caller hands it
        over and must not change it), which makes seeding tens of thousands of pods fast.
        """
        rt = self._type(str(obj.get("kind", "")))
        body = _clone(obj) if copy_obj else dict(obj)
        ns = body.get("metadata", {}).get("namespace") or ("default" if rt.namespaced else "")
        with self._cond:
            if rt.namespaced and ("", ns) not in self._types[_BY_NAME["Namespace"]].objects:
                self._create(_BY_NAME["Namespace"], "", make_namespace(ns))
            return self._create(rt, ns, body, validate_obj=validate_obj)

    def add_many(self, objs: Iterable[Mapping[str, Any]], *, validate_obj: bool = True,
                 copy_obj: bool = True) -> int:
        """Create many objects under one lock (see `add` for the flags); returns how many."""
        count = 0
        with self._cond:
            for obj in objs:
                self.add(obj, validate_obj=validate_obj, copy_obj=copy_obj)
                count += 1
        return count

    def apply(self, obj: Mapping[str, Any]) -> Obj:
        """Create the object, or replace the stored one with the same name (keeping its uid)."""
        rt = self._type(str(obj.get("kind", "")))
        meta = obj.get("metadata", {})
        ns = meta.get("namespace") or ("default" if rt.namespaced else "")
        with self._cond:
            current = self._types[rt].objects.get((ns if rt.namespaced else "", meta.get("name")))
            if current is None:
                return self.add(obj)
            body = _clone(obj)
            body.setdefault("metadata", {}).pop("resourceVersion", None)
            return self._replace(rt, ns, str(meta["name"]), body)

    def get(self, kind: str, namespace: str | None, name: str) -> Obj:
        """A stored object (a copy); raises StatusError 404."""
        rt = self._type(kind)
        with self._cond:
            out: Obj = _clone(self._get(rt, namespace or "", name))
            return out

    def objects(self, kind: str, namespace: str | None = None) -> list[Obj]:
        """Copies of the stored objects of a kind, sorted by namespace and name."""
        rt = self._type(kind)
        with self._cond:
            return [_clone(self._types[rt].objects[k]) for k in self._keys(rt)
                    if namespace is None or k[0] == namespace]

    def update(self, kind: str, namespace: str | None, name: str,
               change: Callable[[Obj], None] | Mapping[str, Any]) -> Obj:
        """Change a stored object with a function (mutating a copy) or a merge patch."""
        rt = self._type(kind)
        with self._cond:
            body = _clone(self._get(rt, namespace or "", name))
            if callable(change):
                change(body)
            else:
                body = merge_patch(body, dict(change))
            body["metadata"].pop("resourceVersion", None)
            return self._replace(rt, namespace or "", name, body)

    def delete(self, kind: str, namespace: str | None, name: str,
               propagation: str | None = None) -> Obj:
        """Delete a stored object at once (with the API's propagation rules; a pod as by
        ``kubectl delete --force --grace-period=0``); returns it."""
        rt = self._type(kind)
        with self._cond:
            return self._delete(rt, namespace or "", name, propagation)

    def delete_pod(self, namespace: str, name: str, grace: int | None = None) -> Obj:
        """Delete a pod as a controller's DELETE does: gracefully (Terminating for its grace
        period, or `grace` seconds), then the kubelet removes it."""
        with self._cond:
            return self._delete_pod(namespace, name, grace)

    def set_pod_unschedulable(self, namespace: str, name: str,
                              message: str = "0/1 nodes are available: 1 Insufficient cpu. "
                                             "preemption: 0/1 nodes are available: 1 No "
                                             "preemption victims found for incoming pod.."
                              ) -> Obj:
        """Mark a pod as the scheduler does when no node fits: PodScheduled=False/Unschedulable."""
        def change(pod: Obj) -> None:
            status = pod.setdefault("status", {})
            status["phase"] = "Pending"
            status["conditions"] = [c for c in status.get("conditions") or []
                                    if c.get("type") != "PodScheduled"] + [
                _condition("PodScheduled", "False", "Unschedulable", message)]
        return self.update("Pod", namespace, name, change)

    def bind_pod(self, namespace: str, name: str, node: str, *, running: bool = True) -> Obj:
        """Bind a pod to a node as the scheduler + kubelet would (Running and Ready if asked)."""
        def change(pod: Obj) -> None:
            pod["spec"]["nodeName"] = node
            status = pod.setdefault("status", {})
            status["phase"] = "Running" if running else "Pending"
            conds = [_condition("PodScheduled", "True")]
            if running:
                conds += [_condition("Initialized", "True"), _condition("Ready", "True"),
                          _condition("ContainersReady", "True")]
            status["conditions"] = conds
        return self.update("Pod", namespace, name, change)

    def set_node_ready(self, name: str, ready: bool = True) -> Obj:
        """Set a node's Ready condition."""
        def change(node: Obj) -> None:
            status = node.setdefault("status", {})
            status["conditions"] = [c for c in status.get("conditions") or []
                                    if c.get("type") != "Ready"] + [
                _condition("Ready", "True" if ready else "False",
                           "KubeletReady" if ready else "KubeletNotReady",
                           "kubelet is posting ready status" if ready else "container runtime "
                           "network not ready")]
        return self.update("Node", None, name, change)

    def set_replica_failure(self, kind: str, namespace: str, name: str, message: str,
                            reason: str = "FailedCreate") -> Obj:
        """Set ``ReplicaFailure=True`` on a Deployment or ReplicaSet, as the controllers do when
        pod creation fails (e.g. ``pods "x-1" is forbidden: exceeded quota: …``)."""
        def change(obj: Obj) -> None:
            status = obj.setdefault("status", {})
            status["conditions"] = [c for c in status.get("conditions") or []
                                    if c.get("type") != "ReplicaFailure"] + [
                _condition("ReplicaFailure", "True", reason, message)]
        return self.update(kind, namespace, name, change)

    def clear_replica_failure(self, kind: str, namespace: str, name: str) -> Obj:
        """Remove the ReplicaFailure condition (creation succeeds again)."""
        def change(obj: Obj) -> None:
            status = obj.setdefault("status", {})
            status["conditions"] = [c for c in status.get("conditions") or []
                                    if c.get("type") != "ReplicaFailure"]
        return self.update(kind, namespace, name, change)

    def compact(self, kind: str | None = None) -> int:
        """Forget the history (of one kind, or all): every resourceVersion handed out so far
        now gets 410 Expired (watches and continue tokens); returns the new current version."""
        with self._cond:
            self._rv += 1
            for rt in ([self._type(kind)] if kind else list(TYPES)):
                state = self._types[rt]
                state.history.clear()
                state.history_rvs.clear()
                state.floor = self._rv
                for snap in [k for k in self._snapshots if k[0] == rt.plural]:
                    del self._snapshots[snap]
            self._cond.notify_all()
            return self._rv

    def close_watches(self) -> None:
        """End every open watch stream (the client re-watches from its last RV)."""
        with self._cond:
            self._watch_epoch += 1
            self._cond.notify_all()

    def fail_next(self, count: int = 1, status: int = 500, *, retry_after: int | None = None,
                  path_contains: str | None = None, method: str | None = None) -> None:
        """Answer the next `count` matching API requests with `status` (a Status body)."""
        with self._cond:
            self._faults.append(_Fault(count, status, retry_after, path_contains, method))

    def clear_faults(self) -> None:
        """Drop every pending injected fault."""
        with self._cond:
            self._faults.clear()

    # -- store internals (call with self._cond held)

    def _keys(self, rt: ResourceType) -> list[tuple[str, str]]:
        state = self._types[rt]
        if state.sorted_keys is None:
            state.sorted_keys = sorted(state.objects)
        return state.sorted_keys

    def _get(self, rt: ResourceType, ns: str, name: str) -> Obj:
        obj = self._types[rt].objects.get((ns if rt.namespaced else "", name))
        if obj is None:
            raise _not_found(rt, name)
        return obj

    def _new_uid(self) -> str:
        self._uid_counter += 1
        return str(uuid.uuid5(uuid.NAMESPACE_URL, f"scoctl-sim/{id(self)}/{self._uid_counter}"))

    def _record(self, rt: ResourceType, type_: str, obj: Obj, prev: Obj | None) -> None:
        if rt.kind in _DISRUPTION_INPUTS:  # the disruption controller's informers
            self._disruption_changed(str(obj.get("metadata", {}).get("namespace") or ""))
        state = self._types[rt]
        state.history.append(_Event(self._rv, type_, obj, prev))
        state.history_rvs.append(self._rv)
        if len(state.history) > self.max_history:
            drop = len(state.history) // 2
            state.floor = state.history_rvs[drop - 1]
            del state.history[:drop]
            del state.history_rvs[:drop]
        self._cond.notify_all()

    def _create(self, rt: ResourceType, ns: str, body: Obj, *, validate_obj: bool = True,
                dry_run: bool = False) -> Obj:
        meta = body.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            self._gen_counter += 1
            n, suffix = self._gen_counter, ""
            for _ in range(5):
                n, r = divmod(n, len(_GEN_CHARS))
                suffix += _GEN_CHARS[r]
            meta["name"] = f"{meta['generateName']}{suffix}"
        if rt.namespaced:
            meta["namespace"] = ns
            if ("", ns) not in self._types[_BY_NAME["Namespace"]].objects:
                raise StatusError(404, "NotFound", f'namespaces "{ns}" not found',
                                  {"name": ns, "kind": "namespaces"})
        else:
            meta.pop("namespace", None)
        body["apiVersion"] = rt.api_version
        body["kind"] = rt.kind
        if validate_obj:
            validate(rt, body)
        key = (ns if rt.namespaced else "", str(meta["name"]))
        state = self._types[rt]
        if key in state.objects:
            raise StatusError(409, "AlreadyExists",
                              f'{rt.plural}{_group_suffix(rt)} "{key[1]}" already exists',
                              {"name": key[1], "group": rt.group, "kind": rt.plural})
        self._rv += 1
        meta["uid"] = meta.get("uid") or self._new_uid()
        meta["resourceVersion"] = str(self._rv)
        meta["creationTimestamp"] = meta.get("creationTimestamp") or now_rfc3339()
        if rt.kind in ("Deployment", "ReplicaSet", "Job", "InferenceService",
                       "PodDisruptionBudget"):
            meta["generation"] = 1
        if rt.kind == "PodDisruptionBudget":  # podDisruptionBudgetStrategy.PrepareForCreate
            body["status"] = {}
        meta.pop("deletionTimestamp", None)
        _defaults(rt, body)
        if dry_run:  # registry/generic/registry/dryrun.go `Create`: checked, not stored
            meta.pop("resourceVersion", None)
            self._rv -= 1
            return body
        state.objects[key] = body
        state.sorted_keys = None
        self._record(rt, "ADDED", body, None)
        if rt.kind == "Node":
            self._node_lifecycle(key[1])  # answers with the writer's own version
        return body

    def _replace(self, rt: ResourceType, ns: str, name: str, body: Obj,
                 *, expect_rv: str | None = None, terminating: bool = False,
                 controller: bool = False, dry_run: bool = False) -> Obj:
        key = (ns if rt.namespaced else "", name)
        state = self._types[rt]
        current = state.objects.get(key)
        if current is None:
            raise _not_found(rt, name)
        cmeta = current["metadata"]
        if expect_rv and expect_rv != cmeta.get("resourceVersion"):
            raise StatusError(
                409, "Conflict",
                f'Operation cannot be fulfilled on {rt.plural}{_group_suffix(rt)} "{name}": the '
                "object has been modified; please apply your changes to the latest version and "
                "try again", {"name": name, "group": rt.group, "kind": rt.plural})
        meta = body.setdefault("metadata", {})
        if meta.get("name") not in (None, name):
            raise _invalid(rt, name, [("metadata.name", "Invalid value: field is immutable")])
        meta["name"] = name
        if rt.namespaced:
            meta["namespace"] = ns
        body["apiVersion"] = rt.api_version
        body["kind"] = rt.kind
        for keep in ("uid", "creationTimestamp"):
            meta[keep] = cmeta.get(keep)
        if not terminating:  # an update never sets nor clears a deletion (rest.BeforeUpdate)
            for keep in _DELETION_FIELDS:
                if keep in cmeta:
                    meta[keep] = cmeta[keep]
                else:
                    meta.pop(keep, None)
        if "generation" in cmeta:
            spec_changed = body.get("spec") != current.get("spec")
            meta["generation"] = int(cmeta["generation"]) + (1 if spec_changed else 0)
        validate(rt, body)
        _defaults(rt, body)
        if dry_run:  # dryrun.go `GuaranteedUpdate`: the result, the stored object unchanged
            meta["resourceVersion"] = cmeta.get("resourceVersion")
            return body
        self._rv += 1
        meta["resourceVersion"] = str(self._rv)
        state.objects[key] = body
        self._record(rt, "MODIFIED", body, current)
        if rt.kind == "Node" and not controller:
            self._node_lifecycle(name)  # answers with the writer's own version
        return body

    def _patch(self, rt: ResourceType, ns: str, name: str, patch: Any, content_type: str,
               sub: str | None = None, *, dry_run: bool = False) -> Obj:
        current = self._get(rt, ns, name)
        try:
            if content_type.startswith("application/json-patch+json"):
                if not isinstance(patch, list):
                    raise ValueError("a JSON patch must be a list of operations")
                body = json_patch(current, patch)
            elif content_type.startswith("application/strategic-merge-patch+json"):
                if rt.custom:  # a custom resource has no patch strategies
                    raise StatusError(
                        415, "UnsupportedMediaType",
                        "the body of the request was in an unknown format - accepted media "
                        "types include: application/json-patch+json, "
                        "application/merge-patch+json, application/apply-patch+yaml")
                body = strategic_merge_patch(current, patch)
            elif content_type.startswith("application/merge-patch+json"):
                body = merge_patch(current, patch)
            else:
                raise StatusError(415, "UnsupportedMediaType",
                                  f"the body of the request was in an unknown format: "
                                  f"{content_type}")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise StatusError(422, "Invalid", f"the server rejected our request due to an error "
                                              f"in our request: {exc}") from exc
        if not isinstance(body, dict):
            raise StatusError(422, "Invalid", "the patch did not produce an object")
        expect = patch.get("metadata", {}).get("resourceVersion") if isinstance(
            patch, dict) else None
        if not isinstance(body.get("metadata", {}), dict):
            raise StatusError(422, "Invalid", "the patch made metadata something other than "
                                              "an object")
        body = prepare_update(rt, current, body, sub)
        body.setdefault("metadata", {})
        body["metadata"].pop("resourceVersion", None)
        return self._replace(rt, ns, name, body, expect_rv=expect, dry_run=dry_run)

    def _delete(self, rt: ResourceType, ns: str, name: str, propagation: str | None, *,
                finalize: bool = False) -> Obj:
        key = (ns if rt.namespaced else "", name)
        state = self._types[rt]
        current = state.objects.get(key)
        if current is None:
            raise _not_found(rt, name)
        if propagation is None:
            propagation = "Orphan" if rt.kind == "Job" else "Background"
        if not finalize and k8s_gc.FOREGROUND in (current["metadata"].get("finalizers") or []):
            return current  # already waiting for its dependents (k8s_gc)
        if propagation == "Foreground" and rt.kind != "Pod" and not finalize:
            return k8s_gc.start_foreground(self, rt, key[0], name)
        del state.objects[key]
        state.encoded.pop(key, None)
        if rt.kind == "Pod":
            self._terminating.pop(key, None)
        state.sorted_keys = None
        self._rv += 1
        final: Obj = _clone(current)
        final["metadata"]["resourceVersion"] = str(self._rv)
        self._record(rt, "DELETED", final, current)
        uid = current["metadata"].get("uid")
        if rt.kind == "Namespace":
            for other in TYPES:
                if other.namespaced:
                    for okey in [k for k in self._types[other].objects if k[0] == name]:
                        self._delete(other, okey[0], okey[1], "Background")
        elif rt.kind != "Pod":  # the garbage collector (a pod owns nothing here)
            k8s_gc.collect(self, str(uid), propagation)
        return final

    # -- the node lifecycle controller (call with self._cond held)

    def _node_lifecycle(self, name: str) -> Obj:
        """Write the taints the node lifecycle controller keeps in step with a Node, as its own
        update after the one that changed the Node (so the writer's answer does not show them
        yet, and a watch sees a second MODIFIED); returns the Node as stored."""
        rt = _BY_NAME["Node"]
        node = self._get(rt, "", name)
        taints = list((node.get("spec") or {}).get("taints") or [])
        managed = [t for t in taints if t.get("key") in LIFECYCLE_TAINTS]
        have = {(t.get("key"), t.get("effect")): t for t in managed}
        want = [have.get((t["key"], t["effect"]), t) for t in lifecycle_taints(node)]
        if sorted((t["key"], t["effect"]) for t in want) == sorted(have):
            return node
        body = _clone(node)
        rest = [t for t in taints if t.get("key") not in LIFECYCLE_TAINTS]
        if rest or want:
            body.setdefault("spec", {})["taints"] = rest + want
        else:
            body.get("spec", {}).pop("taints", None)
        body["metadata"].pop("resourceVersion", None)
        return self._replace(rt, "", name, body, controller=True)

    # -- graceful deletion (call with self._cond held)

    def _delete_pod(self, ns: str, name: str, grace: int | None, *, evicted: bool = False
                    ) -> Obj:
        """Delete a pod as kube-apiserver does: gracefully (Terminating: ``deletionTimestamp``
        and ``deletionGracePeriodSeconds`` set, listed and watched as MODIFIED) unless its grace
        period is 0, a second delete only shortening it; an eviction first adds the condition
        ``DisruptionTarget=True/EvictionByEvictionAPI``. `grace` is the DeleteOptions'
        ``gracePeriodSeconds`` (None: the pod's own). Returns the pod as left (or as deleted)."""
        rt = _BY_NAME["Pod"]
        current = self._get(rt, ns, name)
        body = _clone(current)
        meta = body["metadata"]
        changed = False
        if evicted:  # eviction.go addConditionAndDeletePod
            status = body.setdefault("status", {})
            status["conditions"] = [c for c in status.get("conditions") or []
                                    if c.get("type") != "DisruptionTarget"] + [
                _condition("DisruptionTarget", "True", "EvictionByEvictionAPI",
                           "Eviction API: evicting")]
            changed = True
        period = _grace_period(body, grace)
        now = datetime.now(UTC)
        if meta.get("deletionTimestamp"):  # rest.BeforeDelete on an object being deleted
            pending = meta.get("deletionGracePeriodSeconds")
            if not pending or period == 0:
                return self._delete(rt, ns, name, None)
            if grace is not None and period < int(pending):
                meta["deletionTimestamp"] = _rfc3339(
                    _parse_time(str(meta["deletionTimestamp"])) - timedelta(seconds=int(pending))
                    + timedelta(seconds=period))
                meta["deletionGracePeriodSeconds"] = period
                self._schedule_reap(ns, name, str(meta.get("uid")), period)
                changed = True
        elif period == 0:
            return self._delete(rt, ns, name, None)
        else:
            meta["deletionTimestamp"] = _rfc3339(now + timedelta(seconds=period))
            meta["deletionGracePeriodSeconds"] = period
            self._schedule_reap(ns, name, str(meta.get("uid")), period)
            changed = True
        if not changed:
            return current
        meta.pop("resourceVersion", None)
        return self._replace(rt, ns, name, body, terminating=True)

    def _schedule_reap(self, ns: str, name: str, uid: str, period: int) -> None:
        due = time.monotonic() + period * self.grace_scale
        self._terminating[(ns, name)] = (due, uid)
        self._cond.notify_all()

    def _reap(self) -> float | None:
        """Delete the Terminating pods whose (scaled) grace period is over, as the kubelet does
        once their containers stopped; returns the seconds until the next is due."""
        now = time.monotonic()
        rt = _BY_NAME["Pod"]
        for key, (due, uid) in sorted(self._terminating.items(), key=lambda kv: kv[1][0]):
            if due > now:
                break
            current = self._types[rt].objects.get(key)
            if current is not None and current["metadata"].get("uid") == uid:
                self._delete(rt, key[0], key[1], None)
            else:
                self._terminating.pop(key, None)
        return min((due - now for due, _ in self._terminating.values()), default=None)

    def _reap_forever(self) -> None:
        with self._cond:
            while not self._stopping:
                waits = [w for w in (self._reap(), self._disruption_tick()) if w is not None]
                if self._foreground:
                    k8s_gc.finish_foreground(self)
                    waits.append(0.1)
                self._cond.wait(min(max(min(waits), 0.0), 1.0) if waits else 1.0)

    # -- the disruption controller (call with self._cond held)

    def _disruption_changed(self, ns: str) -> None:
        """A pod, budget or controller of `ns` changed: its budgets are synced after
        `disruption_delay` (the controller's informers and work queue)."""
        self._disruption_dirty.add(ns)
        if self._disruption_due is None and self.disruption_delay is not None:
            # the lock held a tenth of the time at most, however many pods (the sync's own
            # CPU time: a thread waiting for the GIL is not the sync's cost), 2 s at most
            self._disruption_due = time.monotonic() + max(
                self.disruption_delay, min(10 * self._disruption_cost, 2.0))

    def _disruption_tick(self) -> float | None:
        """Sync the changed namespaces' budgets once due; returns the seconds until then."""
        if self._disruption_due is None:
            return None
        left = self._disruption_due - time.monotonic()
        if left > 0:
            return left
        self._sync_disruption()  # its own writes may have scheduled the next one
        return None if self._disruption_due is None else self._disruption_due - time.monotonic()

    def sync_disruption(self) -> int:
        """Run the disruption controller over every PodDisruptionBudget now (it otherwise runs
        `disruption_delay` after a change); returns how many statuses it wrote."""
        with self._cond:
            self._disruption_dirty.update(
                k[0] for k in self._types[_BY_NAME["PodDisruptionBudget"]].objects)
            return self._sync_disruption()

    def _sync_disruption(self) -> int:
        """disruption.go `sync` for the budgets of the changed namespaces: each one's status
        from `controllers.disruption_status`, written (as the controller's own update, which
        bumps no generation) when it differs."""
        started = time.thread_time()
        try:
            return self._sync_budgets()
        finally:
            self._disruption_cost = time.thread_time() - started

    def _sync_budgets(self) -> int:
        dirty, self._disruption_dirty = self._disruption_dirty, set()
        self._disruption_due = None
        pdb_type = _BY_NAME["PodDisruptionBudget"]
        budgets = sorted((k, b) for k, b in self._types[pdb_type].objects.items()
                         if k[0] in dirty)
        if not budgets:
            return 0
        namespaces = {k[0] for k, _ in budgets}
        pods: dict[str, list[Obj]] = {}
        for (ns, _), pod in self._types[_BY_NAME["Pod"]].objects.items():
            if ns in namespaces:
                pods.setdefault(ns, []).append(pod)
        owners: dict[str, dict[str, Obj]] = {}
        for kind in ("ReplicaSet", "Deployment"):
            for (ns, _), obj in self._types[_BY_NAME[kind]].objects.items():
                if ns in namespaces:
                    owners.setdefault(ns, {})[str(obj["metadata"].get("uid"))] = obj
        now = datetime.now(UTC)
        written = 0
        for (ns, name), pdb in budgets:
            status = controllers.disruption_status(pdb, pods.get(ns, []), owners.get(ns, {}),
                                                   now)
            if status == pdb.get("status"):
                continue
            body = _clone(pdb)
            body["status"] = status
            body["metadata"].pop("resourceVersion", None)
            self._replace(pdb_type, ns, name, body, controller=True)
            written += 1
        return written

    # -- list / watch internals

    def _list(self, rt: ResourceType, flt: _Filter, limit: int | None,
              cont: str | None) -> Obj:
        """One page of a list. Every page of one list comes from the snapshot its first page
        was read at and reports that list's resourceVersion (etcd3/store.go GetList reads the
        continuation at the token's revision); a token whose revision was compacted, or whose
        snapshot this emulator no longer keeps (the last `SNAPSHOTS`), gets 410 Expired."""
        with self._cond:
            start: tuple[str, str] | None = None
            if cont:
                try:
                    token = json.loads(base64.urlsafe_b64decode(cont.encode()))
                    rv, start = int(token["rv"]), (str(token["start"][0]), str(token["start"][1]))
                except (ValueError, KeyError, TypeError, IndexError) as exc:
                    raise StatusError(400, "BadRequest",
                                      "continue key is not valid: invalid token") from exc
                held = self._snapshots.get((rt.plural, rv))
                if rv < self._types[rt].floor or held is None:
                    raise StatusError(
                        410, "Expired", "The provided continue parameter is too old to display a "
                        "consistent list result. You can start a new list without the continue "
                        "parameter.")
                self._snapshots.move_to_end((rt.plural, rv))
                keys, objects = held
            else:
                rv = self._rv
                keys, objects = self._keys(rt), self._types[rt].objects
            index = bisect.bisect_right(keys, start) if start is not None else 0
            items: list[Obj] = []
            next_key: tuple[str, str] | None = None
            while index < len(keys):
                key = keys[index]
                index += 1
                if flt.namespace is not None and key[0] != flt.namespace:
                    continue
                obj = objects[key]
                if flt.matches(obj):
                    items.append(obj)
                    if limit and len(items) >= limit:
                        next_key = key
                        break
            if next_key is not None and index < len(keys) and not cont:
                # the stored objects are replaced on a write, never changed in place: a
                # shallow copy of the map is the snapshot
                self._snapshots[(rt.plural, rv)] = (keys, dict(objects))
                while len(self._snapshots) > SNAPSHOTS:
                    self._snapshots.popitem(last=False)
        meta: Obj = {"resourceVersion": str(rv)}
        if next_key is not None and index < len(keys):
            meta["continue"] = base64.urlsafe_b64encode(json.dumps(
                {"rv": rv, "start": list(next_key)}).encode()).decode()
        return {"kind": f"{rt.kind}List", "apiVersion": rt.api_version, "metadata": meta,
                "items": items}

    def _list_json(self, rt: ResourceType, page: Obj) -> bytes:
        """A page `_list` gave as the bytes `_Handler._send` would write for it, each item's
        text reused while that item is the one it was made from. Stored objects are replaced on
        a write, never changed in place, so the same object always has the same text; the check
        is identity (never the key or the resourceVersion), so a miss only costs the encoding.
        Encoding is most of what serving a 40,000-pod list costs; this runs outside the lock,
        like the encoding it replaces."""
        texts = self._encoded(rt, page["items"])
        head = json.dumps({k: v for k, v in page.items() if k != "items"},
                          separators=(",", ":"))
        # `_list` puts "items" last, so this is the text of the whole page, byte for byte
        return f'{head[:-1]},"items":[{",".join(texts)}]}}'.encode()

    def _encoded(self, rt: ResourceType, items: Sequence[Obj]) -> list[str]:
        """The compact JSON of stored objects, each text reused while its object is the one it
        was made from (`_list_json`)."""
        cache = self._types[rt].encoded
        texts = []
        for obj in items:
            meta = obj.get("metadata") or {}
            key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
            hit = cache.get(key)
            if hit is None or hit[0] is not obj:
                hit = (obj, _COMPACT.encode(obj))
                cache[key] = hit
            texts.append(hit[1])
        return texts

    def objects_json(self, kind: str, namespace: str | None = None) -> bytes:
        """``{"items": [...]}`` of `objects` as JSON bytes, without copying the objects: the
        texts `_list_json` caches (``POST /_sim/list``, which a node agent at scale calls for
        40,000 pods a step)."""
        rt = self._type(kind)
        with self._cond:
            state = self._types[rt]
            items = [state.objects[k] for k in self._keys(rt)
                     if namespace is None or k[0] == namespace]
        return f'{{"items":[{",".join(self._encoded(rt, items))}]}}'.encode()

    def _watch(self, rt: ResourceType, flt: _Filter, rv_param: str, timeout: float | None,
               bookmarks: bool, *, initial_end: bool = False) -> Iterator[Obj | None]:
        """Yield watch events (dicts); None is an idle tick so the writer can notice closes.
        `initial_end` (``sendInitialEvents=true``, the WatchList client of kubectl ≥ 1.32):
        after the initial ADDED events, a BOOKMARK annotated ``k8s.io/initial-events-end``
        (staging/src/k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go
        `processInterval`)."""
        deadline = time.monotonic() + (timeout if timeout is not None else 1800.0)
        state = self._types[rt]
        initial: list[Obj] = []
        error: Obj | None = None
        with self._cond:
            epoch = self._watch_epoch
            if rv_param in ("", "0"):
                position = self._rv
                initial = [state.objects[k] for k in self._keys(rt)
                           if flt.matches(state.objects[k])]
            else:
                try:
                    position = int(rv_param)
                except ValueError:
                    position = 0
                    error = _error_event(400, "BadRequest",
                                         f"invalid resource version {rv_param!r}")
        if error is not None:
            yield error
            return
        for obj in initial:
            yield {"type": "ADDED", "object": obj}
        if initial_end and bookmarks:
            yield {"type": "BOOKMARK", "object": {
                "kind": rt.kind, "apiVersion": rt.api_version,
                "metadata": {"resourceVersion": str(position),
                             "annotations": {"k8s.io/initial-events-end": "true"}}}}
        while True:
            batch: list[_Event] = []
            with self._cond:
                if self._stopping or self._watch_epoch != epoch:
                    return
                if position < state.floor:
                    error = _error_event(410, "Expired", f"too old resource version: "
                                                         f"{position} ({state.floor})")
                else:
                    batch = state.history[bisect.bisect_right(state.history_rvs, position):]
                    left = deadline - time.monotonic()
                    if not batch and left > 0:
                        self._cond.wait(min(left, 0.25))
                current_rv = self._rv
            if error is not None:
                yield error
                return
            for ev in batch:
                out = _transition(ev, flt)
                position = ev.rv
                if out is not None:
                    yield out
            if batch:
                continue
            if time.monotonic() >= deadline:
                if bookmarks:
                    yield {"type": "BOOKMARK", "object": {
                        "kind": rt.kind, "apiVersion": rt.api_version,
                        "metadata": {"resourceVersion": str(max(position, current_rv))}}}
                return
            yield None

    # -- authentication and authorization

    def _policy(self) -> Policy:
        """The RBAC objects stored now (call under the lock)."""
        return policy_of(obj for rt in TYPES if rt.kind in _RBAC_KINDS
                         for obj in self._types[rt].objects.values())

    def _authorize(self, header: str | None, attrs: Attributes) -> User:
        """The request's user, when its bearer token is known (else 401 Unauthorized) and RBAC
        allows the request (else 403 Forbidden, with upstream's message); see k8s_auth.

        A request without an ``Authorization`` header is ``system:anonymous`` on the public
        health and version paths only (an apiserver whose AuthenticationConfiguration
        enables ``anonymous`` with ``conditions`` on those paths: KEP-4633), which the
        bootstrap ``system:public-info-viewer`` binding lets it read; elsewhere it is 401."""
        user = authenticate(header, self.tokens)
        if user is None and header is None and attrs.path in ANONYMOUS_PATHS:
            user = ANONYMOUS
        if user is None:  # authentication.go: unauthorized()
            raise StatusError(401, "Unauthorized", "Unauthorized")
        with self._cond:
            policy = self._policy()
            allowed = authorize(policy, user, attrs)
            if allowed and attrs.resource_request and PRIVILEGED_GROUP not in user.groups:
                self.authorized[(user.name, attrs.verb, attrs.group, attrs.combined_resource,
                                 attrs.namespace)] += 1
        if not allowed:
            details: Obj = {"group": attrs.group, "kind": attrs.resource}
            if attrs.name:
                details["name"] = attrs.name
            raise StatusError(403, "Forbidden", forbidden_message(user, attrs), details)
        return user

    # -- HTTP dispatch

    def _check_fault(self, method: str, path: str) -> StatusError | None:
        with self._cond:
            for fault in self._faults:
                if fault.remaining <= 0:
                    continue
                if fault.path_contains and fault.path_contains not in path:
                    continue
                if fault.method and fault.method != method:
                    continue
                fault.remaining -= 1
                self._faults = [f for f in self._faults if f.remaining > 0]
                reason = {429: "TooManyRequests", 503: "ServiceUnavailable",
                          504: "Timeout"}.get(fault.status, "InternalError")
                err = StatusError(fault.status, reason, f"injected fault ({fault.status})")
                if fault.retry_after is not None:
                    err.details = {"retryAfterSeconds": fault.retry_after}
                return err
        return None


def _condition(type_: str, status: str, reason: str = "", message: str = "") -> Obj:
    out: Obj = {"type": type_, "status": status, "lastTransitionTime": now_rfc3339()}
    if reason:
        out["reason"] = reason
    if message:
        out["message"] = message
    return out


TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
LIFECYCLE_TAINTS = frozenset({TAINT_UNSCHEDULABLE, TAINT_NOT_READY, TAINT_UNREACHABLE})


def lifecycle_taints(node: Mapping[str, Any]) -> list[Obj]:
    """The taints the node lifecycle controller wants on a Node
    (pkg/controller/nodelifecycle/node_lifecycle_controller.go): `doNoScheduleTaintingPass`
    maps Ready=False to ``node.kubernetes.io/not-ready`` and Ready=Unknown to
    ``node.kubernetes.io/unreachable`` (NoSchedule) and adds ``node.kubernetes.io/unschedulable``
    (NoSchedule) while ``spec.unschedulable``; `doNoExecuteTaintingPass` adds the not-ready or
    unreachable taint with NoExecute (and its ``timeAdded``). Taint keys from
    k8s.io/api/core/v1/well_known_taints.go."""
    out: list[Obj] = []
    ready = next((c.get("status") for c in (node.get("status") or {}).get("conditions") or []
                  if c.get("type") == "Ready"), None)
    key = {"False": TAINT_NOT_READY, "Unknown": TAINT_UNREACHABLE}.get(str(ready))
    if key is not None:
        out += [{"key": key, "effect": "NoSchedule"},
                {"key": key, "effect": "NoExecute", "timeAdded": now_rfc3339()}]
    if (node.get("spec") or {}).get("unschedulable"):
        out.append({"key": TAINT_UNSCHEDULABLE, "effect": "NoSchedule"})
    return out


def _rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def _grace_option(value: Any) -> int | None:
    """DeleteOptions' ``gracePeriodSeconds`` (a query parameter or a body field)."""
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError) as exc:
        raise StatusError(400, "BadRequest", f"invalid gracePeriodSeconds {value!r}") from exc


def _grace_period(pod: Mapping[str, Any], grace: int | None) -> int:
    """The grace period a pod delete gets (pkg/registry/core/pod/strategy.go
    `podStrategy.CheckGracefulDelete`): the options' or the pod's
    ``terminationGracePeriodSeconds``; 0 for a pod not bound to a node or finished; a negative
    one becomes 1."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    period = grace if grace is not None else int(spec.get("terminationGracePeriodSeconds") or 0)
    if not spec.get("nodeName") or status.get("phase") in ("Succeeded", "Failed"):
        period = 0
    return 1 if period < 0 else period


# ObjectMeta fields a status update cannot change (metav1.ResetObjectMetaForStatus)
_STATUS_KEEPS_META = ("deletionTimestamp", "generation", "labels", "annotations", "finalizers",
                      "ownerReferences")


def prepare_update(rt: ResourceType, current: Mapping[str, Any], body: Obj,
                   sub: str | None) -> Obj:
    """What an update through the API stores, for a type with a ``status`` subresource: on the
    main resource the status stays as stored (e.g. pkg/registry/core/pod/strategy.go
    ``podStrategy.PrepareForUpdate``: ``newPod.Status = oldPod.Status``); on ``/status`` only
    the status changes (``podStatusStrategy.PrepareForUpdate``: ``newPod.Spec = oldPod.Spec``
    and ``metav1.ResetObjectMetaForStatus``). Other types store the body as sent."""
    if "status" not in rt.subresources:
        return body
    out = dict(body)
    if sub == "status":
        for key in set(out) | set(current):
            if key in ("status", "metadata", "apiVersion", "kind"):
                continue
            if key in current:
                out[key] = _clone(current[key])
            else:
                out.pop(key, None)
        meta = dict(out.get("metadata") or {})
        cmeta = current.get("metadata") or {}
        for key in _STATUS_KEEPS_META:
            if key in cmeta:
                meta[key] = _clone(cmeta[key])
            else:
                meta.pop(key, None)
        out["metadata"] = meta
    elif "status" in current:
        out["status"] = _clone(current["status"])
    else:
        out.pop("status", None)
    return out


def _number(query: Mapping[str, str], name: str) -> int | None:
    """An integer query parameter; 400 BadRequest when it is not one."""
    text = query.get(name)
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise StatusError(400, "BadRequest", f"invalid {name} {text!r}: not an integer"
                          ) from None


def _object_body(body: Any) -> Obj:
    """A request body that must be an object with an object ``metadata`` (400 otherwise, as the
    decoder refuses it)."""
    if not isinstance(body, dict):
        raise StatusError(400, "BadRequest", "the request body must be an object")
    if not isinstance(body.get("metadata", {}), dict):
        raise StatusError(400, "BadRequest", "metadata: the request body's metadata must be "
                                             "an object")
    return body


def _error_event(code: int, reason: str, message: str) -> Obj:
    return {"type": "ERROR", "object": {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                        "status": "Failure", "message": message,
                                        "reason": reason, "code": code}}


def _transition(ev: _Event, flt: _Filter) -> Obj | None:
    new_ok = ev.type != "DELETED" and flt.matches(ev.obj)
    old_ok = ev.prev is not None and flt.matches(ev.prev)
    if ev.type == "ADDED":
        return {"type": "ADDED", "object": ev.obj} if new_ok else None
    if ev.type == "DELETED":
        return {"type": "DELETED", "object": ev.obj} if old_ok else None
    if new_ok and old_ok:
        return {"type": "MODIFIED", "object": ev.obj}
    if new_ok:
        return {"type": "ADDED", "object": ev.obj}
    if old_ok:
        return {"type": "DELETED", "object": ev.obj}
    return None


_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


def _check_secret(obj: Obj, causes: list[tuple[str, str]]) -> None:
    """A Secret's data (base64) and stringData (plain) maps, keyed as the apiserver wants."""
    for field_name in ("data", "stringData"):
        values = obj.get(field_name)
        if values is None:
            continue
        if not isinstance(values, dict):
            causes.append((field_name, "Invalid value: must be a map"))
            continue
        for key, value in values.items():
            if not isinstance(key, str) or not _SECRET_KEY.match(key):
                causes.append((f"{field_name}[{key}]", "Invalid value: a valid config key "
                               "must consist of alphanumeric characters, '-', '_' or '.'"))
            elif not isinstance(value, str):
                causes.append((f"{field_name}[{key}]", "Invalid value: must be a string"))
            elif field_name == "data":
                try:
                    base64.b64decode(value, validate=True)
                except ValueError:
                    causes.append((f"data[{key}]", "Invalid value: illegal base64 data"))
    if not isinstance(obj.get("type", "Opaque"), str):
        causes.append(("type", "Invalid value: must be a string"))


def _defaults(rt: ResourceType, body: Obj) -> None:
    """The few defaults the apiserver fills in that scoctl reads."""
    if rt.kind == "Secret":  # stringData is write-only: stored base64-encoded in data
        data = body.setdefault("data", {})
        for key, value in (body.pop("stringData", None) or {}).items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        body.setdefault("type", "Opaque")
    if rt.kind == "Pod":
        body["spec"].setdefault("restartPolicy", "Always")
        body["spec"].setdefault("terminationGracePeriodSeconds",
                                DEFAULT_TERMINATION_GRACE_SECONDS)
        body["spec"].setdefault("schedulerName", "default-scheduler")
        body.setdefault("status", {}).setdefault("phase", "Pending")
    elif rt.kind == "Namespace":
        body.setdefault("spec", {"finalizers": ["kubernetes"]})
        body.setdefault("status", {"phase": "Active"})
    elif rt.kind in ("Deployment", "ReplicaSet", "Job", "InferenceService", "Node",
                     "ResourceQuota", "PodDisruptionBudget"):
        body.setdefault("status", {})


def admit_pod(emu: K8sEmulator, ns: str, body: Mapping[str, Any]) -> None:
    """ResourceQuota admission of a new pod (`k8s_quota.admission_error`): 403 Forbidden
    ``pods "<name>" is forbidden: exceeded quota: …``. Call with ``emu._cond`` held."""
    quotas = [q for (qns, _), q in emu._types[_BY_NAME["ResourceQuota"]].objects.items()
              if qns == ns]
    if not quotas:
        return
    pods = [p for (pns, _), p in emu._types[_BY_NAME["Pod"]].objects.items() if pns == ns]
    meta = dict(body.get("metadata") or {})
    meta["namespace"] = ns
    error = k8s_quota.admission_error({**body, "metadata": meta}, quotas, pods)
    if error is not None:
        name = str(meta.get("name") or meta.get("generateName") or "")
        raise StatusError(403, "Forbidden", f'pods "{name}" is forbidden: {error}',
                          {"name": name, "kind": "pods"})


def create_admitted(emu: K8sEmulator, obj: Mapping[str, Any]) -> Obj:
    """Create an object as a controller's POST does: through quota admission (`admit_pod`),
    into an existing namespace (404 otherwise)."""
    rt = emu._type(str(obj.get("kind", "")))
    body = _clone(obj)
    ns = body.get("metadata", {}).get("namespace") or ("default" if rt.namespaced else "")
    with emu._cond:
        if rt.kind == "Pod":
            admit_pod(emu, ns, body)
        return emu._create(rt, ns if rt.namespaced else "", body)


def serve_scale(emu: K8sEmulator, method: str, rt: ResourceType, ns: str, name: str,
                body: Any, ctype: str) -> Obj:
    """The ``scale`` subresource of Deployments and ReplicaSets
    (pkg/registry/apps/deployment/storage/storage.go and replicaset/storage/storage.go
    `ScaleREST` Get / Update, autoscaling/v1 Scale): GET reads ``spec.replicas``,
    ``status.replicas`` and the selector; PUT or PATCH (merge, strategic or JSON patch of
    the Scale) writes ``spec.replicas`` into the object (422 for a negative count, 409 when a
    PUT's resourceVersion is stale)."""
    with emu._cond:
        current = emu._get(rt, ns, name)

        def scale(obj: Mapping[str, Any]) -> Obj:
            return workloads.scale_of(obj, workloads.selector_text(
                (obj.get("spec") or {}).get("selector")))

        if method == "GET":
            return scale(current)
        now = scale(current)
        if method == "PUT":
            wanted: Any = _object_body(body)
            expect = wanted.get("metadata", {}).get("resourceVersion")
        elif method == "PATCH":
            try:
                if ctype.startswith("application/json-patch+json"):
                    wanted = json_patch(now, body if isinstance(body, list) else [])
                elif ctype.startswith("application/strategic-merge-patch+json"):
                    wanted = strategic_merge_patch(now, body)
                else:
                    wanted = merge_patch(now, body)
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                raise StatusError(422, "Invalid", f"the server rejected our request due to "
                                                  f"an error in our request: {exc}") from exc
            expect = None
        else:
            raise StatusError(405, "MethodNotAllowed", f"{method} is not supported on scale")
        try:
            replicas = workloads.scaled_replicas(wanted)
        except ValueError as exc:
            raise StatusError(422, "Invalid", f'Scale.autoscaling "{name}" is invalid: {exc}',
                              {"name": name, "group": "autoscaling", "kind": "Scale"}
                              ) from exc
        body_out = _clone(current)
        body_out["spec"]["replicas"] = replicas
        body_out["metadata"].pop("resourceVersion", None)
        stored = emu._replace(rt, ns, name, body_out, expect_rv=expect)
        return scale(stored)


def check_budget(emu: K8sEmulator, ns: str, name: str) -> None:
    """Judge an eviction as the eviction subresource does, from the status the disruption
    controller wrote into the pod's PodDisruptionBudget (`controllers.judge_eviction`): refuse
    it with the apiserver's error (429 with the ``DisruptionBudget`` cause, and Retry-After
    while the budget is still being processed; 500 under two budgets; 403), or spend one of
    the budget's disruptions (its status written at once, as `checkAndDecrement` does). Call
    with ``emu._cond`` held, then delete the pod."""
    pod = emu._get(_BY_NAME["Pod"], ns, name)
    pdb_type = _BY_NAME["PodDisruptionBudget"]
    pdbs = [b for (b_ns, _), b in sorted(emu._types[pdb_type].objects.items()) if b_ns == ns]
    verdict = controllers.judge_eviction(pod, pdbs, datetime.now(UTC))
    if not verdict.allowed:
        details: Obj = {}
        if verdict.cause:
            details["causes"] = [{"reason": "DisruptionBudget", "message": verdict.cause}]
        if verdict.retry_after:
            details["retryAfterSeconds"] = verdict.retry_after
        raise StatusError(verdict.code, verdict.reason, verdict.message, details or None)
    if verdict.pdb is not None and verdict.status is not None:
        body = _clone(emu._get(pdb_type, ns, verdict.pdb))
        body["status"] = verdict.status
        body["metadata"].pop("resourceVersion", None)
        emu._replace(pdb_type, ns, verdict.pdb, body, controller=True)


# --- HTTP ----------------------------------------------------------------------------------------


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as two writes: with Nagle's algorithm on, the body waits for the
    # client's delayed ACK of the headers (~40 ms a request on a kept-alive connection). Go's
    # net/http, which the real apiserver uses, sets TCP_NODELAY; so does this emulator.
    disable_nagle_algorithm = True
    emulator: K8sEmulator
    server_version = "scoctl-k8s-emulator"
    _user: User | None = None  # who the request being served is (after `_authorize`)
    _warnings: list[str]  # Warning headers of the answer (fieldValidation=Warn)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return

    def setup(self) -> None:
        if isinstance(self.request, ssl.SSLSocket):
            # a client that does not trust the CA, or speaks plain HTTP, fails here: the
            # server drops the connection quietly (`handle_error`)
            self.request.settimeout(HANDSHAKE_TIMEOUT_S)
            self.request.do_handshake()
            self.request.settimeout(None)
        super().setup()
        self.emulator._conns.add(self.connection)

    def handle(self) -> None:
        try:
            super().handle()
        except ssl.SSLError:
            self.close_connection = True

    def finish(self) -> None:
        try:
            super().finish()
        finally:
            self.emulator._conns.discard(self.connection)

    def do_GET(self) -> None:  # noqa: N802 - stdlib naming
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def do_PUT(self) -> None:  # noqa: N802
        self._dispatch("PUT")

    def do_PATCH(self) -> None:  # noqa: N802
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:  # noqa: N802
        self._dispatch("DELETE")

    # -- plumbing

    def _send(self, code: int, body: Any, headers: Mapping[str, str] | None = None) -> None:
        self._send_data(code, json.dumps(body, separators=(",", ":")).encode(), headers)

    def _send_data(self, code: int, data: bytes,
                   headers: Mapping[str, str] | None = None, *,
                   content_type: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        for warning in self._warnings:  # RFC 7234 warn-code 299, as the apiserver sends them
            self.send_header("Warning", f'299 - "{warning}"')
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, err: StatusError) -> None:
        headers = {}
        if err.details and "retryAfterSeconds" in err.details:
            headers["Retry-After"] = str(err.details["retryAfterSeconds"])
        self._send(err.code, err.body(), headers)

    def _read_raw(self) -> bytes:
        """The request body: ``Content-Length`` bytes, or a ``Transfer-Encoding: chunked``
        body de-chunked (Go's net/http sends a body of unknown length chunked: kubectl's
        DeleteOptions)."""
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            parts: list[bytes] = []
            while True:
                size_line = self.rfile.readline(1024)
                try:
                    size = int(size_line.split(b";")[0].strip(), 16)
                except ValueError as exc:
                    self.close_connection = True
                    raise StatusError(400, "BadRequest", "malformed chunked body") from exc
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline(1024)  # the CRLF after the chunk
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _read_body(self) -> Any:
        raw = self._read_raw()
        if not raw:
            return None
        media = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
        if media == k8s_protobuf.MEDIA_TYPE:
            # client-go's typed clients send protobuf and do not fall back to JSON on a 415:
            # the few kinds kubectl sends so are decoded (`k8s_protobuf`), others are 415
            with contextlib.suppress(k8s_protobuf.UnsupportedKind):
                return k8s_protobuf.decode(raw)
        if media and media not in JSON_BODY_TYPES:
            # apimachinery runtime/serializer/negotiation errors.go `errUnsupportedMediaType`:
            # a body in a format the server has no serializer for (protobuf, CBOR here) is
            # 415 UnsupportedMediaType, as for a custom resource upstream
            raise StatusError(415, "UnsupportedMediaType",
                              "the body of the request was in an unknown format - accepted "
                              f"media types include: {', '.join(ACCEPTED_BODY_TYPES)}")
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise StatusError(400, "BadRequest", f"invalid JSON body: {exc}") from exc

    def _dispatch(self, method: str) -> None:
        self._warnings = []
        parts = urlsplit(self.path)
        path = parts.path.rstrip("/") or "/"
        query = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
        try:
            body = self._read_body()
            if path.startswith("/_sim/"):
                answer = _control(self.emulator, method, path[len("/_sim/"):], body)
                if isinstance(answer, _Raw):
                    self._send_data(200, answer.data)
                else:
                    self._send(200, answer)
                return
            self._user = self.emulator._authorize(self.headers.get("Authorization"),
                                                  request_attributes(method, path, query))
            self.emulator.requests.append(f"{method} {self.path}")
            fault = self.emulator._check_fault(method, self.path)
            if fault is not None:
                raise fault
            self._route(method, path, query, body)
        except StatusError as err:
            self._send_error(err)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # noqa: BLE001 - a handler's bug is the apiserver's 500
            # apierrors.NewInternalError: what failed inside is no fault of the request
            self._send_error(StatusError(500, "InternalError",
                                         f"Internal error occurred: {type(exc).__name__}: {exc}",
                                         {"causes": [{"message": f"{exc}"}]}))

    def _route(self, method: str, path: str, query: Mapping[str, str], body: Any) -> None:
        segs = [s for s in path.split("/") if s]
        if path == "/version":
            self._send(200, _VERSION)
            return
        if segs[:2] == ["openapi", "v3"]:
            served_now = self.emulator.served_types()
            if len(segs) == 2:
                self._send(200, openapi.root(served_now))
                return
            gv = segs[2:]
            group, version = (("", gv[1]) if gv[0] == "api" and len(gv) == 2 else
                              (gv[1], gv[2]) if gv[0] == "apis" and len(gv) == 3 else ("", ""))
            doc = openapi.document(group, version, served_now) if version else None
            if doc is None:
                raise StatusError(404, "NotFound", "the server could not find the requested "
                                                   "resource")
            self._send(200, doc)
            return
        if segs and segs[0] in ("healthz", "livez", "readyz"):
            # healthz.go `InstallHandler`/`handleRootHealth`: "ok" as text (every check passes)
            self._send_data(200, b"ok", content_type="text/plain; charset=utf-8")
            return
        if segs == ["api"]:
            self._send(200, {"kind": "APIVersions", "versions": ["v1"],
                             "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                             "serverAddress": self.emulator.url
                                                             .split("://", 1)[1]}]})
            return
        served = self.emulator.served_types()
        if segs == ["apis"]:
            self._send(200, discovery.api_group_list(served))
            return
        if segs and segs[0] == "api" and len(segs) >= 2:
            group, version, rest = "", segs[1], segs[2:]
        elif segs and segs[0] == "apis" and len(segs) >= 2:
            if len(segs) == 2:
                g = discovery.api_group(segs[1], served)
                if g is None:
                    raise StatusError(404, "NotFound", "the server could not find the requested "
                                                       "resource")
                self._send(200, g)
                return
            group, version, rest = segs[1], segs[2], segs[3:]
        else:
            raise StatusError(404, "NotFound", "the server could not find the requested resource")
        if not rest:
            listing = discovery.resource_list(group, version, served)
            if listing is None:
                raise StatusError(404, "NotFound", "the server could not find the requested "
                                                   "resource")
            self._send(200, listing)
            return
        ns: str | None = None
        if (rest[0] == "namespaces" and len(rest) >= 3
                and (group, version, rest[2]) in _BY_PATH
                and _BY_PATH[(group, version, rest[2])].namespaced):
            ns, rest = rest[1], rest[2:]
        review = next((r for r in discovery.REVIEWS
                       if (r.group, r.version, r.plural) == (group, version, rest[0])), None)
        if review is not None and len(rest) == 1:
            if method != "POST":
                raise StatusError(405, "MethodNotAllowed", f"{method} is not supported")
            self._send(201, review_answer(self.emulator, review, self._user, body))
            return
        rt = _BY_PATH.get((group, version, rest[0]))
        # customresource_handler.go `crdHandler.ServeHTTP`: no CRD named ``<resource>.<group>``
        # → the delegate, the apiserver's not-found handler: 404, as for any unknown resource
        if rt is None or not self.emulator.served(rt):
            raise StatusError(404, "NotFound", "the server could not find the requested resource")
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if sub is not None and sub not in rt.subresources:
            raise StatusError(404, "NotFound", "the server could not find the requested resource")
        if rt.namespaced and name is not None and ns is None:
            raise StatusError(404, "NotFound", "the server could not find the requested resource")
        self._resource(method, rt, ns, name, sub, query, body)

    def _resource(self, method: str, rt: ResourceType, ns: str | None, name: str | None,
                  sub: str | None, query: Mapping[str, str], body: Any) -> None:
        emu = self.emulator
        dry = dry_run(query, method)
        # a merge or strategic merge patch is a partial object: its fields are checked too
        if isinstance(body, dict) and method in ("POST", "PUT", "PATCH") and sub != "eviction":
            refused = check_fields(rt, body, query.get("fieldValidation"), self._warnings)
            if refused:
                raise StatusError(400, "BadRequest", refused)
        if name is None:
            if method == "GET":
                flt = _Filter(ns if rt.namespaced else None,
                              parse_label_selector(query.get("labelSelector", "")),
                              parse_field_selector(rt, query.get("fieldSelector", "")))
                if query.get("watch") in ("true", "1"):
                    timeout = _number(query, "timeoutSeconds")
                    self._stream(emu._watch(rt, flt, query.get("resourceVersion", ""),
                                            float(timeout) if timeout is not None else None,
                                            query.get("allowWatchBookmarks") == "true",
                                            initial_end=query.get("sendInitialEvents")
                                            == "true"))
                    return
                limit = _number(query, "limit") or None
                page = emu._list(rt, flt, limit, query.get("continue") or None)
                if tables.wants_table(self.headers.get("Accept"), rt.kind):
                    self._send(200, tables.table(rt.kind, page["items"], page["metadata"],
                                                 query.get("includeObject")))
                    return
                self._send_data(200, emu._list_json(rt, page))
                return
            if method == "POST":
                body = _object_body(body)
                if body.get("kind") not in (None, rt.kind):
                    raise StatusError(400, "BadRequest", f"the kind {body.get('kind')!r} does "
                                                         f"not match {rt.kind}")
                body_ns = body.get("metadata", {}).get("namespace")
                if rt.namespaced and body_ns and body_ns != ns:
                    raise StatusError(400, "BadRequest", "the namespace of the provided object "
                                                         "does not match the namespace sent on "
                                                         "the request")
                with emu._cond:
                    if rt.kind == "Pod":
                        admit_pod(emu, ns or "", body)
                    created = emu._create(rt, ns or "", body, dry_run=dry)
                self._send(201, created)
                return
            raise StatusError(405, "MethodNotAllowed", f"{method} is not supported on the "
                                                       "collection")
        if sub == "eviction":
            if method != "POST":
                raise StatusError(405, "MethodNotAllowed", "eviction supports POST only")
            options = (body.get("deleteOptions") if isinstance(body, dict) else None) or {}
            with emu._cond:  # the budget is checked and spent in one step
                check_budget(emu, ns or "", name)
                # eviction.go hands the eviction's deleteOptions to the pod's delete: its
                # preconditions hold there (409 Conflict), after the budget was spent
                _check_preconditions(options.get("preconditions"),
                                     emu._get(rt, ns or "", name)["metadata"], name, rt)
                emu._delete_pod(ns or "", name, _grace_option(options.get("gracePeriodSeconds")),
                                evicted=True)
            self._send(201, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                             "status": "Success", "code": 201})
            return
        if sub == "scale":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            self._send(200, serve_scale(emu, method, rt, ns or "", name, body, ctype))
            return
        if method == "GET":
            with emu._cond:
                obj = emu._get(rt, ns or "", name)
            if sub is None and tables.wants_table(self.headers.get("Accept"), rt.kind):
                self._send(200, tables.table(rt.kind, [obj], {"resourceVersion": obj[
                    "metadata"].get("resourceVersion", "")}, query.get("includeObject")))
                return
            self._send(200, obj)
        elif method == "PUT":
            body = _object_body(body)
            expect = body.get("metadata", {}).get("resourceVersion")
            with emu._cond:
                current = emu._get(rt, ns or "", name)
                obj = emu._replace(rt, ns or "", name,
                                   prepare_update(rt, current, _clone(body), sub),
                                   expect_rv=expect, dry_run=dry)
            self._send(200, obj)
        elif method == "PATCH":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            with emu._cond:
                obj = emu._patch(rt, ns or "", name, body, ctype, sub, dry_run=dry)
            self._send(200, obj)
        elif method == "DELETE":
            propagation = query.get("propagationPolicy")
            if isinstance(body, dict) and body.get("propagationPolicy"):
                propagation = str(body["propagationPolicy"])
            if isinstance(body, dict) and body.get("orphanDependents") is True:
                propagation = "Orphan"
            pre = body.get("preconditions") if isinstance(body, dict) else None
            with emu._cond:
                if isinstance(pre, dict):
                    cmeta = emu._get(rt, ns or "", name)["metadata"]
                    for field_name in ("uid", "resourceVersion"):
                        want = pre.get(field_name)
                        if want and want != cmeta.get(field_name):
                            raise StatusError(
                                409, "Conflict",
                                f"Precondition failed: {_PRECONDITION[field_name]} "
                                f"in precondition: {want}, {field_name} in object meta: "
                                f"{cmeta.get(field_name)}",
                                {"name": name, "group": rt.group, "kind": rt.plural})
                if dry or (isinstance(body, dict) and "All" in (body.get("dryRun") or [])):
                    # dryrun.go `Delete`: the preconditions checked, nothing deleted
                    final = emu._get(rt, ns or "", name)
                elif rt.kind == "Pod":
                    grace = query.get("gracePeriodSeconds")
                    if isinstance(body, dict) and body.get("gracePeriodSeconds") is not None:
                        grace = body["gracePeriodSeconds"]
                    final = emu._delete_pod(ns or "", name, _grace_option(grace))
                else:
                    final = emu._delete(rt, ns or "", name, propagation)
            if rt.kind == "Pod" or rt.custom:
                self._send(200, final)
            else:
                self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {},
                                 "status": "Success",
                                 "details": {"name": name, "group": rt.group, "kind": rt.plural,
                                             "uid": final["metadata"].get("uid")}})
        else:
            raise StatusError(405, "MethodNotAllowed", f"{method} is not supported")

    def _peer_closed(self) -> bool:
        tls = isinstance(self.connection, ssl.SSLSocket)
        try:
            # under TLS the raw socket is peeked: a client sends nothing while a watch streams
            # (HTTP/1.1, no pipelining), so any bytes there are its close_notify
            data: bytes = socket.socket.recv(self.connection, 1,
                                             socket.MSG_PEEK | socket.MSG_DONTWAIT)
            return data == b"" or tls
        except BlockingIOError:
            return False
        except OSError:
            return True

    def _stream(self, events: Iterator[Obj | None]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for event in events:
                if event is None:
                    if self._peer_closed():
                        self.close_connection = True
                        return
                    continue
                data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True


_PRECONDITION = {"uid": "UID", "resourceVersion": "ResourceVersion"}


def _check_preconditions(pre: Any, meta: Obj, name: str, rt: ResourceType) -> None:
    """A delete's ``preconditions`` (uid, resourceVersion) against the object's metadata:
    409 Conflict naming the first that differs (apimachinery's
    ``Preconditions.Check`` in pkg/registry/generic/registry/store.go)."""
    if not isinstance(pre, dict):
        return
    for field_name in ("uid", "resourceVersion"):
        want = pre.get(field_name)
        if want and want != meta.get(field_name):
            raise StatusError(409, "Conflict",
                              f"Precondition failed: {_PRECONDITION[field_name]} in "
                              f"precondition: {want}, {field_name} in object meta: "
                              f"{meta.get(field_name)}",
                              {"name": name, "group": rt.group, "kind": rt.plural})
_VERSION = {"major": "1", "minor": "32", "gitVersion": "v1.32.0-scoctl-sim",
            "gitCommit": "0000000000000000000000000000000000000000", "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.23", "compiler": "gc",
            "platform": "linux/amd64"}


def dry_run(query: Mapping[str, str], method: str) -> bool:
    """The ``dryRun`` query parameter (handlers/rest.go `dryRun` + validation
    `ValidateDryRun`): ``All`` or absent; anything else is 400."""
    value = query.get("dryRun")
    if value is None or value == "":
        return False
    if value != "All":
        raise StatusError(400, "BadRequest", f'Invalid dry run value: supported values: "All", '
                                             f'got "{value}"')
    return method in ("POST", "PUT", "PATCH", "DELETE")


def review_answer(emu: K8sEmulator, review: discovery.Review, user: User | None,
                  body: Any) -> Obj:
    """A SelfSubjectAccessReview or SelfSubjectReview, answered for `user`."""
    if user is None:
        raise StatusError(401, "Unauthorized", "Unauthorized")
    obj = _object_body(body)
    if review is discovery.SSR:
        # pkg/registry/authentication/selfsubjectreview/rest.go `Create`: the user's info
        info: Obj = {"username": user.name, "groups": list(user.groups)}
        return {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview",
                "metadata": {"creationTimestamp": now_rfc3339()}, "status": {"userInfo": info}}
    with emu._cond:
        policy = emu._policy()
    allowed, reason = access_review(policy, user, obj.get("spec") or {})
    status: Obj = {"allowed": allowed}
    if reason:
        status["reason"] = reason
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
            "metadata": {"creationTimestamp": now_rfc3339()}, "spec": obj.get("spec") or {},
            "status": status}


def access_review(policy: Policy, user: User, spec: Mapping[str, Any]) -> tuple[bool, str]:
    """pkg/registry/authorization/selfsubjectaccessreview/rest.go `Create` +
    subjectaccessreview/util `ResourceAttributesFrom`/`NonResourceAttributesFrom`: the spec's
    attributes authorized for the requesting user as a request would be; 400 when the spec
    has neither or both kinds of attributes."""
    resource, non_resource = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if bool(resource) == bool(non_resource):
        raise StatusError(400, "BadRequest", "exactly one of nonResourceAttributes or "
                                             "resourceAttributes must be specified")
    if isinstance(non_resource, dict):
        attrs = Attributes(str(non_resource.get("verb") or ""),
                           str(non_resource.get("path") or ""), False)
    else:
        r = resource if isinstance(resource, dict) else {}
        attrs = Attributes(str(r.get("verb") or ""), "", True, str(r.get("group") or ""),
                           str(r.get("version") or ""), str(r.get("resource") or ""),
                           str(r.get("subresource") or ""), str(r.get("namespace") or ""),
                           str(r.get("name") or ""))
    allowed = authorize(policy, user, attrs)
    if allowed and PRIVILEGED_GROUP in user.groups:
        return True, ""
    return allowed, "RBAC: allowed" if allowed else ""


# --- the /_sim/ control API ----------------------------------------------------------------------


@dataclass(frozen=True)
class _Raw:
    """A control answer already encoded as JSON."""

    data: bytes


def _control(emu: K8sEmulator, method: str, op: str, body: Any) -> Any:
    """Run a test-side operation for a client in another process (``scoctl sim``)."""
    args: dict[str, Any] = body if isinstance(body, dict) else {}
    if op == "health":
        return {"ok": True, "resourceVersion": str(emu.resource_version)}
    if op == "requests":
        return {"requests": list(emu.requests)}
    if method != "POST":
        raise StatusError(405, "MethodNotAllowed", f"/_sim/{op} takes POST")
    handlers: dict[str, Callable[[], Any]] = {
        "apply": lambda: {"applied": [_ref(emu.apply(o)) for o in args.get("objects", [])]},
        "add": lambda: {"added": [_ref(emu.add(o)) for o in args.get("objects", [])]},
        # a controller's own writes through the API: admission, graceful pod deletion
        "create": lambda: _ref(create_admitted(emu, dict(args["object"]))),
        "delete-pod": lambda: _ref(emu.delete_pod(args["namespace"], args["name"])),
        "delete": lambda: _ref(emu.delete(args["kind"], args.get("namespace"), args["name"],
                                          args.get("propagation"))),
        "patch": lambda: _ref(emu.update(args["kind"], args.get("namespace"), args["name"],
                                         dict(args["patch"]))),
        "get": lambda: emu.get(args["kind"], args.get("namespace"), args["name"]),
        "list": lambda: _Raw(emu.objects_json(args["kind"], args.get("namespace"))),
        "pod-unschedulable": lambda: _ref(emu.set_pod_unschedulable(
            args["namespace"], args["name"], *(([args["message"]]) if "message" in args else []))),
        "bind-pod": lambda: _ref(emu.bind_pod(args["namespace"], args["name"], args["node"],
                                              running=bool(args.get("running", True)))),
        "node-ready": lambda: _ref(emu.set_node_ready(args["name"],
                                                      bool(args.get("ready", True)))),
        "replica-failure": lambda: _ref(emu.set_replica_failure(
            args.get("kind", "Deployment"), args["namespace"], args["name"], args["message"],
            args.get("reason", "FailedCreate"))),
        "clear-replica-failure": lambda: _ref(emu.clear_replica_failure(
            args.get("kind", "Deployment"), args["namespace"], args["name"])),
        "compact": lambda: {"resourceVersion": str(emu.compact(args.get("kind")))},
        "close-watches": lambda: _done(emu.close_watches),
        "faults": lambda: _done(lambda: emu.fail_next(
            int(args.get("count", 1)), int(args.get("status", 500)),
            retry_after=args.get("retry_after"), path_contains=args.get("path_contains"),
            method=args.get("method"))),
        "clear-faults": lambda: _done(emu.clear_faults),
        "clear-requests": lambda: _done(emu.requests.clear),
        "install-crd": lambda: _done(lambda: emu.install_crd(str(args["name"]))),
        "batch": lambda: {"results": _batch(emu, args)},
    }
    if op not in handlers:
        raise StatusError(404, "NotFound", f"unknown control operation /_sim/{op}")
    try:
        return handlers[op]()
    except (KeyError, ValueError) as exc:
        raise StatusError(400, "BadRequest", f"/_sim/{op}: {exc.args[0]}") from exc


def _batch(emu: K8sEmulator, args: Mapping[str, Any]) -> list[Obj]:
    """``POST /_sim/batch {"ops": [{"op": "bind-pod", …}, …], "stop_on_error": false}``: the
    operations one after the other, each as its own ``/_sim/<op>`` call would run it (a node
    agent at scale binds thousands of pods a step); per operation ``{"ok": true, "result":
    …}`` or ``{"ok": false, "code": 404, "message": …}``, and none after the first failure
    when `stop_on_error`."""
    results: list[Obj] = []
    for item in args.get("ops") or []:
        if not isinstance(item, dict) or item.get("op") in (None, "batch"):
            raise ValueError("every operation is a mapping with its op (not batch)")
        try:
            answer = _control(emu, "POST", str(item["op"]), item)
            if isinstance(answer, _Raw):
                answer = json.loads(answer.data)
            results.append({"ok": True, "result": answer})
        except StatusError as exc:
            results.append({"ok": False, "code": exc.code, "message": exc.message})
            if args.get("stop_on_error"):
                break
    return results


def _done(action: Callable[[], None]) -> Obj:
    action()
    return {"ok": True}


def _ref(obj: Obj) -> Obj:
    meta = obj.get("metadata", {})
    return {"kind": obj.get("kind"), "namespace": meta.get("namespace"),
            "name": meta.get("name"), "resourceVersion": meta.get("resourceVersion"),
            "uid": meta.get("uid")}


# --- builders of schema-valid objects ------------------------------------------------------------


def _resources(cpu: str | int | None, memory: str | None, gpus: int,
               gpu_resource: str) -> Obj:
    requests: dict[str, str] = {}
    if cpu is not None:
        requests["cpu"] = str(cpu)
    if memory is not None:
        requests["memory"] = str(memory)
    if gpus:
        requests[gpu_resource] = str(gpus)
    out: Obj = {"requests": requests}
    if gpus:
        out["limits"] = {gpu_resource: str(gpus)}
    return out


def make_namespace(name: str, labels: Mapping[str, str] | None = None) -> Obj:
    """A Namespace."""
    return {"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name,
                                                  **(labels or {})}}}


def make_container(name: str = "main", *, cpu: str | int | None = "1",
                   memory: str | None = "1Gi", gpus: int = 0,
                   gpu_resource: str = "nvidia.com/gpu", restart_policy: str | None = None,
                   image: str = "registry.local/app:1") -> Obj:
    """A container with requests (``restart_policy="Always"`` makes an init container a sidecar)."""
    out: Obj = {"name": name, "image": image,
                "resources": _resources(cpu, memory, gpus, gpu_resource)}
    if restart_policy:
        out["restartPolicy"] = restart_policy
    return out


def _pod_spec(containers: Sequence[Obj], init_containers: Sequence[Obj] | None,
              tolerations: Sequence[Mapping[str, str]] | None,
              node_selector: Mapping[str, str] | None) -> Obj:
    spec: Obj = {"containers": [dict(c) for c in containers]}
    if init_containers:
        spec["initContainers"] = [dict(c) for c in init_containers]
    if tolerations:
        spec["tolerations"] = [dict(t) for t in tolerations]
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return spec


def make_pod(name: str, namespace: str = "default", *, cpu: str | int | None = "1",
             memory: str | None = "1Gi", gpus: int = 0, gpu_resource: str = "nvidia.com/gpu",
             labels: Mapping[str, str] | None = None,
             annotations: Mapping[str, str] | None = None,
             owner: Mapping[str, Any] | None = None,
             containers: Sequence[Obj] | None = None,
             init_containers: Sequence[Obj] | None = None,
             tolerations: Sequence[Mapping[str, str]] | None = None,
             node_selector: Mapping[str, str] | None = None,
             unschedulable: str | None = None, node_name: str | None = None,
             phase: str = "Pending", overhead: Mapping[str, str] | None = None,
             scheduling_gates: Sequence[str] = ()) -> Obj:
    """A Pod; `unschedulable` is the scheduler message of a PodScheduled=False condition.

    `owner` is an owner object as stored (its apiVersion, kind, name and uid are referenced).
    """
    meta: Obj = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner is not None:
        meta["ownerReferences"] = [owner_reference(owner)]
    spec = _pod_spec(containers or [make_container(cpu=cpu, memory=memory, gpus=gpus,
                                                   gpu_resource=gpu_resource)],
                     init_containers, tolerations, node_selector)
    if overhead:
        spec["overhead"] = dict(overhead)
    if scheduling_gates:
        spec["schedulingGates"] = [{"name": g} for g in scheduling_gates]
    status: Obj = {"phase": phase}
    if node_name:
        spec["nodeName"] = node_name
        status["conditions"] = [_condition("PodScheduled", "True")]
    elif scheduling_gates:
        status["conditions"] = [_condition("PodScheduled", "False", "SchedulingGated",
                                           "Scheduling is blocked due to non-empty scheduling "
                                           "gates")]
    elif unschedulable is not None:
        status["conditions"] = [_condition("PodScheduled", "False", "Unschedulable",
                                           unschedulable)]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec, "status": status}


def owner_reference(owner: Mapping[str, Any], controller: bool = True) -> Obj:
    """An ownerReference to a stored object."""
    meta = owner["metadata"]
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": meta["name"],
            "uid": meta["uid"], "controller": controller, "blockOwnerDeletion": True}


_NODE_INFO = {"architecture": "amd64", "bootID": "", "containerRuntimeVersion": "containerd://1.7",
              "kernelVersion": "6.1", "kubeProxyVersion": "v1.32.0", "kubeletVersion": "v1.32.0",
              "machineID": "", "operatingSystem": "linux", "osImage": "Debian 12",
              "systemUUID": ""}


def make_node(name: str, *, cpu: str | int = "16", memory: str = "64Gi", gpus: int = 0,
              gpu_resource: str = "nvidia.com/gpu", labels: Mapping[str, str] | None = None,
              taints: Sequence[Mapping[str, str]] | None = None, ready: bool = True,
              unschedulable: bool = False, provider_id: str | None = None,
              pods: int = 110) -> Obj:
    """A Node with allocatable = capacity (strings, as the API serves them)."""
    capacity = {"cpu": str(cpu), "memory": memory, "pods": str(pods),
                "ephemeral-storage": "100Gi"}
    if gpus:
        capacity[gpu_resource] = str(gpus)
    spec: Obj = {}
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    if unschedulable:
        spec["unschedulable"] = True
    if provider_id:
        spec["providerID"] = provider_id
    node_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                   **(labels or {})}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": node_labels}, "spec": spec,
            "status": {"capacity": capacity, "allocatable": dict(capacity),
                       "conditions": [_condition(
                           "Ready", "True" if ready else "False",
                           "KubeletReady" if ready else "KubeletNotReady",
                           "kubelet is posting ready status" if ready
                           else "container runtime network not ready")],
                       "nodeInfo": _NODE_INFO}}


def _template(labels: Mapping[str, str], cpu: str | int | None, memory: str | None, gpus: int,
              gpu_resource: str, restart_policy: str | None = None, *,
              annotations: Mapping[str, str] | None = None,
              tolerations: Sequence[Mapping[str, Any]] | None = None,
              node_selector: Mapping[str, str] | None = None,
              affinity: Mapping[str, Any] | None = None,
              topology_spread_constraints: Sequence[Mapping[str, Any]] | None = None) -> Obj:
    spec = _pod_spec([make_container(cpu=cpu, memory=memory, gpus=gpus,
                                     gpu_resource=gpu_resource)], None, tolerations,
                     node_selector)
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    if affinity:
        spec["affinity"] = copy.deepcopy(dict(affinity))
    if topology_spread_constraints:
        spec["topologySpreadConstraints"] = [copy.deepcopy(dict(c))
                                             for c in topology_spread_constraints]
    meta: Obj = {"labels": dict(labels)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"metadata": meta, "spec": spec}


def make_deployment(name: str, namespace: str = "default", *, replicas: int = 1,
                    labels: Mapping[str, str] | None = None,
                    pod_labels: Mapping[str, str] | None = None, cpu: str | int | None = "1",
                    memory: str | None = "1Gi", gpus: int = 0,
                    gpu_resource: str = "nvidia.com/gpu", managed: bool = False,
                    pod_annotations: Mapping[str, str] | None = None,
                    tolerations: Sequence[Mapping[str, Any]] | None = None,
                    node_selector: Mapping[str, str] | None = None,
                    affinity: Mapping[str, Any] | None = None,
                    topology_spread_constraints: Sequence[Mapping[str, Any]] | None = None
                    ) -> Obj:
    """A Deployment selecting ``app=<name>`` (plus `pod_labels` on the template; the
    template's annotations and scheduling fields as given)."""
    meta_labels = dict(labels or {})
    if managed:
        meta_labels["sco/managed"] = "true"
    selector = {"app": name}
    tmpl_labels = {**selector, **(pod_labels or {})}
    template = _template(tmpl_labels, cpu, memory, gpus, gpu_resource,
                         annotations=pod_annotations, tolerations=tolerations,
                         node_selector=node_selector, affinity=affinity,
                         topology_spread_constraints=topology_spread_constraints)
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": meta_labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": selector},
                     "template": template},
            "status": {}}


def make_replicaset(deployment: Mapping[str, Any], template_hash: str = "5d8f7c9b4",
                    revision: int = 1) -> Obj:
    """The ReplicaSet a stored Deployment owns (``<deployment>-<hash>``)."""
    dmeta = deployment["metadata"]
    spec = deployment["spec"]
    selector = copy.deepcopy(spec["selector"])
    selector.setdefault("matchLabels", {})["pod-template-hash"] = template_hash
    template = copy.deepcopy(spec["template"])
    template.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = \
        template_hash
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{dmeta['name']}-{template_hash}",
                         "namespace": dmeta.get("namespace", "default"),
                         "labels": dict(template["metadata"]["labels"]),
                         "annotations": {"deployment.kubernetes.io/revision": str(revision)},
                         "ownerReferences": [owner_reference(deployment)]},
            "spec": {"replicas": spec.get("replicas", 1), "selector": selector,
                     "template": template},
            "status": {"replicas": 0}}


def pods_for(owner: Mapping[str, Any], count: int, *, unschedulable: str | None = None,
             start: int = 0) -> list[Obj]:
    """`count` pods as a stored ReplicaSet or Job would create them (names ``<owner>-<n>``)."""
    spec = owner["spec"]
    template = spec["template"]
    meta = owner["metadata"]
    out = []
    for i in range(start, start + count):
        labels = dict(template.get("metadata", {}).get("labels") or {})
        if owner["kind"] == "Job":
            labels.setdefault("batch.kubernetes.io/job-name", meta["name"])
            labels.setdefault("job-name", meta["name"])
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": f"{meta['name']}-{i:05d}",
                            "namespace": meta.get("namespace", "default"), "labels": labels,
                            "ownerReferences": [owner_reference(owner)]},
               "spec": copy.deepcopy(template["spec"]),
               "status": {"phase": "Pending"}}
        annotations = template.get("metadata", {}).get("annotations")
        if annotations:  # the ReplicaSet controller copies the template's annotations too
            pod["metadata"]["annotations"] = dict(annotations)
        if unschedulable is not None:
            pod["status"]["conditions"] = [_condition("PodScheduled", "False", "Unschedulable",
                                                      unschedulable)]
        out.append(pod)
    return out


def make_job(name: str, namespace: str = "default", *, parallelism: int = 1,
             labels: Mapping[str, str] | None = None,
             pod_labels: Mapping[str, str] | None = None, cpu: str | int | None = "1",
             memory: str | None = "1Gi", gpus: int = 0,
             gpu_resource: str = "nvidia.com/gpu") -> Obj:
    """A batch/v1 Job."""
    tmpl_labels = {"job-name": name, "batch.kubernetes.io/job-name": name, **(pod_labels or {})}
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
            "spec": {"parallelism": parallelism, "completions": parallelism, "backoffLimit": 6,
                     "template": _template(tmpl_labels, cpu, memory, gpus, gpu_resource,
                                           "Never")},
            "status": {}}


def make_inference_service(name: str, namespace: str = "default", *, gpus: int = 1,
                           cpu: str = "4", memory: str = "16Gi",
                           gpu_resource: str = "nvidia.com/gpu",
                           labels: Mapping[str, str] | None = None, managed: bool = False,
                           mode: str = "RawDeployment") -> Obj:
    """A KServe InferenceService (serving.kserve.io/v1beta1) with one predictor."""
    meta_labels = dict(labels or {})
    if managed:
        meta_labels["sco/managed"] = "true"
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": name, "namespace": namespace, "labels": meta_labels,
                         "annotations": {"serving.kserve.io/deploymentMode": mode}},
            "spec": {"predictor": {"model": {
                "modelFormat": {"name": "huggingface"},
                "storageUri": f"pvc://models/{name}",
                "resources": _resources(cpu, memory, gpus, gpu_resource)}}},
            "status": {}}


def make_pod_group(name: str, namespace: str = "default", *, min_member: int | None = None,
                   labels: Mapping[str, str] | None = None) -> Obj:
    """A scheduler-plugins PodGroup (scheduling.x-k8s.io/v1alpha1; its pods carry the label
    ``scheduling.x-k8s.io/pod-group: <name>``) with ``spec.minMember`` when given."""
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
            "spec": {} if min_member is None else {"minMember": min_member}}


def make_predictor_deployment(isvc: Mapping[str, Any], replicas: int = 1) -> Obj:
    """The RawDeployment-mode predictor Deployment KServe creates for a stored InferenceService."""
    name = isvc["metadata"]["name"]
    res = isvc["spec"]["predictor"]["model"]["resources"]["requests"]
    gpu = next(((k, int(v)) for k, v in res.items() if k not in ("cpu", "memory")), ("", 0))
    dep = make_deployment(f"{name}-predictor", isvc["metadata"].get("namespace", "default"),
                          replicas=replicas, cpu=res.get("cpu"), memory=res.get("memory"),
                          gpus=gpu[1], gpu_resource=gpu[0] or "nvidia.com/gpu",
                          labels={"serving.kserve.io/inferenceservice": name,
                                  "component": "predictor"},
                          pod_labels={"serving.kserve.io/inferenceservice": name,
                                      "component": "predictor",
                                      "app": f"isvc.{name}-predictor"})
    dep["spec"]["selector"] = {"matchLabels": {"app": f"isvc.{name}-predictor"}}
    dep["metadata"]["ownerReferences"] = [owner_reference(isvc)]
    return dep


def make_resource_quota(name: str, namespace: str, hard: Mapping[str, str],
                        used: Mapping[str, str] | None = None) -> Obj:
    """A ResourceQuota (``hard`` e.g. ``{"requests.cpu": "8", "pods": "10"}``)."""
    return {"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"hard": dict(hard)},
            "status": {"hard": dict(hard), "used": dict(used or dict.fromkeys(hard, "0"))}}


def make_pdb(name: str, namespace: str = "default", *, match_labels: Mapping[str, str],
             max_unavailable: int | str | None = None,
             min_available: int | str | None = None) -> Obj:
    """A policy/v1 PodDisruptionBudget over the pods carrying `match_labels`."""
    spec: Obj = {"selector": {"matchLabels": dict(match_labels)}}
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    if min_available is not None:
        spec["minAvailable"] = min_available
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec, "status": {}}


def make_event(involved: Mapping[str, Any], reason: str, message: str,
               type_: str = "Warning", name: str | None = None) -> Obj:
    """A core/v1 Event about a stored object."""
    meta = involved["metadata"]
    stamp = now_rfc3339()
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"name": name or f"{meta['name']}.{abs(hash((reason, message))):x}"[:63],
                         "namespace": meta.get("namespace", "default")},
            "involvedObject": {"apiVersion": involved["apiVersion"], "kind": involved["kind"],
                               "name": meta["name"], "namespace": meta.get("namespace"),
                               "uid": meta.get("uid")},
            "reason": reason, "message": message, "type": type_, "count": 1,
            "firstTimestamp": stamp, "lastTimestamp": stamp,
            "source": {"component": "replicaset-controller"}}


# --- process entry point -------------------------------------------------------------------------


def seed(emu: K8sEmulator, data: Mapping[str, Any]) -> None:
    """Load a seed ``{"crds": [names], "objects": [...]}``: its CRDs installed first (as a
    cluster has them before their objects can be created), then each object applied."""
    for name in data.get("crds") or ():
        emu.install_crd(str(name))
    for obj in data.get("objects") or ():
        emu.apply(obj)


def tls_in(directory: Path, host: str = "127.0.0.1") -> TlsMaterial:
    """The CA + server certificate kept in `directory` (``k8s-ca.crt``, ``k8s-tls.crt``,
    ``k8s-tls.key``), made there first when any is missing: a restarted emulator serves the
    certificate the kubeconfigs already trust."""
    paths = (directory / "k8s-ca.crt", directory / "k8s-tls.crt", directory / "k8s-tls.key")
    if all(p.is_file() for p in paths):
        return TlsMaterial.read(*paths)
    material = generate_tls((host,))
    material.write(directory)
    return material


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT; write ``{"url", "pid"}`` to --ready-file once listening."""
    parser = argparse.ArgumentParser(prog="python -m scoctl.sim.k8s_emulator",
                                     description="Kubernetes API emulator on loopback")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--ready-file", help="write {url, pid} here (atomically) when listening")
    parser.add_argument("--seed", help="a JSON file {\"crds\": [...], \"objects\": [...]} to "
                                       "load first (the CRDs installed, then the objects)")
    parser.add_argument("--tokens-file",
                        help="a JSON file {token: {\"user\": name, \"groups\": [...]}}: the "
                             "bearer tokens accepted (default: scoctl's and the admin's "
                             "built-in test tokens)")
    parser.add_argument("--grace-scale", type=float, default=1.0,
                        help="a Terminating pod goes after its grace period times this (> 0)")
    parser.add_argument("--plain-http", action="store_true",
                        help="serve plain HTTP instead of HTTPS (kubectl sends no token to an "
                             "http:// server)")
    parser.add_argument("--tls-dir",
                        help="serve the certificate in DIR/k8s-tls.crt + DIR/k8s-tls.key signed "
                             "by DIR/k8s-ca.crt, made there first when absent (default: a new "
                             "CA for this process, its PEM in the ready file's \"ca\")")
    parser.add_argument("--crd", action="append", default=[], choices=sorted(CRDS),
                        help="install this CustomResourceDefinition too (repeatable; "
                             f"{', '.join(DEFAULT_CRDS)} always is)")
    args = parser.parse_args(argv)
    tokens: dict[str, User] | None = None
    if args.tokens_file:
        with open(args.tokens_file, encoding="utf-8") as fh:
            tokens = {str(t): User(str(u["user"]), tuple(str(g) for g in u.get("groups", ())))
                      for t, u in json.load(fh).items()}
    tls: TlsMaterial | bool = not args.plain_http
    if tls and args.tls_dir:
        tls = tls_in(Path(args.tls_dir), args.host)
    emu = K8sEmulator(args.host, args.port, tokens=tokens, grace_scale=args.grace_scale,
                      crds=(*DEFAULT_CRDS, *args.crd), tls=tls)
    if args.seed:
        with open(args.seed, encoding="utf-8") as fh:
            seed(emu, json.load(fh))
    emu.start()
    done = threading.Event()

    def _stop(signum: int, frame: object) -> None:
        done.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    if args.ready_file:
        tmp = f"{args.ready_file}.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump({"url": emu.url, "pid": os.getpid(),
                       "ca": emu.ca_pem.decode("ascii") if emu.ca_pem else None}, fh)
        os.replace(tmp, args.ready_file)
    print(emu.url, flush=True)
    while not done.wait(0.5):
        pass
    emu.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
