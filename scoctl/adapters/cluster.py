"""The `Cluster` seam: what scoctl asks of a Kubernetes cluster, in its own words.

The stages depend on this Protocol only; `scoctl.adapters.kubernetes.KubernetesCluster` is the
real implementation (official client), and stage tests may use a fake of it. Every method returns
plain frozen values (`scoctl.core.model.kubernetes`) and raises only:

* `scoctl.errors.TemporaryError` — the API was unreachable, timed out, answered 429/5xx or a
  conflict; retry on the next tick (``delay`` carries Retry-After when the server sent one);
* `scoctl.errors.PermanentError` — the API refused (401/403/400/422), an object was unreadable,
  or scoctl refused to act (deleting an object it does not manage); a person has to look.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Literal, Protocol

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

__all__ = ["MANAGED_KINDS", "Cluster", "ManagedKind"]

ManagedKind = Literal["Deployment", "ReplicaSet", "Job", "Pod", "InferenceService"]
MANAGED_KINDS: tuple[ManagedKind, ...] = ("Deployment", "ReplicaSet", "Job", "Pod",
                                          "InferenceService")


class Cluster(Protocol):
    """A Kubernetes cluster, reduced to what scoctl reads and does."""

    def nodes(self) -> list[NodeInfo]:
        """Every node with labels, taints, allocatable, Ready, cordon state and provider id.

        Raises TemporaryError or PermanentError.
        """
        ...

    def pods(
        self, namespace: str | None = None, label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> list[PodInfo]:
        """Pods (all namespaces when `namespace` is None), optionally filtered server-side.

        Raises TemporaryError or PermanentError.
        """
        ...

    def pods_on_node(self, node: str) -> list[PodInfo]:
        """Pods bound to `node`. Raises TemporaryError or PermanentError."""
        ...

    def watch_pods(
        self, resource_version: str | None, timeout: float, *, namespace: str | None = None,
        label_selector: str | None = None, field_selector: str | None = None,
    ) -> Iterator[PodEvent]:
        """Stream pod changes after `resource_version` for about `timeout` seconds, then end.

        Without a resourceVersion, or when the server answers 410 Gone, the pods are re-listed
        and a ``RESYNC`` event is yielded before watching on from the list's version; a watch the
        server closes early is resumed from the last version seen.
        Raises TemporaryError (API down, 5xx) or PermanentError.
        """
        ...

    def watch_nodes(self, resource_version: str | None, timeout: float) -> Iterator[NodeEvent]:
        """Stream node changes as `watch_pods` streams pods (RESYNC first and after 410 Gone).

        Raises TemporaryError (API down, 5xx) or PermanentError.
        """
        ...

    def deployments(
        self, namespace: str | None = None, label_selector: str | None = None
    ) -> list[DeploymentInfo]:
        """Deployments. Raises TemporaryError or PermanentError."""
        ...

    def replicasets(
        self, namespace: str | None = None, label_selector: str | None = None
    ) -> list[ReplicaSetInfo]:
        """ReplicaSets. Raises TemporaryError or PermanentError."""
        ...

    def jobs(
        self, namespace: str | None = None, label_selector: str | None = None
    ) -> list[JobInfo]:
        """batch/v1 Jobs. Raises TemporaryError or PermanentError."""
        ...

    def inference_services(self, namespace: str | None = None) -> list[InferenceServiceInfo]:
        """KServe InferenceServices; an empty list when the CRD is not installed.

        Raises TemporaryError or PermanentError.
        """
        ...

    def pod_groups(self, namespace: str | None = None) -> list[PodGroupInfo]:
        """scheduler-plugins PodGroups (scheduling.x-k8s.io/v1alpha1) and their
        ``spec.minMember`` (design: Gangs); an empty list when the API is not served (the CRD is
        not installed: 404).

        Raises TemporaryError or PermanentError.
        """
        ...

    def resource_quotas(self, namespace: str | None = None) -> list[ResourceQuotaInfo]:
        """ResourceQuotas with hard and used amounts. Raises TemporaryError or PermanentError."""
        ...

    def volume_claims(self, namespace: str | None = None) -> list[VolumeClaimInfo]:
        """PersistentVolumeClaims and the volume each is bound to (design: Constraints).

        Raises TemporaryError or PermanentError.
        """
        ...

    def daemonsets(self) -> list[DaemonSetInfo]:
        """Every namespace's DaemonSets (their pods count against a new node's allocatable,
        design: Constraints). Raises TemporaryError or PermanentError."""
        ...

    def volumes(self) -> list[VolumeInfo]:
        """PersistentVolumes and their zones (design: Constraints). Raises TemporaryError or
        PermanentError."""
        ...

    def events(
        self, namespace: str | None = None, *, involved_kind: str | None = None,
        involved_name: str | None = None, reason: str | None = None,
    ) -> list[EventInfo]:
        """Events, optionally about one object or with one reason.

        Raises TemporaryError or PermanentError.
        """
        ...

    def delete_managed(self, kind: ManagedKind, namespace: str, name: str) -> bool:
        """Delete an object scoctl manages (label ``sco/managed=true``), its dependents in the
        background. False when it is already gone.

        Raises PermanentError when the object is not labelled ``sco/managed=true`` (scoctl never
        deletes what it does not manage), TemporaryError when the API is unavailable.
        """
        ...

    def cordon(self, node: str) -> None:
        """Mark the node unschedulable. Raises TemporaryError or PermanentError (also if gone)."""
        ...

    def uncordon(self, node: str) -> None:
        """Mark the node schedulable again. Raises TemporaryError or PermanentError."""
        ...

    def label_node(self, node: str, labels: Mapping[str, str | None]) -> None:
        """Set these labels on the node, remove those given as None (others untouched; design:
        Drift meta drift). Raises
        TemporaryError or PermanentError (also if gone)."""
        ...

    def evict(self, namespace: str, name: str, uid: str | None = None) -> bool:
        """Evict one pod through the Eviction API; False when it is already gone. With `uid`
        the eviction carries it as a precondition (``deleteOptions.preconditions.uid``): a pod
        recreated under the same name since it was read is not evicted instead (409 Conflict:
        the pod meant is gone, False).

        Raises TemporaryError (a PodDisruptionBudget blocks it: 429) or PermanentError.
        """
        ...

    def delete_pod(self, namespace: str, name: str, *, grace_seconds: int | None = None
                   ) -> bool:
        """Delete one pod, PodDisruptionBudgets notwithstanding (the last resort of a drain
        before a reclaim), within `grace_seconds` (None: the pod's own grace period). False
        when it is already gone.

        Raises TemporaryError or PermanentError.
        """
        ...

    def drain(self, node: str, *, timeout: float,
              until: Callable[[], bool] | None = None) -> list[str]:
        """Evict every pod on the node except DaemonSet, mirror and finished pods, then wait
        until none of them (nor a pod already being deleted there) is left, as ``kubectl
        drain`` does: an evicted pod stays Terminating for up to its grace period. The wait
        ends after `timeout` seconds, or a little after the longest grace period of the pods
        waited for, or as soon as `until` (asked between polls) answers True — the
        evictions were sent once, and what is still left raises as at the end of a wait.
        Returns the evicted ``namespace/name``s. The node should be cordoned first.

        An eviction a PodDisruptionBudget refuses (429) is tried again while the drain waits
        (not before the refusal's Retry-After).

        Raises EvictionRefused (a TemporaryError) when evictions are still refused as the wait
        ends, StillTerminating (a TemporaryError) when pods are still terminating (either way
        the node is not empty: do not delete its server), TemporaryError, PermanentError."""
        ...

    def delete_node(self, node: str) -> bool:
        """Delete the Node object; False when it is already gone.

        Raises TemporaryError or PermanentError.
        """
        ...

    def close(self) -> None:
        """Release connections."""
        ...
