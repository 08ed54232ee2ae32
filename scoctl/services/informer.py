"""List-then-watch caches of a cluster's pods and nodes, for the controller (design: Controller).

`Informer` runs one watch thread per namespace for the unfinished pods and one for the nodes
(`pump`: resume from the last resourceVersion, re-list on 410 Gone, back off and
reconnect when the API server goes away), all into one queue the controller drains. The pod
cache itself is the watch stage's `Follower` (which also opens the batch window); the node
cache lives here.

`CachedCluster` is the `Cluster` the controller hands to the stages: node and pod reads come
from the caches once they have synced (so a pass lists no pods and no nodes: the intake cost
follows demand, not the fleet), everything else — and `pods_on_node`, the fresh look a
scale-down takes before it drains, and the bootstrap token calls (`BootstrapTokens`: reconcile
prunes the join tokens through it, design: Operating) — goes to the API.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from scoctl.adapters.bootstrap import BootstrapTokens
from scoctl.adapters.kube_events import EventRecorder
from scoctl.core.model import NodeEvent, PodEvent
from scoctl.core.model.vocabulary import LABEL_MANAGED
from scoctl.errors import ApiError, PermanentError

if TYPE_CHECKING:
    from scoctl.adapters.cluster import Cluster, ManagedKind
    from scoctl.core.model import (
        DeploymentInfo,
        EventInfo,
        InferenceServiceInfo,
        JobInfo,
        NodeInfo,
        PodInfo,
        ReplicaSetInfo,
        ResourceQuotaInfo,
        TokenSecret,
    )
    from scoctl.core.model.kubernetes import (
        DaemonSetInfo,
        PodGroupInfo,
        VolumeClaimInfo,
        VolumeInfo,
    )

E = TypeVar("E")
Item = PodEvent | NodeEvent | Exception
# the pods intake reads: every pod not finished (finished pods are no demand and keep no node
# busy), listed once per pass or watched; pending ones and those on scoctl's nodes are kept
LIVE_SELECTOR = "status.phase!=Succeeded,status.phase!=Failed"


def is_managed_node(node: NodeInfo | None) -> bool:
    """A node scoctl launched (its user-data labels it ``sco/managed=true``)."""
    return node is not None and node.labels.get(LABEL_MANAGED) == "true"


class Informer:
    """The watch threads and the node cache. Start with `start`, end with `stop`."""

    def __init__(self, cluster: Cluster, namespaces: tuple[str, ...], *,
                 timeout: float = 30.0) -> None:
        self.cluster = cluster
        self.namespaces: tuple[str | None, ...] = namespaces or (None,)
        self.timeout = timeout
        self.events: queue.Queue[Item] = queue.Queue()
        self.nodes: dict[str, NodeInfo] = {}
        self.nodes_synced = False
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> Informer:
        watches: list[tuple[str, Callable[[str | None, float], Iterator[Item]]]] = [
            (f"pods-{ns or 'all'}", pod_watch(self.cluster, ns)) for ns in self.namespaces]
        watches.append(("nodes", self.cluster.watch_nodes))
        for name, watch in watches:
            thread = threading.Thread(target=pump, name=f"scoctl-watch-{name}",
                                      args=(watch, self.events, self._stop, self.timeout),
                                      daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        """Ask the watch threads to end. A watch in flight ends at its timeout, and the threads
        are daemons, so stopping (and a process exiting) never waits for them."""
        self._stop.set()
        self._threads.clear()

    def drain(self, wait: float) -> list[Item]:
        """Every queued item, waiting up to `wait` seconds for the first one."""
        out: list[Item] = []
        try:
            out.append(self.events.get(timeout=wait) if wait > 0 else self.events.get_nowait())
            while True:
                out.append(self.events.get_nowait())
        except queue.Empty:
            return out

    def apply_nodes(self, event: NodeEvent) -> bool:
        """Apply a node event to the cache; True when a node scoctl launched appeared, went,
        or changed readiness, labels or cordon (a reconcile should look at it)."""
        if event.type == "RESYNC":
            old = self.nodes
            self.nodes = {n.name: n for n in event.nodes}
            self.nodes_synced = True
            names = {k for k, n in old.items() if is_managed_node(n)} | {
                k for k, n in self.nodes.items() if is_managed_node(n)}
            return any(_changed(old.get(k), self.nodes.get(k)) for k in names)
        if event.node is None:
            return False
        before = self.nodes.get(event.node.name)
        if event.type == "DELETED":
            self.nodes.pop(event.node.name, None)
            return is_managed_node(before)
        self.nodes[event.node.name] = event.node
        return (is_managed_node(before) or is_managed_node(event.node)) and _changed(
            before, event.node)


def _changed(before: NodeInfo | None, after: NodeInfo | None) -> bool:
    if before is None or after is None:
        return before is not after
    return (before.ready, before.unschedulable, dict(before.labels), before.taints) != (
        after.ready, after.unschedulable, dict(after.labels), after.taints)


class CachedCluster:
    """A `Cluster` (and `BootstrapTokens`) whose node and pod reads come from watch caches
    once they synced."""

    def __init__(self, cluster: Cluster, pods: Callable[[], list[PodInfo] | None],
                 nodes: Callable[[], list[NodeInfo] | None]) -> None:
        self.cluster = cluster
        self._pods = pods
        self._nodes = nodes

    def nodes(self) -> list[NodeInfo]:
        """See `Cluster.nodes` (from the node cache)."""
        cached = self._nodes()
        return list(cached) if cached is not None else self.cluster.nodes()

    def pods(self, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> list[PodInfo]:
        """See `Cluster.pods` (from the cache for the selectors it can answer: none and the
        unfinished pods)."""
        cached = self._pods()
        if cached is None or label_selector or field_selector not in (None, "", LIVE_SELECTOR):
            return self.cluster.pods(namespace, label_selector, field_selector)
        return [p for p in cached if namespace is None or p.namespace == namespace]

    def pods_on_node(self, node: str) -> list[PodInfo]:
        """See `Cluster.pods_on_node` (always from the API: the look before a drain)."""
        return self.cluster.pods_on_node(node)

    def watch_pods(self, resource_version: str | None, timeout: float, *,
                   namespace: str | None = None, label_selector: str | None = None,
                   field_selector: str | None = None) -> Iterator[PodEvent]:
        """See `Cluster.watch_pods`."""
        return self.cluster.watch_pods(resource_version, timeout, namespace=namespace,
                                       label_selector=label_selector,
                                       field_selector=field_selector)

    def watch_nodes(self, resource_version: str | None, timeout: float) -> Iterator[NodeEvent]:
        """See `Cluster.watch_nodes`."""
        return self.cluster.watch_nodes(resource_version, timeout)

    def deployments(self, namespace: str | None = None,
                    label_selector: str | None = None) -> list[DeploymentInfo]:
        """See `Cluster.deployments`."""
        return self.cluster.deployments(namespace, label_selector)

    def replicasets(self, namespace: str | None = None,
                    label_selector: str | None = None) -> list[ReplicaSetInfo]:
        """See `Cluster.replicasets`."""
        return self.cluster.replicasets(namespace, label_selector)

    def jobs(self, namespace: str | None = None,
             label_selector: str | None = None) -> list[JobInfo]:
        """See `Cluster.jobs`."""
        return self.cluster.jobs(namespace, label_selector)

    def inference_services(self, namespace: str | None = None) -> list[InferenceServiceInfo]:
        """See `Cluster.inference_services`."""
        return self.cluster.inference_services(namespace)

    def pod_groups(self, namespace: str | None = None) -> list[PodGroupInfo]:
        """See `Cluster.pod_groups` (from the API: read per pass, only while a pod group
        waits)."""
        return self.cluster.pod_groups(namespace)

    def resource_quotas(self, namespace: str | None = None) -> list[ResourceQuotaInfo]:
        """See `Cluster.resource_quotas`."""
        return self.cluster.resource_quotas(namespace)

    def volume_claims(self, namespace: str | None = None) -> list[VolumeClaimInfo]:
        """See `Cluster.volume_claims`."""
        return self.cluster.volume_claims(namespace)

    def daemonsets(self) -> list[DaemonSetInfo]:
        """See `Cluster.daemonsets`."""
        return self.cluster.daemonsets()

    def volumes(self) -> list[VolumeInfo]:
        """See `Cluster.volumes`."""
        return self.cluster.volumes()

    def events(self, namespace: str | None = None, *, involved_kind: str | None = None,
               involved_name: str | None = None, reason: str | None = None,
               ) -> list[EventInfo]:
        """See `Cluster.events`."""
        return self.cluster.events(namespace, involved_kind=involved_kind,
                                   involved_name=involved_name, reason=reason)

    def delete_managed(self, kind: ManagedKind, namespace: str, name: str) -> bool:
        """See `Cluster.delete_managed`."""
        return self.cluster.delete_managed(kind, namespace, name)

    def cordon(self, node: str) -> None:
        """See `Cluster.cordon`."""
        self.cluster.cordon(node)

    def uncordon(self, node: str) -> None:
        """See `Cluster.uncordon`."""
        self.cluster.uncordon(node)

    def label_node(self, node: str, labels: Mapping[str, str | None]) -> None:
        """See `Cluster.label_node`."""
        self.cluster.label_node(node, labels)

    def evict(self, namespace: str, name: str, uid: str | None = None) -> bool:
        """See `Cluster.evict`."""
        return self.cluster.evict(namespace, name, uid)

    def drain(self, node: str, *, timeout: float,
              until: Callable[[], bool] | None = None) -> list[str]:
        """See `Cluster.drain`."""
        return self.cluster.drain(node, timeout=timeout, until=until)

    def delete_pod(self, namespace: str, name: str, *, grace_seconds: int | None = None
                   ) -> bool:
        """See `Cluster.delete_pod`."""
        return self.cluster.delete_pod(namespace, name, grace_seconds=grace_seconds)

    def delete_node(self, node: str) -> bool:
        """See `Cluster.delete_node`."""
        return self.cluster.delete_node(node)

    def create_bootstrap_token(self, manifest: Mapping[str, Any]) -> None:
        """See `BootstrapTokens.create_bootstrap_token`."""
        self._tokens().create_bootstrap_token(manifest)

    def bootstrap_tokens(self) -> list[TokenSecret]:
        """See `BootstrapTokens.bootstrap_tokens`."""
        return self._tokens().bootstrap_tokens()

    def delete_bootstrap_token(self, name: str) -> bool:
        """See `BootstrapTokens.delete_bootstrap_token`."""
        return self._tokens().delete_bootstrap_token(name)

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> bool:
        """See `EventRecorder.create_event`."""
        return self._recorder().create_event(namespace, body)

    def read_event(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        """See `EventRecorder.read_event`."""
        return self._recorder().read_event(namespace, name)

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        """See `EventRecorder.patch_event`."""
        return self._recorder().patch_event(namespace, name, patch)

    def _recorder(self) -> EventRecorder:
        if not isinstance(self.cluster, EventRecorder):
            raise PermanentError("this Kubernetes adapter cannot write Events")
        return self.cluster

    def _tokens(self) -> BootstrapTokens:
        if not isinstance(self.cluster, BootstrapTokens):
            raise PermanentError("this Kubernetes adapter cannot hold bootstrap tokens")
        return self.cluster

    def close(self) -> None:
        """The wrapped cluster is closed by whoever opened it."""


def pump(watch: Callable[[str | None, float], Iterator[E]], out: queue.Queue[E | Exception],
         stop: threading.Event, timeout: float) -> None:
    """Feed the events of `watch(resource_version, timeout)` into `out` until `stop`; API
    failures are put on the queue and retried with back-off, 0.5 s doubling to 10 s (the
    adapter re-lists after 410 Gone and on the first watch)."""
    rv: str | None = None
    failures = 0
    while not stop.is_set():
        try:
            for event in watch(rv, timeout):
                out.put(event)
                rv = getattr(event, "resource_version", None) or rv
                failures = 0
                if stop.is_set():
                    return
        except ApiError as exc:
            out.put(exc)
            failures += 1
            stop.wait(min(10.0, 0.25 * 2 ** min(failures, 6)))


def pod_watch(cluster: Cluster, namespace: str | None,
              ) -> Callable[[str | None, float], Iterator[PodEvent]]:
    """The watch of the unfinished pods of `namespace` (all when None) that intake caches."""

    def watch(rv: str | None, timeout: float) -> Iterator[PodEvent]:
        return cluster.watch_pods(rv, timeout, namespace=namespace,
                                  field_selector=LIVE_SELECTOR)
    return watch
