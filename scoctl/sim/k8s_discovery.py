"""Discovery documents of the simulated Kubernetes API (``/api``, ``/apis``, ``/api/v1``,
``/apis/<group>/<version>``), as kube-apiserver writes them
(``staging/src/k8s.io/apiserver/pkg/endpoints/discovery``, ``installer.go``
``registerResourceHandlers``):

* each resource with its ``shortNames`` and ``categories`` (the REST storages'
  ``ShortNames()``/``Categories()``: ``po``, ``no``, ``deploy``, ``rs``, ``ns``, ``ev``, ``pdb``…,
  category ``all``), so that ``kubectl get po`` and ``kubectl get all`` resolve;
* a subresource whose kind lives in another group names that group and version:
  ``pods/eviction`` is ``policy/v1 Eviction`` (kubectl's drain checks exactly this before it
  evicts, else it falls back to plain DELETE and bypasses every PodDisruptionBudget), ``*/scale``
  is ``autoscaling/v1 Scale``;
* the create-only review APIs that have no storage: ``authorization.k8s.io/v1``
  ``selfsubjectaccessreviews`` and ``authentication.k8s.io/v1`` ``selfsubjectreviews``
  (`REVIEWS`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

Obj = dict[str, Any]


class Served(Protocol):
    """What discovery needs of a served resource type (`k8s_emulator.ResourceType`)."""

    @property
    def group(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def plural(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def namespaced(self) -> bool: ...
    @property
    def subresources(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Review:
    """A create-only API without storage (the access and identity reviews)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = False
    subresources: tuple[str, ...] = ()


SSAR = Review("authorization.k8s.io", "v1", "selfsubjectaccessreviews", "SelfSubjectAccessReview")
SSR = Review("authentication.k8s.io", "v1", "selfsubjectreviews", "SelfSubjectReview")
REVIEWS: tuple[Review, ...] = (SSAR, SSR)

# (group, plural) → shortNames (the REST storages' ShortNames; KServe's CRD for isvc)
SHORT_NAMES: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("", "namespaces"): ("ns",), ("", "nodes"): ("no",), ("", "pods"): ("po",),
    ("", "resourcequotas"): ("quota",), ("", "persistentvolumeclaims"): ("pvc",),
    ("", "persistentvolumes"): ("pv",), ("", "events"): ("ev",),
    ("", "serviceaccounts"): ("sa",), ("apps", "deployments"): ("deploy",),
    ("apps", "replicasets"): ("rs",), ("apps", "daemonsets"): ("ds",),
    ("policy", "poddisruptionbudgets"): ("pdb",),
    ("serving.kserve.io", "inferenceservices"): ("isvc",),
}
# (group, plural) → categories (the REST storages' Categories: "all" for the workloads)
CATEGORIES: Mapping[tuple[str, str], tuple[str, ...]] = {
    ("", "pods"): ("all",), ("apps", "deployments"): ("all",),
    ("apps", "replicasets"): ("all",), ("apps", "daemonsets"): ("all",),
    ("batch", "jobs"): ("all",),
}
VERBS = ["create", "delete", "get", "list", "patch", "update", "watch"]
# subresource → (group, version, kind, verbs) when it is not the parent's own kind
SUBRESOURCES: Mapping[str, tuple[str, str, str, list[str]]] = {
    "eviction": ("policy", "v1", "Eviction", ["create"]),
    "scale": ("autoscaling", "v1", "Scale", ["get", "patch", "update"]),
}


def _all(served: Sequence[Served]) -> list[Served]:
    return [*served, *REVIEWS]


def group_versions(served: Sequence[Served]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for t in _all(served):
        if t.group and t.version not in out.setdefault(t.group, []):
            out[t.group].append(t.version)
    return out


def api_group(name: str, served: Sequence[Served]) -> Obj | None:
    """``/apis/<group>``: its versions, the first preferred."""
    versions = group_versions(served).get(name)
    if versions is None:
        return None
    gv = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": name, "versions": gv,
            "preferredVersion": gv[0]}


def api_group_list(served: Sequence[Served]) -> Obj:
    """``/apis``."""
    groups = [api_group(g, served) for g in group_versions(served)]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [g for g in groups if g]}


def _resource(t: Served) -> Obj:
    if isinstance(t, Review):
        return {"name": t.plural, "singularName": t.kind.lower(), "namespaced": False,
                "kind": t.kind, "verbs": ["create"]}
    entry: Obj = {"name": t.plural, "singularName": t.kind.lower(),
                  "namespaced": t.namespaced, "kind": t.kind, "verbs": list(VERBS)}
    if short := SHORT_NAMES.get((t.group, t.plural)):
        entry["shortNames"] = list(short)
    if categories := CATEGORIES.get((t.group, t.plural)):
        entry["categories"] = list(categories)
    return entry


def _subresource(t: Served, sub: str) -> Obj:
    entry: Obj = {"name": f"{t.plural}/{sub}", "singularName": "", "namespaced": t.namespaced,
                  "kind": t.kind, "verbs": ["get", "patch", "update"]}
    if sub in SUBRESOURCES:
        group, version, kind, verbs = SUBRESOURCES[sub]
        entry.update(group=group, version=version, kind=kind, verbs=list(verbs))
    return entry


def resource_list(group: str, version: str, served: Sequence[Served]) -> Obj | None:
    """``/api/v1`` or ``/apis/<group>/<version>``; None when nothing is served there."""
    types = [t for t in _all(served) if t.group == group and t.version == version]
    if not types:
        return None
    resources: list[Obj] = []
    for t in types:
        resources.append(_resource(t))
        resources += [_subresource(t, sub) for sub in t.subresources]
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv,
            "resources": resources}
