"""The node agent's kube-controller-manager part for workloads: KServe's predictor, the
Deployment and ReplicaSet controllers (decisions in `k8s_workloads`, `k8s_controllers`),
written through the Kubernetes emulator's control API as the controllers' own API calls
(pods created through quota admission, deleted gracefully).

`Workloads.reconcile` runs before the scheduler each step (InferenceServices get their
predictor Deployments, Deployments their ReplicaSets and rollout steps, ReplicaSets their
pods); `Workloads.report` after it (ReplicaSet, Deployment and InferenceService status)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from scoctl.sim import k8s_controllers as controllers
from scoctl.sim import k8s_workloads as workloads

log = logging.getLogger("scoctl.sim.agent")

Obj = dict[str, Any]


class Api(Protocol):
    """The part of the agent's `SimApi` used here."""

    def k8s(self, op: str, **body: Any) -> Any: ...

    def batch(self, ops: Sequence[Mapping[str, Any]], *, stop_on_error: bool = False,
              chunk: int = ...) -> list[Obj]: ...

    def objects(self, kind: str) -> list[Obj]: ...


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name"))


def _controller_uid(obj: Mapping[str, Any]) -> str | None:
    ref = controllers.controller_ref(obj)
    return None if ref is None else str(ref.get("uid"))


