"""What `KubernetesCluster` reads: nodes, pods, Deployments, ReplicaSets, Jobs,
InferenceServices, PodGroups, ResourceQuotas, Events, DaemonSets, PersistentVolumeClaims and
PersistentVolumes, listed in pages as raw JSON, and the pod and node
watches (the client's `Watch` with model deserialisation, as the client intends: its raw mode
mishandles 410 events)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from scoctl.adapters.kube_client import KubeClient, Raw
from scoctl.adapters.kube_convert import (
    _convert_all,
    daemonset_info,
    deployment_info,
    event_info,
    inference_service_info,
    job_info,
    node_info,
    pod_group_info,
    pod_info,
    replicaset_info,
    resource_quota_info,
    volume_claim_info,
    volume_info,
)
from scoctl.bulk import collector_paused
from scoctl.core.model import (
    DeploymentInfo,
    EventInfo,
    InferenceServiceInfo,
    JobInfo,
    NodeEvent,
    NodeInfo,
    PodEvent,
    PodInfo,
    ReplicaSetInfo,
    ResourceQuotaInfo,
)
from scoctl.core.model.kubernetes import (
    DaemonSetInfo,
    PodGroupInfo,
    VolumeClaimInfo,
    VolumeInfo,
)

KSERVE_GROUP = "serving.kserve.io"
KSERVE_VERSION = "v1beta1"
KSERVE_PLURAL = "inferenceservices"
# scheduler-plugins' coscheduling PodGroup (manifests/coscheduling/crd.yaml)
PODGROUP_GROUP = "scheduling.x-k8s.io"
PODGROUP_VERSION = "v1alpha1"
PODGROUP_PLURAL = "podgroups"
T = TypeVar("T")


class ClusterReads(KubeClient):
    """The reading half of `Cluster` (see `scoctl.adapters.cluster` for the errors)."""

    def nodes(self) -> list[NodeInfo]:
        """See `Cluster.nodes`."""
        items, _ = self._list_raw("list nodes", self._core.list_node)
        return _convert_all(items, node_info, "node")

    def _pods_raw(self, namespace: str | None, label_selector: str | None,
                  field_selector: str | None) -> tuple[list[Raw], str]:
        kwargs: dict[str, Any] = {}
        if label_selector:
            kwargs["label_selector"] = label_selector
        if field_selector:
            kwargs["field_selector"] = field_selector
        if namespace:
            return self._list_raw("list pods", self._core.list_namespaced_pod, namespace,
                                  **kwargs)
        return self._list_raw("list pods", self._core.list_pod_for_all_namespaces, **kwargs)

    def pods(self, namespace: str | None = None, label_selector: str | None = None,
             field_selector: str | None = None) -> list[PodInfo]:
        """See `Cluster.pods`."""
        with collector_paused():
            items, _ = self._pods_raw(namespace, label_selector, field_selector)
            return _convert_all(items, pod_info, "pod")

    def pods_on_node(self, node: str) -> list[PodInfo]:
        """See `Cluster.pods_on_node`."""
        return self.pods(field_selector=f"spec.nodeName={node}")

    def watch_pods(self, resource_version: str | None, timeout: float, *,
                   namespace: str | None = None, label_selector: str | None = None,
                   field_selector: str | None = None) -> Iterator[PodEvent]:
        """See `Cluster.watch_pods`."""
        fn: Callable[..., Any] = (self._core.list_namespaced_pod if namespace
                                  else self._core.list_pod_for_all_namespaces)

        def relist() -> tuple[str, PodEvent]:
            with collector_paused():
                items, rv = self._pods_raw(namespace, label_selector, field_selector)
                pods = tuple(_convert_all(items, pod_info, "pod"))
            return rv, PodEvent("RESYNC", rv, pods=pods)

        def event(kind: Any, rv: str, raw: Raw) -> PodEvent:
            return PodEvent(kind, rv, pod=pod_info(raw))

        yield from self._watch("pods", fn, (namespace,) if namespace else (), relist, event,
                               resource_version, timeout, label_selector=label_selector,
                               field_selector=field_selector)

    def watch_nodes(self, resource_version: str | None, timeout: float) -> Iterator[NodeEvent]:
        """See `Cluster.watch_nodes`."""

        def relist() -> tuple[str, NodeEvent]:
            items, rv = self._list_raw("list nodes", self._core.list_node)
            return rv, NodeEvent("RESYNC", rv, nodes=tuple(_convert_all(items, node_info,
                                                                        "node")))

        def event(kind: Any, rv: str, raw: Raw) -> NodeEvent:
            return NodeEvent(kind, rv, node=node_info(raw))

        yield from self._watch("nodes", self._core.list_node, (), relist, event,
                               resource_version, timeout)

    def _namespaced_list(self, doing: str, all_fn: Callable[..., Any],
                            ns_fn: Callable[..., Any], namespace: str | None,
                            label_selector: str | None, convert: Callable[[Raw], T],
                            what: str, **extra: Any) -> list[T]:
        kwargs: dict[str, Any] = dict(extra)
        if label_selector:
            kwargs["label_selector"] = label_selector
        if namespace:
            items, _ = self._list_raw(doing, ns_fn, namespace, **kwargs)
        else:
            items, _ = self._list_raw(doing, all_fn, **kwargs)
        return _convert_all(items, convert, what)

    def deployments(self, namespace: str | None = None,
                    label_selector: str | None = None) -> list[DeploymentInfo]:
        """See `Cluster.deployments`."""
        return self._namespaced_list("list deployments",
                                     self._apps.list_deployment_for_all_namespaces,
                                     self._apps.list_namespaced_deployment, namespace,
                                     label_selector, deployment_info, "deployment")

    def replicasets(self, namespace: str | None = None,
                    label_selector: str | None = None) -> list[ReplicaSetInfo]:
        """See `Cluster.replicasets`."""
        return self._namespaced_list("list replicasets",
                                     self._apps.list_replica_set_for_all_namespaces,
                                     self._apps.list_namespaced_replica_set, namespace,
                                     label_selector, replicaset_info, "replicaset")

    def jobs(self, namespace: str | None = None,
             label_selector: str | None = None) -> list[JobInfo]:
        """See `Cluster.jobs`."""
        return self._namespaced_list("list jobs", self._batch.list_job_for_all_namespaces,
                                     self._batch.list_namespaced_job, namespace, label_selector,
                                     job_info, "job")

    def resource_quotas(self, namespace: str | None = None) -> list[ResourceQuotaInfo]:
        """See `Cluster.resource_quotas`."""
        return self._namespaced_list("list resourcequotas",
                                     self._core.list_resource_quota_for_all_namespaces,
                                     self._core.list_namespaced_resource_quota, namespace, None,
                                     resource_quota_info, "resourcequota")

    def volume_claims(self, namespace: str | None = None) -> list[VolumeClaimInfo]:
        """See `Cluster.volume_claims`."""
        return self._namespaced_list(
            "list persistentvolumeclaims",
            self._core.list_persistent_volume_claim_for_all_namespaces,
            self._core.list_namespaced_persistent_volume_claim, namespace, None,
            volume_claim_info, "persistentvolumeclaim")

    def daemonsets(self) -> list[DaemonSetInfo]:
        """See `Cluster.daemonsets`."""
        items, _ = self._list_raw("list daemonsets", self._apps.list_daemon_set_for_all_namespaces)
        return _convert_all(items, daemonset_info, "daemonset")

    def volumes(self) -> list[VolumeInfo]:
        """See `Cluster.volumes`."""
        items, _ = self._list_raw("list persistentvolumes", self._core.list_persistent_volume)
        return _convert_all(items, volume_info, "persistentvolume")

    def events(self, namespace: str | None = None, *, involved_kind: str | None = None,
               involved_name: str | None = None, reason: str | None = None) -> list[EventInfo]:
        """See `Cluster.events`."""
        fields = [f"involvedObject.kind={involved_kind}"] if involved_kind else []
        if involved_name:
            fields.append(f"involvedObject.name={involved_name}")
        if reason:
            fields.append(f"reason={reason}")
        extra = {"field_selector": ",".join(fields)} if fields else {}
        return self._namespaced_list("list events",
                                     self._core.list_event_for_all_namespaces,
                                     self._core.list_namespaced_event, namespace, None,
                                     event_info, "event", **extra)

    def inference_services(self, namespace: str | None = None) -> list[InferenceServiceInfo]:
        """See `Cluster.inference_services`."""
        if namespace:
            page = self._read_unless_gone(
                "list inferenceservices", self._custom.list_namespaced_custom_object,
                KSERVE_GROUP, KSERVE_VERSION, namespace, KSERVE_PLURAL)
        else:
            page = self._read_unless_gone(
                "list inferenceservices", self._custom.list_cluster_custom_object,
                KSERVE_GROUP, KSERVE_VERSION, KSERVE_PLURAL)
        if page is None:  # the KServe CRD is not installed
            return []
        return _convert_all(page.get("items") or [], inference_service_info, "inferenceservice")

    def pod_groups(self, namespace: str | None = None) -> list[PodGroupInfo]:
        """See `Cluster.pod_groups`."""
        if namespace:
            page = self._read_unless_gone(
                "list podgroups", self._custom.list_namespaced_custom_object,
                PODGROUP_GROUP, PODGROUP_VERSION, namespace, PODGROUP_PLURAL)
        else:
            page = self._read_unless_gone(
                "list podgroups", self._custom.list_cluster_custom_object,
                PODGROUP_GROUP, PODGROUP_VERSION, PODGROUP_PLURAL)
        if page is None:  # the PodGroup CRD is not installed: the API is not served
            return []
        return _convert_all(page.get("items") or [], pod_group_info, "podgroup")
