"""Kubernetes API objects (raw JSON dicts) as scoctl's plain values (`scoctl.core.model`).

Lists are read as raw JSON (``_preload_content=False``) in pages and converted straight into
scoctl's plain values. Deserialising into the client's pydantic models costs ~140 µs per pod
(measured with client 37.0.2), which for 40,000 pending pods alone would eat over half of the
10 s placement budget; the raw path is ~10 µs. Watches convert each event's ``raw_object``.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import logging
from collections.abc import Callable, Hashable, Mapping, Sequence
from datetime import datetime
from typing import Any, Generic, TypeGuard, TypeVar

from scoctl.adapters.kube_client import Raw
from scoctl.core.constraints import HOSTNAME_LABEL, NAME_FIELD
from scoctl.core.model import (
    Condition,
    Container,
    DeploymentInfo,
    EventInfo,
    InferenceServiceInfo,
    JobInfo,
    NodeInfo,
    OwnerRef,
    Placement,
    PodInfo,
    ReplicaSetInfo,
    Requirement,
    ResourceQuotaInfo,
    Spread,
    Taint,
    TokenSecret,
    Toleration,
)
from scoctl.core.model.kubernetes import (
    DaemonSetInfo,
    PodGroupInfo,
    VolumeClaimInfo,
    VolumeInfo,
)
from scoctl.core.model.vocabulary import LABEL_LAUNCH
from scoctl.core.quantity import QuantityError, parse_quantity
from scoctl.core.timefmt import parse_rfc3339

log = logging.getLogger(__name__)

T = TypeVar("T")


# --- raw API objects -> plain values --------------------------------------------------------------


def _is_map(value: object) -> TypeGuard[Raw]:
    # JSON objects are dicts: the exact check first (the Mapping ABC check is several times
    # slower, and a 40,000-pod list makes a quarter of a million of them)
    return isinstance(value, dict) or isinstance(value, Mapping)


def _meta(obj: Raw) -> Raw:
    meta = obj.get("metadata")
    return meta if _is_map(meta) else {}


def _str_map(value: Any) -> dict[str, str]:
    if not value:  # None or empty (most pods have no annotations): no Mapping ABC check
        return {}
    return {str(k): str(v) for k, v in value.items()} if _is_map(value) else {}


K = TypeVar("K", bound=Hashable)
F = TypeVar("F")


def _shared(build: Callable[[K], T]) -> Callable[[K], T]:
    """`build`, memoised on its key: the pods of one controller repeat the same containers,
    conditions and owners, so each distinct one is built once and the (frozen) value shared,
    which in a 40,000-pod list saves building and holding hundreds of thousands of copies. A
    key that cannot be hashed (an odd value in a malformed object) is built unshared."""
    cached = functools.lru_cache(maxsize=4096)(build)

    def get(key: K) -> T:
        try:
            return cached(key)
        except TypeError:
            return build(key)

    return get


# Keys hold exactly the values the objects are built from (strings already converted), so two
# keys are equal only when the values they give are.
@_shared
def _conditions_of(key: tuple[tuple[str, str, str, str], ...]) -> tuple[Condition, ...]:
    return tuple(Condition(*fields) for fields in key)


def _conditions(obj: Raw) -> tuple[Condition, ...]:
    return _status_conditions(obj.get("status"))


def _status_conditions(status: Any) -> tuple[Condition, ...]:
    conds = status.get("conditions") if _is_map(status) else None
    return _conditions_of(tuple([  # a list first: faster than a generator, per listed object
        (str(c.get("type", "")), str(c.get("status", "")), str(c.get("reason") or ""),
         str(c.get("message") or ""))
        for c in conds or () if _is_map(c)]))


class _ByRepr(Generic[T]):
    """Values built from raw JSON values, one shared value per distinct raw value. The key is
    the raw value's repr: equal reprs are equal values (repr of dicts, lists, strings, numbers,
    booleans and None is faithful), so a hit is always right, and the same value in another
    key order only misses. repr runs in C, about twice as fast as a sorted json.dumps and far
    faster than a key built field by field in Python. Bounded: cleared when full."""

    def __init__(self, build: Callable[..., T], size: int = 4096) -> None:
        self.build, self.size = build, size
        self.values: dict[str, T] = {}

    def get(self, *raw: Any) -> T:
        key = repr(raw)
        try:
            return self.values[key]
        except KeyError:
            pass
        value = self.build(*raw)
        if len(self.values) >= self.size:
            self.values.clear()
        self.values[key] = value
        return value


def _owners_of(raws: Any) -> tuple[OwnerRef, ...]:
    return tuple(OwnerRef(str(r.get("kind", "")), str(r.get("name", "")),
                          str(r.get("uid") or ""), str(r.get("apiVersion") or ""),
                          bool(r.get("controller")))
                 for r in raws or () if _is_map(r))


_OWNERS = _ByRepr(_owners_of)  # the pods of one controller name the same owner


def _owners(meta: Raw) -> tuple[OwnerRef, ...]:
    raws = meta.get("ownerReferences")
    return _OWNERS.get(raws) if raws else ()


@functools.lru_cache(maxsize=4096)
def _quantity(name: str, value: str) -> int:
    # Pods of one workload repeat the same few quantities; parsing each once keeps a 40,000-pod
    # intake from spending seconds in Decimal arithmetic.
    return parse_quantity(name, value)


def _resources(values: Any) -> dict[str, int]:
    if not values:
        return {}
    out: dict[str, int] = {}
    for name, value in values.items():
        amount = _quantity(str(name), value if isinstance(value, str) else str(value))
        if amount:
            out[str(name)] = amount
    return out


def _containers_of(fields: list[tuple[Any, Any, Any]]) -> tuple[Container, ...]:
    out = []
    for name, policy, resources in fields:
        resources = resources or {}
        # The apiserver defaults missing requests from limits; so do we, for objects that
        # skipped it.
        limits, requests = resources.get("limits"), resources.get("requests") or {}
        if limits or type(requests) is not dict:  # only read: a plain dict needs no copy
            requests = {**(limits or {}), **requests}
        out.append(Container(str(name if name is not None else ""), _resources(requests),
                             policy or None))
    return tuple(out)


# The containers of one pod template are the same but for what scoctl does not read (their
# volume mounts name each pod's API token): keyed on the fields read.
_CONTAINERS = _ByRepr(_containers_of)


def _containers(raws: Any) -> tuple[Container, ...]:
    return _CONTAINERS.get([(raw.get("name"), raw.get("restartPolicy"), raw.get("resources"))
                            for raw in raws or ()])


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float | str) and str(value).isdigit() else 0


@_shared
def _tolerations_of(key: tuple[tuple[str, str, str, str], ...]) -> tuple[Toleration, ...]:
    return tuple(Toleration(*fields) for fields in key)


def _tolerations(raws: Any) -> tuple[Toleration, ...]:
    return _tolerations_of(tuple([
        (str(t.get("key") or ""), str(t.get("operator") or "Equal"), str(t.get("value") or ""),
         str(t.get("effect") or "")) for t in raws]))


def _requirements(raws: Any, *, field_key: str | None = None) -> tuple[Requirement, ...]:
    return tuple(Requirement(field_key or str(r.get("key") or ""), str(r.get("operator") or ""),
                             tuple(str(v) for v in r.get("values") or ()))
                 for r in raws or () if _is_map(r))


def _term(raw: Any) -> tuple[Requirement, ...]:
    if not _is_map(raw):
        return ()
    fields_ = tuple(Requirement(NAME_FIELD, req.operator, req.values)
                    for req in _requirements(raw.get("matchFields")))
    return _requirements(raw.get("matchExpressions")) + fields_


def _alone(affinity: Any) -> bool:
    """A required podAntiAffinity term over ``kubernetes.io/hostname`` (one per node)."""
    anti = (affinity.get("podAntiAffinity") if _is_map(affinity) else None) or {}
    terms = anti.get("requiredDuringSchedulingIgnoredDuringExecution") if _is_map(anti) else ()
    return any(_is_map(t) and t.get("topologyKey") == HOSTNAME_LABEL
               for t in terms or () if isinstance(terms, list))


def _placement_of(selector: Any, affinity: Any, spread_raws: Any, volumes: list[Raw]
                  ) -> Placement | None:
    alone = _alone(affinity)
    affinity = (affinity.get("nodeAffinity") if _is_map(affinity) else None) or {}
    required_raw = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    required = (tuple(_term(t) for t in required_raw.get("nodeSelectorTerms") or ())
                if _is_map(required_raw) else None)
    preferred = tuple((_int(p.get("weight")), _term(p.get("preference")))
                      for p in affinity.get("preferredDuringSchedulingIgnoredDuringExecution")
                      or () if _is_map(p))
    spread = tuple(Spread(str(c.get("topologyKey") or ""), _int(c.get("maxSkew")) or 1,
                          str(c.get("whenUnsatisfiable") or "DoNotSchedule"))
                   for c in spread_raws or () if _is_map(c))
    claims = tuple(sorted({str(v["persistentVolumeClaim"].get("claimName") or "")
                           for v in volumes if _is_map(v["persistentVolumeClaim"])}))
    placement = Placement(
        node_selector=tuple(sorted(_str_map(selector).items())) if _is_map(selector) else (),
        required=required, preferred=preferred, spread=spread, volume_claims=claims,
        alone=alone)
    return None if placement == Placement() else placement


_PLACEMENTS = _ByRepr(_placement_of)  # one per pod template, as a rule


def _placement(spec: Raw) -> Placement | None:
    """The pod's placement, one shared value per distinct spec (None: it says nothing)."""
    selector = spec.get("nodeSelector")
    affinity = spec.get("affinity")
    spread = spec.get("topologySpreadConstraints")
    volumes = spec.get("volumes")
    # Only claims matter: most volumes are config maps, secrets and the API token.
    claims = ([v for v in volumes if _is_map(v) and v.get("persistentVolumeClaim")]
              if isinstance(volumes, list) else [])
    if not (selector or affinity or spread or claims):
        return None
    return _PLACEMENTS.get(selector, affinity, spread, claims)


