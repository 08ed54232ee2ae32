"""The simulated kube-controller-manager's Deployment and ReplicaSet controllers, and KServe's
predictor, as pure functions over API objects (JSON dicts).

Each follows one upstream rule and names it; the node agent (`agent`) reads the objects, calls
these, and writes what they return:

* the Deployment controller (kubernetes/kubernetes pkg/controller/deployment/): `sync_deployment`
  finds or makes the new ReplicaSet (`sync.go getNewReplicaSet`: named
  ``<deployment>-<pod-template-hash>``, the hash label on its selector, template and labels,
  annotation ``deployment.kubernetes.io/revision`` = the highest old revision + 1), scales it up
  and the old ones down within maxSurge / maxUnavailable (`rolling.go rolloutRolling`,
  `util/deployment_util.go NewRSNewReplicas`, `ResolveFenceposts`), or old ones first for
  ``Recreate`` (`recreate.go`), drops old ReplicaSets beyond ``revisionHistoryLimit``
  (`sync.go cleanupDeployment`), and writes the status `kubectl rollout status` reads
  (`sync.go calculateStatus`, `progress.go syncRolloutStatus`);
* the ReplicaSet controller's scale-down (pkg/controller/replicaset/replica_set.go
  `manageReplicas`): `surplus_pods` (the victims from `k8s_controllers.pods_to_delete`);
* the Scale subresource (pkg/registry/apps/deployment/storage/storage.go `ScaleREST`,
  autoscaling/v1): `scale_of`, `scaled_replicas`;
* KServe's RawDeployment predictor (kserve/kserve pkg/controller/v1beta1/inferenceservice/
  reconcilers/raw): `predictor_deployment` and the InferenceService's status
  (`isvc_status`).

Nothing here does I/O; times are passed in as RFC 3339 text.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from scoctl.sim import k8s_controllers as controllers

Obj = dict[str, Any]

REVISION = "deployment.kubernetes.io/revision"
DESIRED_REPLICAS = "deployment.kubernetes.io/desired-replicas"
MAX_REPLICAS = "deployment.kubernetes.io/max-replicas"
HASH_LABEL = "pod-template-hash"  # apps/v1 DefaultDeploymentUniqueLabelKey
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"  # what `kubectl rollout restart` sets
DEFAULT_HISTORY_LIMIT = 10  # apps/v1 defaults.go SetDefaults_Deployment
DEFAULT_PROGRESS_DEADLINE = 600
# k8s.io/apimachinery/pkg/util/rand SafeEncodeString's alphabet
_SAFE = "bcdfghjklmnpqrstvwxz2456789"
# KServe pkg/constants/constants.go
ISVC_LABEL = "serving.kserve.io/inferenceservice"
COMPONENT_LABEL = "component"
DEPLOYMENT_MODE = "serving.kserve.io/deploymentMode"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta: Mapping[str, Any] = obj.get("metadata") or {}
    return meta


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec: Mapping[str, Any] = obj.get("spec") or {}
    return spec


def _status(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    status: Mapping[str, Any] = obj.get("status") or {}
    return status


def replicas_of(obj: Mapping[str, Any]) -> int:
    """``spec.replicas``, defaulted to 1 (apps/v1 defaults)."""
    value = _spec(obj).get("replicas")
    return 1 if value is None else int(value)


def revision(obj: Mapping[str, Any]) -> int:
    """`deploymentutil.Revision`: the revision annotation (0 when absent or not a number)."""
    value = str((_meta(obj).get("annotations") or {}).get(REVISION, "0"))
    return int(value) if value.isdigit() else 0


# --- the pod-template-hash (pkg/controller/controller_utils.go ComputeHash) -------------------


def _fnv32a(data: bytes) -> int:
    value = 0x811C9DC5
    for byte in data:
        value = ((value ^ byte) * 0x01000193) & 0xFFFFFFFF
    return value


def template_hash(template: Mapping[str, Any], collision_count: int = 0) -> str:
    """`controller.ComputeHash`: an FNV-32a hash of the pod template (and the Deployment's
    ``collisionCount`` when set), its decimal digits mapped through `rand.SafeEncodeString`.
    (Upstream hashes the Go struct's dump; this hashes the template's canonical JSON, so the
    values differ from a real cluster's but are as stable.)"""
    data = json.dumps(template, sort_keys=True, separators=(",", ":")).encode()
    if collision_count:
        data += str(collision_count).encode()
    return "".join(_SAFE[int(d) % len(_SAFE)] for d in str(_fnv32a(data)))


def _without_hash(template: Mapping[str, Any]) -> Obj:
    out: Obj = copy.deepcopy(dict(template))
    labels = (out.get("metadata") or {}).get("labels")
    if isinstance(labels, dict):
        labels.pop(HASH_LABEL, None)
        if not labels:
            out["metadata"].pop("labels")
    if not out.get("metadata"):
        out.pop("metadata", None)
    return out


def equal_ignore_hash(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """`deploymentutil.EqualIgnoreHash`: two pod templates equal but for pod-template-hash."""
    return _without_hash(a) == _without_hash(b)


# --- rolling update arithmetic (pkg/controller/deployment/util/deployment_util.go) ------------


def _scaled(value: Any, total: int, round_up: bool) -> int:
    """intstr.GetScaledValueFromIntOrPercent."""
    if isinstance(value, str) and value.endswith("%"):
        exact = total * int(value[:-1])
        return -(-exact // 100) if round_up else exact // 100
    return int(value)


def _rolling(deployment: Mapping[str, Any]) -> Mapping[str, Any]:
    strategy = _spec(deployment).get("strategy") or {}
    rolling: Mapping[str, Any] = strategy.get("rollingUpdate") or {}
    return rolling


def is_recreate(deployment: Mapping[str, Any]) -> bool:
    return (_spec(deployment).get("strategy") or {}).get("type") == "Recreate"


def fenceposts(deployment: Mapping[str, Any]) -> tuple[int, int]:
    """`ResolveFenceposts`: (maxSurge rounded up, maxUnavailable rounded down) of the desired
    replicas, 25% each by default; both 0 makes maxUnavailable 1. Recreate: (0, replicas)."""
    desired = replicas_of(deployment)
    if is_recreate(deployment):
        return 0, desired
    rolling = _rolling(deployment)
    surge = _scaled(rolling.get("maxSurge", "25%"), desired, True)
    unavailable = _scaled(rolling.get("maxUnavailable", "25%"), desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def max_unavailable(deployment: Mapping[str, Any]) -> int:
    """`MaxUnavailable`: at most the desired replicas."""
    return min(fenceposts(deployment)[1], replicas_of(deployment))


def new_rs_new_replicas(deployment: Mapping[str, Any], all_rs: Sequence[Mapping[str, Any]],
                        new_rs: Mapping[str, Any]) -> int:
    """`NewRSNewReplicas` for RollingUpdate: the new ReplicaSet grows while the total stays
    within replicas + maxSurge, and never above the desired replicas."""
    desired = replicas_of(deployment)
    surge, _ = fenceposts(deployment)
    current = sum(replicas_of(rs) for rs in all_rs)
    if current >= desired + surge:
        return replicas_of(new_rs)
    grow = min(desired + surge - current, desired - replicas_of(new_rs))
    return replicas_of(new_rs) + max(0, grow)


def _available(rs: Mapping[str, Any]) -> int:
    return int(_status(rs).get("availableReplicas") or 0)


def _created_key(rs: Mapping[str, Any]) -> tuple[str, str]:
    """controller.ReplicaSetsByCreationTimestamp: oldest first, then by name."""
    return str(_meta(rs).get("creationTimestamp") or ""), str(_meta(rs).get("name"))


def scale_down_old(deployment: Mapping[str, Any], new_rs: Mapping[str, Any],
                   old: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """rolling.go `reconcileOldReplicaSets`: the old ReplicaSets' new replica counts (name →
    count), first their unhealthy replicas (`cleanupUnhealthyReplicas`) then, while more than
    replicas − maxUnavailable are available, the oldest ones
    (`scaleDownOldReplicaSetsForRollingUpdate`)."""
    active = sorted((rs for rs in old if replicas_of(rs) > 0), key=_created_key)
    if not active:
        return {}
    all_rs = [*active, new_rs]
    desired = replicas_of(deployment)
    min_available = desired - max_unavailable(deployment)
    new_unavailable = replicas_of(new_rs) - _available(new_rs)
    max_scaled_down = sum(replicas_of(rs) for rs in all_rs) - min_available - new_unavailable
    if max_scaled_down <= 0:
        return {}
    counts = {str(_meta(rs)["name"]): replicas_of(rs) for rs in active}
    cleaned = 0
    for rs in active:  # unhealthy replicas first: they add no unavailability
        name = str(_meta(rs)["name"])
        if cleaned >= max_scaled_down or counts[name] == _available(rs):
            continue
        cut = min(max_scaled_down - cleaned, counts[name] - _available(rs))
        counts[name] -= cut
        cleaned += cut
    available = sum(_available(rs) for rs in all_rs)
    budget = available - min_available
    for rs in active:
        name = str(_meta(rs)["name"])
        if budget <= 0:
            break
        cut = min(counts[name], budget)
        counts[name] -= cut
        budget -= cut
    return {n: c for n, c in counts.items() if c != replicas_of(
        next(rs for rs in active if _meta(rs)["name"] == n))}


# --- the Deployment controller's sync --------------------------------------------------------


@dataclass(frozen=True)
class DeploymentSync:
    """What one sync of a Deployment writes: a new ReplicaSet to create, ReplicaSets' new
    replica counts and annotations (name → (replicas, annotations)), old ReplicaSets to delete,
    the Deployment's revision annotation (None: unchanged) and its status."""

    create: Obj | None = None
    scale: Mapping[str, tuple[int, Mapping[str, str]]] = field(default_factory=dict)
    delete: tuple[str, ...] = ()
    revision: str | None = None
    status: Obj = field(default_factory=dict)


def owned_replicasets(deployment: Mapping[str, Any],
                      replicasets: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The ReplicaSets whose controller is the Deployment (`getReplicaSetsForDeployment`)."""
    uid, ns = _meta(deployment).get("uid"), _meta(deployment).get("namespace")
    return [rs for rs in replicasets if _meta(rs).get("namespace") == ns
            and (controllers.controller_ref(rs) or {}).get("uid") == uid]


def find_new_replicaset(deployment: Mapping[str, Any],
                        owned: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """`FindNewReplicaSet`: the oldest ReplicaSet whose template equals the Deployment's."""
    template = _spec(deployment).get("template") or {}
    same = sorted((rs for rs in owned if equal_ignore_hash(_spec(rs).get("template") or {},
                                                          template)), key=_created_key)
    return same[0] if same else None


def _rs_annotations(deployment: Mapping[str, Any], rev: int) -> dict[str, str]:
    """`SetNewReplicaSetAnnotations` / `SetReplicasAnnotations`."""
    surge, _ = fenceposts(deployment)
    desired = replicas_of(deployment)
    return {REVISION: str(rev), DESIRED_REPLICAS: str(desired),
            MAX_REPLICAS: str(desired + surge)}


def new_replicaset(deployment: Mapping[str, Any], rev: int, replicas: int) -> Obj:
    """`getNewReplicaSet`'s new ReplicaSet: ``<deployment>-<hash>``, the hash label added to
    its labels, selector and template, owned (controller) by the Deployment."""
    meta, spec = _meta(deployment), _spec(deployment)
    template: Obj = copy.deepcopy(dict(spec.get("template") or {}))
    digest = template_hash(template, int(_status(deployment).get("collisionCount") or 0))
    template.setdefault("metadata", {}).setdefault("labels", {})[HASH_LABEL] = digest
    selector: Obj = copy.deepcopy(dict(spec.get("selector") or {}))
    selector.setdefault("matchLabels", {})[HASH_LABEL] = digest
    labels = dict(template["metadata"]["labels"])
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items()
                   if k != "kubectl.kubernetes.io/last-applied-configuration"
                   and k != REVISION}
    annotations.update(_rs_annotations(deployment, rev))
    rs_spec: Obj = {"replicas": replicas, "selector": selector, "template": template}
    if spec.get("minReadySeconds"):
        rs_spec["minReadySeconds"] = spec["minReadySeconds"]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": f"{meta['name']}-{digest}", "namespace": meta.get("namespace"),
                         "labels": labels, "annotations": annotations,
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment",
                                              "name": meta["name"], "uid": meta.get("uid"),
                                              "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": rs_spec, "status": {"replicas": 0}}


def _target_replicas(deployment: Mapping[str, Any], new_rs: Mapping[str, Any],
                     old: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """One step of the rollout: the ReplicaSets' new replica counts (only changes)."""
    desired = replicas_of(deployment)
    name = str(_meta(new_rs)["name"])
    if is_recreate(deployment):  # recreate.go: old ones to 0, then the new one up
        old_active = [rs for rs in old if replicas_of(rs) > 0
                      or int(_status(rs).get("replicas") or 0) > 0]
        if old_active:
            return {str(_meta(rs)["name"]): 0 for rs in old_active if replicas_of(rs) > 0}
        return {name: desired} if replicas_of(new_rs) != desired else {}
    if replicas_of(new_rs) > desired:  # reconcileNewReplicaSet: scale down
        return {name: desired}
    if replicas_of(new_rs) < desired:
        grown = new_rs_new_replicas(deployment, [*old, new_rs], new_rs)
        if grown != replicas_of(new_rs):
            return {name: grown}
    return scale_down_old(deployment, new_rs, old)


def _history_to_delete(deployment: Mapping[str, Any],
                       old: Sequence[Mapping[str, Any]]) -> tuple[str, ...]:
    """`cleanupDeployment`: old ReplicaSets with no replicas and no pods, oldest first, beyond
    ``revisionHistoryLimit``."""
    limit = _spec(deployment).get("revisionHistoryLimit")
    limit = DEFAULT_HISTORY_LIMIT if limit is None else int(limit)
    idle = sorted((rs for rs in old if replicas_of(rs) == 0
                   and int(_status(rs).get("replicas") or 0) == 0
                   and not _meta(rs).get("deletionTimestamp")),
                  key=lambda rs: (revision(rs), *_created_key(rs)))
    extra = len(idle) - limit
    return tuple(str(_meta(rs)["name"]) for rs in idle[:max(0, extra)])


def sync_deployment(deployment: Mapping[str, Any], replicasets: Sequence[Mapping[str, Any]],
                    stamp: str) -> DeploymentSync:
    """One sync of `deployment` over its namespace's `replicasets` (their statuses as the
    ReplicaSet controller last wrote them), `stamp` the time written into conditions."""
    owned = owned_replicasets(deployment, replicasets)
    new_rs = find_new_replicaset(deployment, owned)
    old = [rs for rs in owned if rs is not new_rs]
    max_old = max((revision(rs) for rs in old), default=0)
    if _spec(deployment).get("paused"):
        status = deployment_status(deployment, new_rs, owned, stamp)
        return DeploymentSync(status=status)
    if new_rs is None:
        probe = new_replicaset(deployment, max_old + 1, 0)
        if is_recreate(deployment):
            busy = any(replicas_of(rs) or int(_status(rs).get("replicas") or 0) for rs in old)
            count = 0 if busy else replicas_of(deployment)
        else:
            count = new_rs_new_replicas(deployment, [*old, probe], probe)
        created = new_replicaset(deployment, max_old + 1, count)
        status = deployment_status(deployment, created, [*old, created], stamp, created=True)
        return DeploymentSync(create=created, revision=str(max_old + 1), status=status)
    rev = revision(new_rs) if revision(new_rs) > max_old else max_old + 1
    changes = _target_replicas(deployment, new_rs, old)
    scale: dict[str, tuple[int, Mapping[str, str]]] = {}
    name = str(_meta(new_rs)["name"])
    want_notes = _rs_annotations(deployment, rev)
    notes = (_meta(new_rs).get("annotations") or {})
    if changes.get(name, replicas_of(new_rs)) != replicas_of(new_rs) or any(
            notes.get(k) != v for k, v in want_notes.items()):
        scale[name] = (changes.get(name, replicas_of(new_rs)), want_notes)
    for rs in old:
        rs_name = str(_meta(rs)["name"])
        if rs_name in changes:
            scale[rs_name] = (changes[rs_name], {})
    after = [_with_replicas(rs, scale) for rs in owned]
    new_after = next(rs for rs in after if _meta(rs)["name"] == name)
    delete = () if changes else _history_to_delete(deployment, [r for r in after
                                                                if r is not new_after])
    dep_rev = str(rev) if str((_meta(deployment).get("annotations") or {}).get(
        REVISION)) != str(rev) else None
    status = deployment_status(deployment, new_after, [r for r in after
                                                       if _meta(r)["name"] not in delete],
                               stamp)
    return DeploymentSync(scale=scale, delete=delete, revision=dep_rev, status=status)


def _with_replicas(rs: Mapping[str, Any],
                   scale: Mapping[str, tuple[int, Mapping[str, str]]]) -> Mapping[str, Any]:
    name = str(_meta(rs)["name"])
    if name not in scale:
        return rs
    return {**rs, "spec": {**_spec(rs), "replicas": scale[name][0]}}


# --- status (sync.go calculateStatus, progress.go syncRolloutStatus) ---------------------------


def _condition(type_: str, status: str, reason: str, message: str, stamp: str) -> Obj:
    return {"type": type_, "status": status, "reason": reason, "message": message,
            "lastUpdateTime": stamp, "lastTransitionTime": stamp}


def _set_condition(conditions: list[Obj], new: Obj) -> list[Obj]:
    """`SetDeploymentCondition`: same status and reason keep the old condition; same status
    keeps its lastTransitionTime."""
    old = next((c for c in conditions if c.get("type") == new["type"]), None)
    if old is not None and old.get("status") == new["status"] \
            and old.get("reason") == new["reason"]:
        return conditions
    if old is not None and old.get("status") == new["status"]:
        new = {**new, "lastTransitionTime": old.get("lastTransitionTime",
                                                    new["lastTransitionTime"])}
    return [c for c in conditions if c.get("type") != new["type"]] + [new]


def deployment_complete(deployment: Mapping[str, Any], status: Mapping[str, Any]) -> bool:
    """`DeploymentComplete`: every replica updated and available, no old ones, the latest
    generation observed."""
    desired = replicas_of(deployment)
    return (status.get("updatedReplicas") == desired and status.get("replicas") == desired
            and status.get("availableReplicas") == desired
            and int(status.get("observedGeneration") or 0)
            >= int(_meta(deployment).get("generation") or 0))


def _progressing(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """`DeploymentProgressing`: more updated, fewer old, more ready or more available."""
    def old_count(s: Mapping[str, Any]) -> int:
        return int(s.get("replicas") or 0) - int(s.get("updatedReplicas") or 0)
    return (int(new.get("updatedReplicas") or 0) > int(old.get("updatedReplicas") or 0)
            or old_count(new) < old_count(old)
            or int(new.get("readyReplicas") or 0) > int(old.get("readyReplicas") or 0)
            or int(new.get("availableReplicas") or 0) > int(old.get("availableReplicas") or 0))


def deployment_status(deployment: Mapping[str, Any], new_rs: Mapping[str, Any] | None,
                      all_rs: Sequence[Mapping[str, Any]], stamp: str, *,
                      created: bool = False) -> Obj:
    """`calculateStatus` + `syncRolloutStatus`: the counts summed over the ReplicaSets
    (``updatedReplicas`` the new one's), ``Available`` while at least replicas −
    maxUnavailable are available, ``Progressing`` NewReplicaSetCreated → ReplicaSetUpdated
    → NewReplicaSetAvailable, and the newest ReplicaSet's ``ReplicaFailure`` copied over."""
    previous = _status(deployment)
    desired = replicas_of(deployment)

    def total(key: str, sets: Sequence[Mapping[str, Any]]) -> int:
        return sum(int(_status(rs).get(key) or 0) for rs in sets)

    available = total("availableReplicas", all_rs)
    status: Obj = {
        "observedGeneration": int(_meta(deployment).get("generation") or 1),
        "replicas": total("replicas", all_rs),
        "updatedReplicas": total("replicas", [new_rs] if new_rs is not None else []),
        "readyReplicas": total("readyReplicas", all_rs),
        "availableReplicas": available,
        "unavailableReplicas": max(0, sum(replicas_of(rs) for rs in all_rs) - available),
    }
    if previous.get("collisionCount") is not None:
        status["collisionCount"] = previous["collisionCount"]
    conditions = [dict(c) for c in previous.get("conditions") or []]
    if available >= desired - max_unavailable(deployment):
        conditions = _set_condition(conditions, _condition(
            "Available", "True", "MinimumReplicasAvailable",
            "Deployment has minimum availability.", stamp))
    else:
        conditions = _set_condition(conditions, _condition(
            "Available", "False", "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.", stamp))
    rs_name = str(_meta(new_rs).get("name")) if new_rs is not None else ""
    current = next((c for c in conditions if c.get("type") == "Progressing"), None)
    if created:
        conditions = _set_condition(conditions, _condition(
            "Progressing", "True", "NewReplicaSetCreated",
            f'Created new replica set "{rs_name}"', stamp))
    elif not (status["replicas"] == status["updatedReplicas"] and current is not None
              and current.get("reason") == "NewReplicaSetAvailable"):
        if new_rs is not None and deployment_complete(deployment, status):
            conditions = _set_condition(conditions, _condition(
                "Progressing", "True", "NewReplicaSetAvailable",
                f'ReplicaSet "{rs_name}" has successfully progressed.', stamp))
        elif new_rs is not None and (_progressing(previous, status) or current is None):
            progressing = _condition("Progressing", "True", "ReplicaSetUpdated",
                                     f'ReplicaSet "{rs_name}" is progressing.', stamp)
            conditions = [c for c in conditions if c.get("type") != "Progressing"]
            if current is not None and current.get("status") == "True":
                progressing["lastTransitionTime"] = current.get("lastTransitionTime", stamp)
            conditions.append(progressing)
    failure = next((c for c in _status(new_rs or {}).get("conditions") or []
                    if c.get("type") == "ReplicaFailure"), None)
    conditions = [c for c in conditions if c.get("type") != "ReplicaFailure"]
    if failure is not None:
        conditions.append(dict(failure))
    status["conditions"] = conditions
    return status


# --- the ReplicaSet controller -----------------------------------------------------------------


def surplus_pods(replicaset: Mapping[str, Any], mine: Sequence[Mapping[str, Any]],
                 related: Sequence[Mapping[str, Any]], now: datetime) -> list[Mapping[str, Any]]:
    """replica_set.go `manageReplicas` when the ReplicaSet has more active pods than replicas:
    the ones to delete (`getPodsToDelete`, ranked against the Deployment's `related` pods)."""
    active = [p for p in mine if controllers.is_pod_active(p)]
    return controllers.pods_to_delete(active, related, len(active) - replicas_of(replicaset),
                                      now)


def replicaset_failure(replicaset: Mapping[str, Any], message: str | None,
                       stamp: str) -> list[Obj] | None:
    """replica_set_utils.go `calculateStatus`: ``ReplicaFailure=True/FailedCreate`` with the
    apiserver's error while pod creation fails, removed once it succeeds; None when the
    conditions stay as they are."""
    conditions = [dict(c) for c in _status(replicaset).get("conditions") or []]
    have = next((c for c in conditions if c.get("type") == "ReplicaFailure"), None)
    if message is None:
        if have is None:
            return None
        return [c for c in conditions if c.get("type") != "ReplicaFailure"]
    if have is not None and have.get("message") == message:
        return None
    return [c for c in conditions if c.get("type") != "ReplicaFailure"] + [{
        "type": "ReplicaFailure", "status": "True", "reason": "FailedCreate",
        "message": message, "lastTransitionTime": stamp}]


# --- the Scale subresource ---------------------------------------------------------------------


def scale_of(obj: Mapping[str, Any], selector_text: str) -> Obj:
    """`scaleFromDeployment` / `scaleFromReplicaSet`: the autoscaling/v1 Scale of a Deployment
    or ReplicaSet (its name, namespace, uid, resourceVersion and creationTimestamp; spec and
    status replicas; the selector as text)."""
    meta = _meta(obj)
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion",
                                              "creationTimestamp") if k in meta},
            "spec": {"replicas": replicas_of(obj)},
            "status": {"replicas": int(_status(obj).get("replicas") or 0),
                       "selector": selector_text}}


def selector_text(selector: Mapping[str, Any] | None) -> str:
    """metav1.LabelSelectorAsSelector(...).String(): requirements sorted by key."""
    parts: list[tuple[str, str]] = []
    for key, value in ((selector or {}).get("matchLabels") or {}).items():
        parts.append((str(key), f"{key}={value}"))
    for expr in (selector or {}).get("matchExpressions") or []:
        key, op = str(expr.get("key")), expr.get("operator")
        values = ",".join(sorted(str(v) for v in expr.get("values") or []))
        text = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                "Exists": key, "DoesNotExist": f"!{key}"}.get(str(op), key)
        parts.append((key, text))
    return ",".join(text for _, text in sorted(parts))


def scaled_replicas(scale: Any) -> int:
    """``spec.replicas`` of a Scale written to the subresource; ValueError when it is missing
    or not a non-negative integer (validation: ``spec.replicas: Invalid value``)."""
    value = (scale.get("spec") or {}).get("replicas") if isinstance(scale, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"spec.replicas: Invalid value: {value!r}: must be greater than or "
                         "equal to 0")
    return value


# --- KServe's RawDeployment predictor ----------------------------------------------------------


def predictor_deployment(isvc: Mapping[str, Any]) -> Obj:
    """The predictor Deployment KServe's raw reconciler makes for an InferenceService:
    ``<isvc>-predictor`` (`constants.PredictorServiceName`), labelled
    ``serving.kserve.io/inferenceservice=<isvc>`` and ``component=predictor`` on it and on its
    pods (plus ``app=isvc.<isvc>-predictor``, `GetRawServiceLabel`, which it selects on),
    owned (controller) by the InferenceService; its container requests what the predictor's
    model asks for (``resources``), ``minReplicas`` replicas (default 1)."""
    meta, spec = _meta(isvc), _spec(isvc)
    name = str(meta["name"])
    predictor = spec.get("predictor") or {}
    model = predictor.get("model") or {}
    container = {"name": "kserve-container",
                 "image": str(model.get("runtime") or "kserve/huggingfaceserver:latest"),
                 "resources": copy.deepcopy(dict(model.get("resources") or {}))}
    # the InferenceService's own labels go onto the component and its pods (utils.Union)
    labels = {**dict(meta.get("labels") or {}), ISVC_LABEL: name,
              COMPONENT_LABEL: "predictor", "app": f"isvc.{name}-predictor"}
    pod_spec: Obj = {"containers": [container]}
    for key in ("tolerations", "nodeSelector", "affinity"):
        if predictor.get(key):
            pod_spec[key] = copy.deepcopy(predictor[key])
    replicas = predictor.get("minReplicas")
    annotations = {DEPLOYMENT_MODE: str((meta.get("annotations") or {}).get(
        DEPLOYMENT_MODE, "RawDeployment"))}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": f"{name}-predictor", "namespace": meta.get("namespace"),
                         "labels": dict(labels),
                         "annotations": annotations,
                         "ownerReferences": [{"apiVersion": "serving.kserve.io/v1beta1",
                                              "kind": "InferenceService", "name": name,
                                              "uid": meta.get("uid"), "controller": True,
                                              "blockOwnerDeletion": True}]},
            "spec": {"replicas": 1 if replicas is None else int(replicas),
                     "selector": {"matchLabels": {"app": f"isvc.{name}-predictor"}},
                     "template": {"metadata": {"labels": labels, "annotations": annotations},
                                  "spec": pod_spec}}}


