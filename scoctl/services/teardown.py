"""Teardown: the one code path that deletes a failed workload's Kubernetes objects (design:
Statuses).

When a deployment or inference workload turns inactive (DD-0018's fail-fast on a quota block,
or a pod no node can ever hold), whichever stage saw it — `watch` or `reconcile` — calls
`teardown_workload`. It deletes only objects labelled ``sco/managed=true`` (the adapter refuses
the others too), never with ``--no-teardown``, and records what it did as one ``TEARDOWN``
event (logged, no status change).

Deleting a Deployment takes its ReplicaSets and pods with it (background propagation); an
InferenceService takes its predictor Deployment.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from scoctl.adapters.cluster import Cluster
from scoctl.core.demand import KSERVE_ISVC_LABEL
from scoctl.core.intake.common import ObjectRef
from scoctl.core.model import NewEvent, WorkloadRecord
from scoctl.core.model.vocabulary import LABEL_MANAGED, LABEL_WORKLOAD
from scoctl.errors import PermanentError, TemporaryError
from scoctl.state import Store

log = logging.getLogger(__name__)

TEARDOWN_TOKEN = "TEARDOWN"
TORN_DOWN_KINDS = frozenset({"deployment", "inference"})


@dataclass(frozen=True)
class TeardownResult:
    """What a teardown did: deleted, already gone, kept (not managed or refused), failed."""

    workload: str
    deleted: tuple[str, ...] = ()
    gone: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()
    skipped: str = ""  # why nothing was attempted (disabled, not a deployment)
    errors: tuple[str, ...] = field(default=(), repr=False)

    def as_dict(self) -> dict[str, object]:
        """The event detail and the JSON summary entry."""
        out: dict[str, object] = {"workload": self.workload, "deleted": list(self.deleted),
                                  "gone": list(self.gone), "kept": list(self.kept),
                                  "failed": list(self.failed)}
        if self.skipped:
            out["skipped"] = self.skipped
        if self.errors:
            out["errors"] = list(self.errors)
        return out


def find_objects(cluster: Cluster, workload: WorkloadRecord,
                 workload_label: str = LABEL_WORKLOAD) -> list[ObjectRef]:
    """The Kubernetes objects of a workload, for callers that only have its row (`reconcile`):
    InferenceServices named after it or labelled with it (inference), else Deployments named
    after it or labelled with it, in the row's namespace when it has one.

    Raises TemporaryError / PermanentError from the cluster.
    """
    slug, namespace = workload.slug, workload.namespace

    def ours(name: str, labels: Mapping[str, str], ns: str) -> bool:
        if namespace and ns != namespace:
            return False
        return name == slug or labels.get(workload_label) == slug

    refs: list[ObjectRef] = []
    if workload.kind == "inference":
        for isvc in cluster.inference_services(namespace):
            if ours(isvc.name, isvc.labels, isvc.namespace):
                refs.append(ObjectRef("InferenceService", isvc.namespace, isvc.name,
                                      isvc.labels.get(LABEL_MANAGED) == "true"))
        if refs:
            return refs
    for dep in cluster.deployments(namespace):
        if dep.labels.get(KSERVE_ISVC_LABEL):
            continue  # a predictor: its InferenceService owns it
        if ours(dep.name, dep.labels, dep.namespace):
            refs.append(ObjectRef("Deployment", dep.namespace, dep.name,
                                  dep.labels.get(LABEL_MANAGED) == "true"))
    return refs


def teardown_workload(store: Store, cluster: Cluster | None, workload: WorkloadRecord, *,
                      refs: Sequence[ObjectRef] | None = None, enabled: bool = True,
                      workload_label: str = LABEL_WORKLOAD) -> TeardownResult:
    """Delete the Kubernetes objects of an inactive deployment / inference workload.

    `refs` are the objects the caller already knows (the watch decision names them); without
    them they are looked up (`find_objects`). Objects not labelled ``sco/managed=true`` are
    kept, and so is everything when `enabled` is False (``--no-teardown``). The outcome is
    logged as a ``TEARDOWN`` event. Never raises for one object: per-object failures are
    recorded (reconcile retries them).
    """
    slug = workload.slug
    if workload.kind not in TORN_DOWN_KINDS or workload.source != "k8s":
        return TeardownResult(slug, skipped=f"{workload.kind} workloads are not torn down")
    if not enabled:
        result = TeardownResult(slug, skipped="--no-teardown",
                                kept=tuple(str(r) for r in refs or ()))
        _record(store, workload, result)
        return result
    if cluster is None:
        return TeardownResult(slug, skipped="no Kubernetes cluster configured")
    errors: list[str] = []
    if refs is None:
        try:
            refs = find_objects(cluster, workload, workload_label)
        except (TemporaryError, PermanentError) as exc:
            result = TeardownResult(slug, errors=(str(exc),), failed=(f"lookup: {exc}",))
            _record(store, workload, result)
            return result
    deleted: list[str] = []
    gone: list[str] = []
    kept: list[str] = []
    failed: list[str] = []
    for ref in refs:
        if not ref.managed:
            kept.append(f"{ref} (not labelled {LABEL_MANAGED}=true)")
            continue
        try:
            if cluster.delete_managed(ref.kind, ref.namespace, ref.name):
                deleted.append(str(ref))
            else:
                gone.append(str(ref))
        except PermanentError as exc:
            kept.append(f"{ref} ({exc})")
        except TemporaryError as exc:
            failed.append(str(ref))
            errors.append(str(exc))
    result = TeardownResult(slug, deleted=tuple(deleted), gone=tuple(gone), kept=tuple(kept),
                            failed=tuple(failed), errors=tuple(errors))
    for line in deleted:
        log.info("teardown of %s: deleted %s", slug, line)
    _record(store, workload, result)
    return result


def _record(store: Store, workload: WorkloadRecord, result: TeardownResult) -> None:
    level = "warning" if result.failed else "info"
    store.append_event(NewEvent(workload.slug, TEARDOWN_TOKEN, level, result.as_dict(),
                                status=workload.status, workload_id=workload.id))