def _frozen(cls: type[F], fields: dict[str, Any]) -> F:
    """An instance of the frozen dataclass `cls` with `fields` (every field, by name), its
    attributes set at once: the generated ``__init__`` of a frozen dataclass sets each field
    with its own ``object.__setattr__`` call, which was a fifth of converting a pod (0.28 s of
    a 40,000-pod list; this takes 0.04 s). Equality, repr and immutability are the class's."""
    value = object.__new__(cls)
    value.__dict__.update(fields)
    return value


def pod_info(obj: Raw) -> PodInfo:
    """A pod API object (JSON dict) as a PodInfo; raises QuantityError/ValueError if unreadable."""
    # this runs for every listed pod: `_meta` and `_conditions` inline, each part read once
    meta = obj.get("metadata")
    if not _is_map(meta):
        meta = {}
    spec = obj.get("spec") or {}
    raw_status = obj.get("status")
    status = raw_status or {}
    pod_resources = spec.get("resources")
    gates = spec.get("schedulingGates")
    tolerations = spec.get("tolerations")
    init_containers = spec.get("initContainers")
    return _frozen(PodInfo, {
        "name": str(meta.get("name", "")),
        "namespace": str(meta.get("namespace", "")),
        "uid": str(meta.get("uid") or ""),
        "labels": _str_map(meta.get("labels")),
        "annotations": _str_map(meta.get("annotations")),
        "owners": _owners(meta),
        "containers": _containers(spec.get("containers")),
        "init_containers": _containers(init_containers) if init_containers else (),
        "pod_requests": _resources(pod_resources.get("requests")) if pod_resources else {},
        "overhead": _resources(spec.get("overhead")),
        "node_name": str(spec.get("nodeName") or ""),
        "nominated_node_name": str(status.get("nominatedNodeName") or ""),
        "phase": str(status.get("phase") or "Pending"),
        "conditions": _status_conditions(raw_status),
        "scheduling_gates": tuple(str(g.get("name", "")) for g in gates) if gates else (),
        "tolerations": _tolerations(tolerations) if tolerations else (),
        "placement": _placement(spec),  # a spec that is no map failed `spec.get` above
        "deleting": bool(meta.get("deletionTimestamp")),
        "resource_version": str(meta.get("resourceVersion") or ""),
        "created": _created(str(meta.get("creationTimestamp") or "")),
        "grace_seconds": _grace_seconds(meta, spec),
    })