def isvc_status(isvc: Mapping[str, Any], deployment: Mapping[str, Any] | None,
                stamp: str) -> Obj:
    """The InferenceService's status as KServe writes it from its predictor Deployment
    (`PropagateRawStatus`): ``PredictorReady`` and ``Ready`` True once the Deployment is
    Available, else False with the Deployment's reason."""
    available = next((c for c in _status(deployment or {}).get("conditions") or []
                      if c.get("type") == "Available"), None)
    ready = available is not None and available.get("status") == "True"
    reason = "" if ready else str((available or {}).get("reason") or "PredictorNotReady")
    message = "" if ready else str((available or {}).get("message")
                                   or "the predictor Deployment is not available")
    previous = {c.get("type"): c for c in _status(isvc).get("conditions") or []}
    conditions = []
    for type_ in ("PredictorReady", "Ready"):
        cond: Obj = {"type": type_, "status": "True" if ready else "False",
                     "lastTransitionTime": stamp}
        if not ready:
            cond.update(reason=reason, message=message)
        old = previous.get(type_)
        if old is not None and old.get("status") == cond["status"]:
            cond["lastTransitionTime"] = old.get("lastTransitionTime", stamp)
        conditions.append(cond)
    return {"conditions": conditions,
            "observedGeneration": int(_meta(isvc).get("generation") or 1)}