def pods_by_owner(pods: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Pods by their controller's uid, in one pass."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        uid = _controller_uid(pod)
        if uid is not None:
            out.setdefault(uid, []).append(pod)
    return out


class Workloads:
    """The controllers' state between steps: the last pod-creation error per ReplicaSet."""

    def __init__(self, api: Api) -> None:
        self.api = api
        self.failures: dict[str, str] = {}  # ReplicaSet uid → the apiserver's refusal

    # -- before scheduling

    def reconcile(self, pods: Sequence[Mapping[str, Any]], node_count: int, stamp: str,
                  missing: Any) -> bool:
        """InferenceServices → Deployments → ReplicaSets → pods; returns whether pods
        changed. `missing` is the agent's `missing_pods` (the ReplicaSet controller's new
        pods)."""
        self._predictors()
        replicasets = self._deployments(stamp)
        return self._replicasets(replicasets, pods, node_count, stamp, missing)

    def _predictors(self) -> None:
        """KServe's raw reconciler: each InferenceService (RawDeployment mode, the default
        here) gets its predictor Deployment when it has none."""
        try:
            isvcs = self.api.objects("InferenceService")
        except RuntimeError:
            return  # its CRD is not installed
        if not isvcs:
            return
        have = {_key(d) for d in self.api.objects("Deployment")}
        for isvc in isvcs:
            if (isvc.get("metadata") or {}).get("deletionTimestamp"):
                continue
            dep = workloads.predictor_deployment(isvc)
            if _key(dep) in have:
                continue
            try:
                self.api.k8s("create", object=dep)
                log.info("InferenceService %s/%s: predictor Deployment %s created",
                         *_key(isvc), dep["metadata"]["name"])
            except RuntimeError as exc:
                log.warning("InferenceService %s/%s: predictor not created: %s",
                            *_key(isvc), exc)

    def _deployments(self, stamp: str) -> list[Obj]:
        """One sync of every Deployment (`k8s_workloads.sync_deployment`); returns the
        ReplicaSets as left."""
        replicasets = self.api.objects("ReplicaSet")
        by_ns: dict[str, list[Obj]] = {}
        for rs in replicasets:
            by_ns.setdefault(_key(rs)[0], []).append(rs)
        changed = False
        for dep in self.api.objects("Deployment"):
            if (dep.get("metadata") or {}).get("deletionTimestamp"):
                continue
            ns, name = _key(dep)
            sync = workloads.sync_deployment(dep, by_ns.get(ns, []), stamp)
            ops: list[Obj] = []
            if sync.create is not None:
                ops.append({"op": "create", "object": sync.create})
                log.info("Deployment %s/%s: ReplicaSet %s created (revision %s, %d replicas)",
                         ns, name, sync.create["metadata"]["name"], sync.revision,
                         sync.create["spec"]["replicas"])
            for rs_name, (count, notes) in sorted(sync.scale.items()):
                patch: Obj = {"spec": {"replicas": count}}
                if notes:
                    patch["metadata"] = {"annotations": dict(notes)}
                ops.append({"op": "patch", "kind": "ReplicaSet", "namespace": ns,
                            "name": rs_name, "patch": patch})
            ops += [{"op": "delete", "kind": "ReplicaSet", "namespace": ns, "name": n}
                    for n in sync.delete]
            if sync.revision is not None:
                ops.append({"op": "patch", "kind": "Deployment", "namespace": ns, "name": name,
                            "patch": {"metadata": {"annotations": {
                                workloads.REVISION: sync.revision}}}})
            if ops:
                changed = True
                for outcome in self.api.batch(ops):
                    if not outcome["ok"]:
                        log.info("Deployment %s/%s: %s %s", ns, name, outcome["code"],
                                 str(outcome["message"])[:300])
        return self.api.objects("ReplicaSet") if changed else replicasets

    def _replicasets(self, replicasets: Sequence[Mapping[str, Any]],
                     pods: Sequence[Mapping[str, Any]], node_count: int, stamp: str,
                     missing: Any) -> bool:
        """`manageReplicas`: new pods (through quota admission; a refusal is remembered for
        the ReplicaFailure condition) and the surplus deleted gracefully."""
        # replica_set.go `syncReplicaSet`: one being deleted manages no replicas
        replicasets = [rs for rs in replicasets
                       if not (rs.get("metadata") or {}).get("deletionTimestamp")]
        fresh: list[Obj] = missing(replicasets, pods, node_count, stamp)
        outcomes = self.api.batch([{"op": "create", "object": p} for p in fresh])
        failed: dict[str, str] = {}
        created = 0
        for pod, outcome in zip(fresh, outcomes, strict=True):
            uid = _controller_uid(pod)
            if outcome["ok"]:
                created += 1
            elif uid is not None:
                failed.setdefault(uid, str(outcome["message"]))
        if created:
            log.info("%d pods created by their ReplicaSets", created)
        self.failures = failed
        owned = pods_by_owner(pods)
        now = datetime.now(UTC)
        doomed: list[Obj] = []
        for rs in replicasets:
            uid = str((rs.get("metadata") or {}).get("uid"))
            mine = owned.get(uid, [])
            if sum(1 for p in mine if controllers.is_pod_active(p)) <= workloads.replicas_of(rs):
                continue
            for victim in workloads.surplus_pods(rs, mine, mine, now):
                ns, name = _key(victim)
                doomed.append({"op": "delete-pod", "namespace": ns, "name": name})
        if doomed:
            self.api.batch(doomed)
            log.info("%d surplus pods deleted by their ReplicaSets", len(doomed))
        return bool(fresh or doomed)

    # -- after scheduling

    def report(self, pods: Sequence[Mapping[str, Any]], stamp: str, index: Any,
               rs_status: Any) -> None:
        """ReplicaSet status (with ReplicaFailure), then Deployment status from them
        (`k8s_workloads.deployment_status`), then InferenceService status."""
        fresh: dict[str, Obj] = {}
        ops: list[Obj] = []
        for rs in self.api.objects("ReplicaSet"):
            meta = rs["metadata"]
            status = dict(rs_status(rs, index.candidates(rs)))
            conditions = workloads.replicaset_failure(
                rs, self.failures.get(str(meta.get("uid"))), stamp)
            status["conditions"] = conditions if conditions is not None else list(
                (rs.get("status") or {}).get("conditions") or [])
            if not status["conditions"]:
                status.pop("conditions")
            fresh[str(meta.get("uid"))] = {**rs, "status": status}
            if _comparable(status) != _comparable(rs.get("status") or {}):
                ops.append({"op": "patch", "kind": "ReplicaSet",
                            "namespace": meta.get("namespace"), "name": meta["name"],
                            "patch": {"status": {**status,
                                                 "conditions": status.get("conditions")}}})
        by_ns: dict[str, list[Obj]] = {}
        for rs in fresh.values():
            by_ns.setdefault(_key(rs)[0], []).append(rs)
        deployments = self.api.objects("Deployment")
        for dep in deployments:
            meta = dep["metadata"]
            owned = workloads.owned_replicasets(dep, by_ns.get(_key(dep)[0], []))
            new_rs = workloads.find_new_replicaset(dep, owned)
            status = workloads.deployment_status(dep, new_rs, owned, stamp)
            if _comparable(status) != _comparable(dep.get("status") or {}):
                ops.append({"op": "patch", "kind": "Deployment",
                            "namespace": meta.get("namespace"), "name": meta["name"],
                            "patch": {"status": status}})
                dep["status"] = status
        self._isvc_status(deployments, stamp, ops)
        for outcome in self.api.batch(ops):
            if not outcome["ok"]:
                log.info("status not written: %s %s", outcome["code"],
                         str(outcome["message"])[:300])

    def _isvc_status(self, deployments: Sequence[Mapping[str, Any]], stamp: str,
                     ops: list[Obj]) -> None:
        try:
            isvcs = self.api.objects("InferenceService")
        except RuntimeError:
            return
        by_key = {_key(d): d for d in deployments}
        for isvc in isvcs:
            ns, name = _key(isvc)
            status = workloads.isvc_status(isvc, by_key.get((ns, f"{name}-predictor")), stamp)
            if _comparable(status) != _comparable(isvc.get("status") or {}):
                ops.append({"op": "patch", "kind": "InferenceService", "namespace": ns,
                            "name": name, "patch": {"status": status}})


def _comparable(status: Mapping[str, Any]) -> Any:
    conditions = [{k: v for k, v in c.items() if not k.endswith("Time")}
                  for c in status.get("conditions") or []]
    return {**status, "conditions": conditions}