def _grace_seconds(meta: Raw, spec: Raw) -> int | None:
    value = meta.get("deletionGracePeriodSeconds")
    if value is None:
        value = spec.get("terminationGracePeriodSeconds")
    return None if value is None else int(value)


def _unix_time(value: str) -> float | None:
    """An RFC 3339 timestamp of the API as Unix seconds; None when absent or unreadable (a
    pod without one is still demand: its latency starts at scoctl's first sight)."""
    if not value:
        return None
    try:
        return parse_rfc3339(value).timestamp()
    except ValueError:
        return None


_created = _shared(_unix_time)  # the pods of one rollout share a creation second


def node_info(obj: Raw) -> NodeInfo:
    """A node API object as a NodeInfo."""
    meta = _meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    ready = any(c.type == "Ready" and c.status == "True" for c in _conditions(obj))
    return NodeInfo(
        name=str(meta.get("name", "")),
        labels=_str_map(meta.get("labels")),
        taints=tuple(Taint(str(t.get("key", "")), str(t.get("effect", "")),
                           str(t.get("value") or "")) for t in spec.get("taints") or ()),
        allocatable=_resources(status.get("allocatable")),
        capacity=_resources(status.get("capacity")),
        ready=ready,
        unschedulable=bool(spec.get("unschedulable")),
        provider_id=str(spec.get("providerID") or ""),
    )


