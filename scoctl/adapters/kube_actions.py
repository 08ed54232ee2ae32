"""What `KubernetesCluster` does to the cluster: delete the objects scoctl manages, cordon,
uncordon, evict, delete pods, drain and delete nodes."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from scoctl.adapters.cluster import ManagedKind
from scoctl.adapters.kube_client import Raw
from scoctl.adapters.kube_convert import (
    _meta,
    _str_map,
)
from scoctl.adapters.kube_reads import KSERVE_GROUP, KSERVE_PLURAL, KSERVE_VERSION, ClusterReads
from scoctl.core.demand import must_move
from scoctl.core.model import PodInfo
from scoctl.core.model.vocabulary import LABEL_MANAGED
from scoctl.errors import EvictionRefused, PermanentError, StillTerminating, TemporaryError

# A drain polls the node's pods this often while its evicted pods terminate (kubectl drain:
# every second), and waits this long past their grace period (the kubelet kills the
# containers at its end, then the API deletes the pod) before it calls the node still busy.
DRAIN_POLL_S = 0.25
DRAIN_SLACK_S = 5.0
DEFAULT_GRACE_S = 30  # a pod without terminationGracePeriodSeconds (the API's default)
# An eviction a PodDisruptionBudget refused (429) is tried again this often while the drain
# waits (kubectl drain: every 5 s), or after the Retry-After the refusal asked for when longer
# ("still being processed": 10 s); with nothing else to wait for, the drain retries for
# DRAIN_SLACK_S at most, so that a budget allowing nothing holds a pass a few seconds only.
DRAIN_EVICT_RETRY_S = 1.0


class ClusterActions(ClusterReads):
    """The acting half of `Cluster`; a drain reads the node's pods first, hence the reads."""

    def _read_managed(self, kind: ManagedKind, namespace: str, name: str) -> Raw | None:
        readers: dict[str, tuple[Callable[..., Any], tuple[str, ...]]] = {
            "Deployment": (self._apps.read_namespaced_deployment, (name, namespace)),
            "ReplicaSet": (self._apps.read_namespaced_replica_set, (name, namespace)),
            "Job": (self._batch.read_namespaced_job, (name, namespace)),
            "Pod": (self._core.read_namespaced_pod, (name, namespace)),
            "InferenceService": (self._custom.get_namespaced_custom_object,
                                 (KSERVE_GROUP, KSERVE_VERSION, namespace, KSERVE_PLURAL, name)),
        }
        if kind not in readers:
            raise PermanentError(f"scoctl does not delete {kind} objects")
        fn, args = readers[kind]
        return self._read_unless_gone(f"read {kind} {namespace}/{name}", fn, *args)

    def delete_managed(self, kind: ManagedKind, namespace: str, name: str) -> bool:
        """See `Cluster.delete_managed`."""
        current = self._read_managed(kind, namespace, name)
        if current is None:
            return False
        meta = _meta(current)
        if _str_map(meta.get("labels")).get(LABEL_MANAGED) != "true":
            raise PermanentError(
                f"refusing to delete {kind} {namespace}/{name}: it is not labelled "
                f"{LABEL_MANAGED}=true, and scoctl never deletes what it does not manage")
        body = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background",
                "preconditions": {"uid": meta.get("uid")}}
        deleters: dict[str, tuple[Callable[..., Any], tuple[Any, ...]]] = {
            "Deployment": (self._apps.delete_namespaced_deployment, (name, namespace)),
            "ReplicaSet": (self._apps.delete_namespaced_replica_set, (name, namespace)),
            "Job": (self._batch.delete_namespaced_job, (name, namespace)),
            "Pod": (self._core.delete_namespaced_pod, (name, namespace)),
            "InferenceService": (self._custom.delete_namespaced_custom_object,
                                 (KSERVE_GROUP, KSERVE_VERSION, namespace, KSERVE_PLURAL, name)),
        }
        delete, args = deleters[kind]
        return self._unless_gone(f"delete {kind} {namespace}/{name}", delete, *args, body=body)

    def _set_unschedulable(self, node: str, value: bool) -> None:
        resp = self._call(f"{'cordon' if value else 'uncordon'} node {node}",
                          self._core.patch_node, node, {"spec": {"unschedulable": value}},
                          _preload_content=False)
        resp.drain_conn()  # a connection pooled with its body unread garbles the next answer
        resp.release_conn()

    def cordon(self, node: str) -> None:
        """See `Cluster.cordon`."""
        self._set_unschedulable(node, True)

    def uncordon(self, node: str) -> None:
        """See `Cluster.uncordon`."""
        self._set_unschedulable(node, False)

    def label_node(self, node: str, labels: Mapping[str, str | None]) -> None:
        """See `Cluster.label_node`: a merge patch of ``metadata.labels`` (what ``kubectl label
        --overwrite`` sends), so labels the patch does not name stay."""
        resp = self._call(f"label node {node}", self._core.patch_node, node,
                          {"metadata": {"labels": dict(labels)}}, _preload_content=False)
        resp.drain_conn()
        resp.release_conn()

    def evict(self, namespace: str, name: str, uid: str | None = None) -> bool:
        """See `Cluster.evict`: with `uid`, a precondition, as ``kubectl drain`` does not but
        the Eviction API honours (pkg/registry/core/pod/storage/eviction.go hands the
        eviction's deleteOptions to the pod's delete, which answers 409 Conflict when the
        uid differs): the pod of that name now is another pod, the one meant is gone."""
        from kubernetes.client.exceptions import ApiException

        body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction",
                                "metadata": {"name": name, "namespace": namespace}}
        if uid:
            body["deleteOptions"] = {"preconditions": {"uid": uid}}

        def create() -> bool:
            try:
                self._core.create_namespaced_pod_eviction(name, namespace, body,
                                                          _request_timeout=self._timeout)
            except ApiException as exc:
                if uid and exc.status == 409:
                    return False  # another pod under that name: never evicted instead
                raise
            return True

        return self._or_gone(f"evict pod {namespace}/{name}", create) is True

    def delete_pod(self, namespace: str, name: str, *, grace_seconds: int | None = None
                   ) -> bool:
        """See `Cluster.delete_pod`."""
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds

        def delete(**kwargs: Any) -> None:
            response = self._core.delete_namespaced_pod(name, namespace, body=body,
                                                        _preload_content=False, **kwargs)
            response.drain_conn()  # the pod comes back: never leave it in the pooled socket
            response.release_conn()

        return self._unless_gone(f"delete pod {namespace}/{name}", delete)

    def drain(self, node: str, *, timeout: float,
              until: Callable[[], bool] | None = None) -> list[str]:
        """See `Cluster.drain`."""
        evicted: list[str] = []
        refused: dict[str, PodInfo] = {}
        waiting: dict[str, str] = {}  # namespace/name → uid of the pods whose end is awaited
        for pod in self.pods_on_node(node):
            if not must_move(pod):
                continue
            key = f"{pod.namespace}/{pod.name}"
            if pod.deleting:  # on its way already: no second eviction, but awaited too
                waiting[key] = pod.uid
                continue
            refused[key] = pod
        hint = self._evict_all(refused, evicted, waiting)
        left, waited, hint, cut = self._wait_gone(node, waiting, refused, evicted, hint,
                                                  timeout, until)
        if refused:
            raise EvictionRefused(
                f"drain of node {node}: eviction refused by a disruption budget for "
                f"{', '.join(sorted(refused))} after {waited:.0f} s (evicted {len(evicted)})",
                tuple(sorted(refused)), hint)
        if left:
            raise StillTerminating(
                f"drain of node {node}: {len(left)} pod(s) still terminating after "
                f"{waited:.0f} s ({', '.join(sorted(left))}); the node is not empty yet",
                tuple(sorted(left)), waited, cut_short=cut)
        return evicted

    def _evict_all(self, refused: dict[str, PodInfo], evicted: list[str],
                   waiting: dict[str, str]) -> float | None:
        """Evict each pod of `refused`; those evicted (or gone) leave it, the evicted ones move
        to `evicted` and `waiting`. Returns the longest Retry-After of the refusals."""
        hint: float | None = None
        for key, pod in list(refused.items()):
            try:
                if self.evict(pod.namespace, pod.name, pod.uid or None):
                    evicted.append(key)
                    waiting[key] = pod.uid
            except TemporaryError as exc:  # 429: a PodDisruptionBudget holds it for now
                if exc.delay is not None:
                    hint = max(hint or 0.0, exc.delay)
                continue
            del refused[key]
        return hint

    def _wait_gone(self, node: str, waiting: dict[str, str], refused: dict[str, PodInfo],
                   evicted: list[str], hint: float | None, timeout: float,
                   until: Callable[[], bool] | None = None
                   ) -> tuple[list[str], float, float | None, bool]:
        """Poll the node's pods until none of `waiting` is left (by uid: a pod recreated under
        the same name is another pod) and no eviction is refused, for at most `timeout`
        seconds or the longest grace period among them plus `DRAIN_SLACK_S`, or until
        `until` answers True; the refused evictions are tried again every
        `DRAIN_EVICT_RETRY_S` (or after their Retry-After) meanwhile. Returns what is left,
        the seconds waited, the last Retry-After, and whether `until` cut the wait short."""
        start = time.monotonic()
        bound: float | None = None
        retry_at = start + max(DRAIN_EVICT_RETRY_S, hint or 0.0)
        while True:
            pods = [p for p in self.pods_on_node(node)
                    if waiting.get(f"{p.namespace}/{p.name}") == p.uid]
            if bound is None:  # the grace periods as the deletions set them
                bound = min(timeout, DRAIN_SLACK_S + max(
                    (DEFAULT_GRACE_S if p.grace_seconds is None else p.grace_seconds
                     for p in pods), default=0))
            waited = time.monotonic() - start
            if refused and start + waited >= retry_at and waited < bound:
                tried = dict(refused)
                hint = self._evict_all(refused, evicted, waiting)
                retry_at = time.monotonic() + max(DRAIN_EVICT_RETRY_S, hint or 0.0)
                graces = [DEFAULT_GRACE_S if p.grace_seconds is None else p.grace_seconds
                          for k, p in tried.items() if k not in refused and k in waiting]
                if graces:  # evicted now: their grace periods count from now
                    bound = max(bound, min(timeout, waited + DRAIN_SLACK_S + max(graces)))
                continue
            if (not pods and not refused) or waited >= bound:
                return [f"{p.namespace}/{p.name}" for p in pods], waited, hint, False
            if until is not None and until():
                return [f"{p.namespace}/{p.name}" for p in pods], waited, hint, True
            time.sleep(max(0.0, min(DRAIN_POLL_S, bound - waited)))

    def delete_node(self, node: str) -> bool:
        """See `Cluster.delete_node`."""
        return self._unless_gone(f"delete node {node}", self._core.delete_node, node)
