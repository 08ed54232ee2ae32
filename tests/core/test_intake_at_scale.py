"""Intake at scale: pods that share their container values (as the Kubernetes adapter builds
them) give the claims that pods built one by one give, and the indexes over a snapshot's
objects find exactly what scanning every object finds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.demand import KSERVE_ISVC_LABEL, newest_replicaset
from scoctl.core.intake.k8s import K8sSnapshot, _K8sWorkload, _Objects, _objects_of
from scoctl.core.model import (
    Condition,
    Container,
    DeploymentInfo,
    InferenceServiceInfo,
    JobInfo,
    OwnerRef,
    ReplicaSetInfo,
)
from scoctl.core.quantity import parse_resources
from tests.core.test_intake import decide, make_pod

SHARED = (Container("main", parse_resources({"cpu": "4", "memory": "16Gi"})),)


def test_pods_sharing_containers_but_not_pod_level_requests_keep_their_own_request():
    plain = make_pod("a", containers=SHARED)
    bigger = replace(make_pod("b", containers=SHARED),
                     pod_requests=parse_resources({"cpu": "8"}))
    overhead = replace(make_pod("c", containers=SHARED),
                       overhead=parse_resources({"memory": "1Gi"}))
    claim = decide((plain, bigger, overhead)).claims[0]
    assert claim.requests == parse_resources({"cpu": "16", "memory": "49Gi"})
    assert claim.largest_pod == parse_resources({"cpu": "8", "memory": "17Gi"})


@given(st.lists(st.tuples(st.sampled_from(["1", "2", "4"]), st.sampled_from(["1Gi", "8Gi"]),
                          st.booleans()), min_size=1, max_size=12))
def test_the_claim_over_shared_container_values_equals_the_claim_over_copies(shapes):
    shared = {(cpu, memory): (Container("main", parse_resources({"cpu": cpu,
                                                                  "memory": memory})),)
              for cpu, memory, _ in shapes}
    one_each = tuple(make_pod(f"p{i}", cpu=cpu, memory=memory, unschedulable=waiting)
                     for i, (cpu, memory, waiting) in enumerate(shapes))
    sharing = tuple(replace(pod, containers=shared[(cpu, memory)])
                    for pod, (cpu, memory, _) in zip(one_each, shapes, strict=True))
    assert decide(sharing) == decide(one_each)


# --- the objects of a workload, found through the indexes ----------------------------------------

NAMES = ["orders", "web", "train", "other"]
NAMESPACES = ["shop", "ml"]


def objects_by_scanning(w: _K8sWorkload, snap: K8sSnapshot, label: str, configured: bool):
    """The rule of `_objects_of`, scanning every object (what the indexes must give)."""
    namespaces = {ns for _, ns, _ in w.owners} | ({w.namespace} if w.namespace else set())

    def named(name: str, labels: Mapping[str, str], namespace: str) -> bool:
        if labels.get(label) == w.slug:
            return True
        return name == w.slug and (configured or namespace in namespaces)

    isvcs = [i for i in snap.inference_services
             if ("inference", i.namespace, i.name) in w.owners
             or named(i.name, i.labels, i.namespace)]
    isvc_keys = {(i.namespace, i.name) for i in isvcs}
    deployments = [d for d in snap.deployments
                   if ("deployment", d.namespace, d.name) in w.owners
                   or named(d.name, d.labels, d.namespace)
                   or (d.namespace, d.labels.get(KSERVE_ISVC_LABEL, "")) in isvc_keys
                   or ("inference", d.namespace, d.labels.get(KSERVE_ISVC_LABEL, ""))
                   in w.owners]
    jobs = [j for j in snap.jobs
            if ("job", j.namespace, j.name) in w.owners or named(j.name, j.labels, j.namespace)]
    return deployments, isvcs, jobs


def _labels(draw: st.DrawFn) -> dict[str, str]:
    out = {}
    if draw(st.booleans()):
        out["sco/workload"] = draw(st.sampled_from(NAMES))
    if draw(st.booleans()):
        out[KSERVE_ISVC_LABEL] = draw(st.sampled_from(NAMES))
    return out


@st.composite
def snapshots(draw: st.DrawFn) -> tuple[K8sSnapshot, _K8sWorkload, bool]:
    def some(kind: type[Any]) -> tuple[Any, ...]:
        return tuple(kind(name=draw(st.sampled_from(NAMES)),
                          namespace=draw(st.sampled_from(NAMESPACES)), labels=_labels(draw))
                     for _ in range(draw(st.integers(0, 6))))

    deployments = tuple(replace(d, uid=f"uid-{i}") for i, d in enumerate(some(DeploymentInfo)))
    replicasets = tuple(
        ReplicaSetInfo(name=f"rs-{i}", namespace=draw(st.sampled_from(NAMESPACES)),
                       owners=(OwnerRef("Deployment", draw(st.sampled_from(NAMES)),
                                        draw(st.sampled_from(["", "uid-0", "uid-1"]))),),
                       annotations={"deployment.kubernetes.io/revision": str(i)},
                       conditions=(Condition("ReplicaFailure", "True", "FailedCreate",
                                             f"exceeded quota: rs-{i}"),))
        for i in range(draw(st.integers(0, 4))))
    snap = K8sSnapshot(deployments=deployments, inference_services=some(InferenceServiceInfo),
                       jobs=some(JobInfo), replicasets=replicasets)
    w = _K8sWorkload(slug=draw(st.sampled_from(NAMES)), kind="deployment", contract="T1",
                     namespace=draw(st.sampled_from([None, *NAMESPACES])))
    w.owners = set(draw(st.lists(st.tuples(st.sampled_from(["deployment", "inference", "job"]),
                                           st.sampled_from(NAMESPACES),
                                           st.sampled_from(NAMES)), max_size=3)))
    return snap, w, draw(st.booleans())


@given(snapshots())
def test_the_indexes_find_exactly_the_objects_a_scan_finds(case):
    snap, w, configured = case
    objects = _Objects.of(snap, "sco/workload")
    assert _objects_of(w, objects, configured) == objects_by_scanning(w, snap, "sco/workload",
                                                                      configured)
    for deployment in snap.deployments:
        assert newest_replicaset(deployment, objects.replicasets_of(deployment)) == \
            newest_replicaset(deployment, snap.replicasets)