def label_selector_string(selector: Any) -> str:
    """A LabelSelector object (matchLabels + matchExpressions) as a selector string."""
    if not isinstance(selector, Mapping):
        return ""
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or ():
        key, op = expr.get("key", ""), expr.get("operator", "")
        values = ",".join(sorted(str(v) for v in expr.get("values") or ()))
        if op == "In":
            parts.append(f"{key} in ({values})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({values})")
        elif op == "Exists":
            parts.append(key)
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts)


def _identity(meta: Raw) -> dict[str, Any]:
    """The name, namespace, uid and labels every namespaced object's value carries."""
    return {"name": str(meta.get("name", "")), "namespace": str(meta.get("namespace", "")),
            "uid": str(meta.get("uid") or ""), "labels": _str_map(meta.get("labels"))}


def deployment_info(obj: Raw) -> DeploymentInfo:
    """A Deployment API object as a DeploymentInfo."""
    meta = _meta(obj)
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    replicas = spec.get("replicas")
    return DeploymentInfo(
        **_identity(meta),
        annotations=_str_map(meta.get("annotations")),
        selector=label_selector_string(spec.get("selector")),
        replicas=1 if replicas is None else _int(replicas),
        ready_replicas=_int(status.get("readyReplicas")),
        available_replicas=_int(status.get("availableReplicas")),
        updated_replicas=_int(status.get("updatedReplicas")),
        conditions=_conditions(obj),
    )


def replicaset_info(obj: Raw) -> ReplicaSetInfo:
    """A ReplicaSet API object as a ReplicaSetInfo."""
    meta = _meta(obj)
    status = obj.get("status") or {}
    return ReplicaSetInfo(
        **_identity(meta),
        annotations=_str_map(meta.get("annotations")), owners=_owners(meta),
        replicas=_int((obj.get("spec") or {}).get("replicas")),
        ready_replicas=_int(status.get("readyReplicas")), conditions=_conditions(obj),
    )


def job_info(obj: Raw) -> JobInfo:
    """A Job API object as a JobInfo."""
    meta = _meta(obj)
    status = obj.get("status") or {}
    return JobInfo(
        **_identity(meta),
        active=_int(status.get("active")), succeeded=_int(status.get("succeeded")),
        failed=_int(status.get("failed")), conditions=_conditions(obj),
    )


def inference_service_info(obj: Raw) -> InferenceServiceInfo:
    """A KServe InferenceService (custom object dict) as an InferenceServiceInfo."""
    meta = _meta(obj)
    status = obj.get("status") or {}
    return InferenceServiceInfo(
        **_identity(meta),
        annotations=_str_map(meta.get("annotations")), conditions=_conditions(obj),
        url=str(status.get("url") or ""),
    )


def _quota_amounts(values: Any) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, value in (values or {}).items():
        base = str(key)
        for prefix in ("requests.", "limits."):
            if base.startswith(prefix):
                base = base[len(prefix):]
        out[str(key)] = parse_quantity(base, value)
    return out


def resource_quota_info(obj: Raw) -> ResourceQuotaInfo:
    """A ResourceQuota as a ResourceQuotaInfo (``requests.cpu`` in millicores, memory in bytes)."""
    meta = _meta(obj)
    status = obj.get("status") or {}
    hard = status.get("hard") or (obj.get("spec") or {}).get("hard")
    return ResourceQuotaInfo(
        name=str(meta.get("name", "")), namespace=str(meta.get("namespace", "")),
        hard=_quota_amounts(hard), used=_quota_amounts(status.get("used")),
    )


def event_info(obj: Raw) -> EventInfo:
    """A core/v1 Event as an EventInfo."""
    meta = _meta(obj)
    involved = obj.get("involvedObject") or {}
    return EventInfo(
        name=str(meta.get("name", "")), namespace=str(meta.get("namespace", "")),
        involved_kind=str(involved.get("kind") or ""),
        involved_name=str(involved.get("name") or ""), reason=str(obj.get("reason") or ""),
        message=str(obj.get("message") or ""), type=str(obj.get("type") or "Normal"),
        count=_int(obj.get("count")) or 1,
    )


def _convert_all(items: Sequence[Raw], convert: Callable[[Raw], T], what: str) -> list[T]:
    out: list[T] = []
    for item in items:
        try:
            out.append(convert(item))
        except (QuantityError, ValueError, TypeError, AttributeError) as exc:
            meta = _meta(item)
            log.warning("skipping unreadable %s %s/%s: %s", what, meta.get("namespace", ""),
                        meta.get("name", ""), exc)
    return out


def token_secret(item: Raw) -> TokenSecret:
    """A listed bootstrap token Secret as a value: name, launch and expiration only (the
    token's secret is never read out)."""
    meta = _meta(item)
    raw_data = item.get("data")
    data: Raw = raw_data if isinstance(raw_data, Mapping) else {}
    expires: datetime | None = None
    with contextlib.suppress(ValueError, TypeError):  # binascii.Error is a ValueError
        text = base64.b64decode(str(data.get("expiration") or ""), validate=True).decode()
        expires = parse_rfc3339(text) if text else None
    return TokenSecret(name=str(meta.get("name") or ""),
                       launch=_str_map(meta.get("labels")).get(LABEL_LAUNCH, ""),
                       expires=expires)


# The zone labels of a PersistentVolume, as kube-scheduler's VolumeZone filter reads them
# (`pkg/scheduler/framework/plugins/volumezone/volume_zone.go`: the GA and the beta key; a
# value may name several zones joined by "__", `volumehelpers.LabelZonesToSet`).
_PV_ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")


def volume_claim_info(obj: Raw) -> VolumeClaimInfo:
    """A PersistentVolumeClaim as a VolumeClaimInfo (its bound volume, ``spec.volumeName``)."""
    meta = _meta(obj)
    return VolumeClaimInfo(name=str(meta.get("name", "")),
                           namespace=str(meta.get("namespace", "")),
                           volume=str((obj.get("spec") or {}).get("volumeName") or ""))


def volume_info(obj: Raw) -> VolumeInfo:
    """A PersistentVolume as a VolumeInfo: the zones its required node affinity allows
    (``topology.kubernetes.io/zone In``, the union over the terms; a term that does not
    name the zone allows any) or, without one, its zone label."""
    meta = _meta(obj)
    terms = ((((obj.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {})
             .get("nodeSelectorTerms") or [])
    zones: set[str] = set()
    for term in terms:
        named = [set(map(str, r.get("values") or ())) for r in term.get("matchExpressions") or ()
                 if r.get("key") in _PV_ZONE_LABELS and r.get("operator") == "In"]
        if not named:
            return VolumeInfo(name=str(meta.get("name", "")))  # this term allows any zone
        zones |= set.intersection(*named)
    if not terms:
        labels = meta.get("labels") or {}
        for key in _PV_ZONE_LABELS:
            if labels.get(key):
                zones = set(str(labels[key]).split("__"))
                break
    return VolumeInfo(name=str(meta.get("name", "")), zones=tuple(sorted(zones)))


def pod_group_info(obj: Raw) -> PodGroupInfo:
    """A PodGroup (custom object dict) as a PodGroupInfo: ``spec.minMember`` when it is a whole
    number (the CRD's schema says ``integer``; anything else is no size)."""
    meta = _meta(obj)
    value = (obj.get("spec") or {}).get("minMember")
    return PodGroupInfo(name=str(meta.get("name", "")), namespace=str(meta.get("namespace", "")),
                        min_member=value if isinstance(value, int)
                        and not isinstance(value, bool) else None)


def daemonset_info(obj: Raw) -> DaemonSetInfo:
    """A DaemonSet as a DaemonSetInfo: its pod template read as a pod. The tolerations the
    DaemonSet controller adds to its pods (`pkg/controller/daemon/util/daemonset_util.go`
    `AddOrUpdateDaemonPodTolerations`: not-ready, unreachable, disk/memory/pid pressure,
    unschedulable) tolerate no taint of a new unit but the reclaimable one they do not name, so
    they change nothing here and are not added."""
    meta = _meta(obj)
    template = (obj.get("spec") or {}).get("template") or {}
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    pod = pod_info({"metadata": {**(template.get("metadata") or {}), "name": name,
                                 "namespace": namespace},
                    "spec": template.get("spec") or {}})
    return DaemonSetInfo(name=name, namespace=namespace, pod=pod)
