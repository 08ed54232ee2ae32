"""Kubernetes demand rules: effective requests, provisionable pods, workloads, claims, quotas."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.demand import (
    deployment_available,
    deployment_quota_block,
    effective_request,
    events_quota_block,
    is_provisionable,
    is_quota_message,
    max_allocatable,
    newest_replicaset,
    node_fits,
    quota_failure,
    tolerates,
    tolerates_reclaimable,
    workload_of,
)
from scoctl.core.model import (
    Condition,
    Container,
    DeploymentInfo,
    EventInfo,
    NodeInfo,
    OwnerRef,
    PodInfo,
    ReplicaSetInfo,
    Taint,
    Toleration,
)
from scoctl.core.quantity import parse_cpu, parse_memory

GI = 2**30
UNSCHEDULABLE = Condition("PodScheduled", "False", "Unschedulable",
                          "0/3 nodes are available: 3 Insufficient cpu.")


def res(cpu: str | None = None, memory: str | None = None, **extra: int) -> dict[str, int]:
    out: dict[str, int] = {}
    if cpu is not None:
        out["cpu"] = parse_cpu(cpu)
    if memory is not None:
        out["memory"] = parse_memory(memory)
    out.update({k.replace("_", "."): v for k, v in extra.items()})
    return out


def make_pod(name: str = "p", *, containers: tuple[Container, ...] = (),
             init: tuple[Container, ...] = (), labels: dict[str, str] | None = None,
             owners: tuple[OwnerRef, ...] = (), **kwargs: object) -> PodInfo:
    conditions = kwargs.pop("conditions", (UNSCHEDULABLE,))
    return PodInfo(name=name, namespace="ml", labels=labels or {}, owners=owners,
                   containers=containers or (Container("main", res("1", "1Gi")),),
                   init_containers=init, conditions=conditions,  # type: ignore[arg-type]
                   **kwargs)  # type: ignore[arg-type]


def sidecar(name: str, requests: dict[str, int]) -> Container:
    return Container(name, requests, restart_policy="Always")


# --- effective request ---------------------------------------------------------------------------


def test_classic_fit_go_example_gives_cpu_3_and_memory_3g() -> None:
    pod = make_pod(
        init=(Container("ic1", res("2", "1G")), Container("ic2", res("2", "3G"))),
        containers=(Container("c1", res("2", "1G")), Container("c2", res("1", "1G"))),
    )
    assert effective_request(pod) == {"cpu": 3000, "memory": 3 * 10**9}


def test_sidecars_add_to_the_sum_of_regular_containers() -> None:
    pod = make_pod(init=(sidecar("proxy", res("500m", "128Mi")),),
                   containers=(Container("app", res("1", "1Gi")),))
    assert effective_request(pod) == {"cpu": 1500, "memory": GI + 128 * 2**20}


def test_a_sidecar_started_before_an_init_container_runs_alongside_it() -> None:
    pod = make_pod(init=(sidecar("proxy", res("1")), Container("migrate", res("2"))),
                   containers=(Container("app", res("1")),))
    # init phase peak: migrate 2 + proxy 1 = 3 > steady state app 1 + proxy 1 = 2
    assert effective_request(pod) == {"cpu": 3000}


def test_a_sidecar_started_after_an_init_container_does_not_add_to_it() -> None:
    pod = make_pod(init=(Container("migrate", res("2")), sidecar("proxy", res("1"))),
                   containers=(Container("app", res("1")),))
    assert effective_request(pod) == {"cpu": 2000}


def test_init_containers_are_a_maximum_not_a_sum() -> None:
    pod = make_pod(init=(Container("a", res("4")), Container("b", res("4"))),
                   containers=(Container("app", res("1")),))
    assert effective_request(pod) == {"cpu": 4000}


def test_pod_level_requests_override_cpu_and_memory_but_not_accelerators() -> None:
    pod = make_pod(containers=(Container("app", {"cpu": 1000, "memory": GI,
                                                 "nvidia.com/gpu": 2}),),
                   pod_requests={"cpu": 3000, "memory": 4 * GI})
    assert effective_request(pod) == {"cpu": 3000, "memory": 4 * GI, "nvidia.com/gpu": 2}


def test_overhead_is_added_last() -> None:
    pod = make_pod(containers=(Container("app", res("1", "1Gi")),),
                   pod_requests={"cpu": 2000}, overhead=res("250m", "120Mi"))
    assert effective_request(pod) == {"cpu": 2250, "memory": GI + 120 * 2**20}


def test_accelerators_follow_the_same_sum_and_max() -> None:
    pod = make_pod(init=(Container("warm", {"nvidia.com/gpu": 4}),),
                   containers=(Container("a", {"nvidia.com/gpu": 1}),
                               Container("b", {"nvidia.com/gpu": 2})))
    assert effective_request(pod) == {"nvidia.com/gpu": 4}


quantities = st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]),
                             st.integers(min_value=0, max_value=10**6), max_size=3)
containers = st.builds(Container, st.just("c"), quantities,
                       st.sampled_from([None, "Always"]))


@given(regular=st.lists(st.builds(Container, st.just("c"), quantities), min_size=1, max_size=4),
       init=st.lists(containers, max_size=4))
def test_effective_request_covers_every_phase_of_the_pod(
    regular: list[Container], init: list[Container]
) -> None:
    pod = make_pod(containers=tuple(regular), init=tuple(init))
    request = effective_request(pod)
    sidecars = [c for c in init if c.restart_policy == "Always"]
    for name in ("cpu", "memory", "nvidia.com/gpu"):
        steady = sum(c.requests.get(name, 0) for c in regular + sidecars)
        assert request.get(name, 0) >= steady
        for i, c in enumerate(init):
            before = sum(s.requests.get(name, 0) for s in init[:i] if s.restart_policy == "Always")
            assert request.get(name, 0) >= before + c.requests.get(name, 0)


# --- provisionable -------------------------------------------------------------------------------


def test_an_unschedulable_unbound_pod_is_provisionable() -> None:
    assert is_provisionable(make_pod())


def test_pods_more_capacity_would_not_help_are_not_provisionable() -> None:
    gated = Condition("PodScheduled", "False", "SchedulingGated", "")
    cases = [
        make_pod(node_name="n1"),
        make_pod(nominated_node_name="n2"),
        make_pod(owners=(OwnerRef("DaemonSet", "fluentd", controller=True),)),
        make_pod(owners=(OwnerRef("Node", "n1", controller=True),)),
        make_pod(annotations={"kubernetes.io/config.mirror": "abc"}),
        make_pod(scheduling_gates=("example.com/wait",), conditions=(gated,)),
        make_pod(scheduling_gates=("example.com/wait",)),
        make_pod(conditions=(gated,)),
        make_pod(conditions=()),
        make_pod(conditions=(Condition("PodScheduled", "True"),)),
        make_pod(deleting=True),
    ]
    assert [is_provisionable(p) for p in cases] == [False] * len(cases)


# --- workloads -----------------------------------------------------------------------------------


def test_the_workload_label_names_the_workload_and_ownership_gives_the_kind() -> None:
    pod = make_pod(labels={"sco/workload": "orders-daily"},
                   owners=(OwnerRef("ReplicaSet", "orders-6f7d9c", controller=True),))
    ref = workload_of(pod)
    assert ref is not None
    assert (ref.name, ref.kind, ref.source) == ("orders-daily", "deployment", "label")
    assert workload_of(make_pod(labels={"team": "x"}), label="team") == \
        workload_of(make_pod(labels={"team": "x"}), "team")


def test_a_deployment_is_found_through_its_replicaset_name() -> None:
    by_hash = make_pod(labels={"pod-template-hash": "5d8f7c9b4"},
                       owners=(OwnerRef("ReplicaSet", "web-api-5d8f7c9b4", controller=True),))
    by_name = make_pod(owners=(OwnerRef("ReplicaSet", "web-api-5d8f7c9b4", controller=True),))
    for pod in (by_hash, by_name):
        ref = workload_of(pod)
        assert ref is not None and (ref.name, ref.kind) == ("web-api", "deployment")


def test_kserve_predictor_pods_belong_to_their_inference_service() -> None:
    pod = make_pod(labels={"serving.kserve.io/inferenceservice": "llm", "component": "predictor"},
                   owners=(OwnerRef("ReplicaSet", "llm-predictor-7c9f", controller=True),))
    ref = workload_of(pod)
    assert ref is not None and (ref.name, ref.kind) == ("llm", "inference")


def test_job_pods_belong_to_their_job() -> None:
    owned = make_pod(owners=(OwnerRef("Job", "train-42", controller=True),))
    labelled = make_pod(labels={"batch.kubernetes.io/job-name": "train-42"})
    for pod in (owned, labelled):
        ref = workload_of(pod)
        assert ref is not None and (ref.name, ref.kind) == ("train-42", "job")


def test_a_bare_pod_without_the_label_has_no_workload() -> None:
    assert workload_of(make_pod()) is None
    ref = workload_of(make_pod(labels={"sco/workload": "adhoc"}))
    assert ref is not None and ref.kind == "job"


# --- node capacity -------------------------------------------------------------------------------


def node(name: str, **alloc: int) -> NodeInfo:
    return NodeInfo(name, allocatable={k.replace("_", "."): v for k, v in alloc.items() if v})


def test_max_allocatable_is_none_not_zero_when_no_node_has_the_resource() -> None:
    nodes = [node("a", cpu=16000), node("b", cpu=32000)]
    assert max_allocatable(nodes, "nvidia.com/gpu") is None
    assert max_allocatable([], "cpu") is None
    assert max_allocatable(nodes, "cpu") == 32000
    gpu_nodes = [*nodes, NodeInfo("g", allocatable={"nvidia.com/gpu": 8})]
    assert max_allocatable(gpu_nodes, "nvidia.com/gpu") == 8


def test_a_request_must_fit_one_node_in_every_resource_at_once() -> None:
    big_cpu = NodeInfo("a-cpu", allocatable={"cpu": 64000, "memory": 256 * GI})
    gpu = NodeInfo("b-gpu", allocatable={"cpu": 8000, "memory": 64 * GI, "nvidia.com/gpu": 8})
    request = {"cpu": 32000, "memory": 128 * GI, "nvidia.com/gpu": 4}
    assert node_fits(request, [big_cpu, gpu]) is None
    both = NodeInfo("c-both", allocatable={"cpu": 64000, "memory": 256 * GI,
                                           "nvidia.com/gpu": 8})
    assert node_fits(request, [big_cpu, gpu, both]) == both
    assert node_fits({"cpu": 1000}, [gpu, big_cpu]) == big_cpu  # first by name


def test_tolerations() -> None:
    taint = Taint("reclaimable", "NoSchedule", "true")
    assert tolerates([Toleration("reclaimable", "Equal", "true", "NoSchedule")], taint)
    assert tolerates([Toleration("reclaimable", "Exists")], taint)
    assert tolerates([Toleration(operator="Exists")], taint)
    assert not tolerates([Toleration("reclaimable", "Equal", "false")], taint)
    assert not tolerates([Toleration("reclaimable", "Exists", effect="NoExecute")], taint)
    assert not tolerates_reclaimable(make_pod())
    assert tolerates_reclaimable(make_pod(tolerations=(Toleration("reclaimable", "Exists"),)))


# --- quota blocks --------------------------------------------------------------------------------


QUOTA_TEXT = ('pods "allocation-manager-6597bc46dc-2wm8j" is forbidden: exceeded quota: '
              "namespace-quota, requested: limits.cpu=1,limits.memory=2Gi, used: limits.cpu=6,"
              "limits.memory=12Gi, limited: limits.cpu=6,limits.memory=12Gi")


def test_quota_messages_match_in_any_case_and_failed_quota_too() -> None:
    assert is_quota_message(QUOTA_TEXT)
    assert is_quota_message('pods "test-1-" is forbidden: Exceeded quota: compute')
    assert is_quota_message("failed quota: compute: must specify requests.cpu,requests.memory")
    assert not is_quota_message('pods "x" is forbidden: error looking up service account')


def test_only_a_true_replica_failure_condition_is_a_quota_block() -> None:
    assert quota_failure([Condition("ReplicaFailure", "True", "FailedCreate", QUOTA_TEXT)]) \
        == QUOTA_TEXT
    assert quota_failure([Condition("ReplicaFailure", "False", "FailedCreate", QUOTA_TEXT)]) \
        is None
    assert quota_failure([Condition("Progressing", "False", "ProgressDeadlineExceeded",
                                    QUOTA_TEXT)]) is None
    assert quota_failure([Condition("ReplicaFailure", "True", "FailedCreate",
                                    'pods "x" is forbidden: no PriorityClass')]) is None


def test_a_quota_block_is_read_from_the_deployment_then_its_newest_replicaset() -> None:
    dep = DeploymentInfo("orders", "ml", uid="d-1")
    old = ReplicaSetInfo("orders-aaa", "ml", annotations={
        "deployment.kubernetes.io/revision": "1"},
        owners=(OwnerRef("Deployment", "orders", "d-1", controller=True),),
        conditions=(Condition("ReplicaFailure", "True", "FailedCreate", "old " + QUOTA_TEXT),))
    new = ReplicaSetInfo("orders-bbb", "ml", annotations={
        "deployment.kubernetes.io/revision": "2"},
        owners=(OwnerRef("Deployment", "orders", "d-1", controller=True),))
    other = ReplicaSetInfo("web-ccc", "ml", annotations={"deployment.kubernetes.io/revision": "9"},
                           owners=(OwnerRef("Deployment", "web", "d-2", controller=True),))
    assert newest_replicaset(dep, [old, new, other]) == new
    assert deployment_quota_block(dep, [old, new, other]) is None
    blocked_new = ReplicaSetInfo(new.name, "ml", annotations=new.annotations, owners=new.owners,
                                 conditions=(Condition("ReplicaFailure", "True", "FailedCreate",
                                                       QUOTA_TEXT),))
    assert deployment_quota_block(dep, [old, blocked_new]) == QUOTA_TEXT
    copied = DeploymentInfo("orders", "ml", uid="d-1", conditions=(
        Condition("ReplicaFailure", "True", "FailedCreate", "copied " + QUOTA_TEXT),))
    assert deployment_quota_block(copied, [old, new]) == "copied " + QUOTA_TEXT


def test_jobs_show_quota_blocks_through_failed_create_events() -> None:
    events = [EventInfo("e1", "ml", "Job", "train", "SuccessfulCreate", "Created pod: train-1"),
              EventInfo("e2", "ml", "Job", "train", "FailedCreate", "Error creating: " + QUOTA_TEXT,
                        "Warning")]
    assert events_quota_block(events) == "Error creating: " + QUOTA_TEXT
    assert events_quota_block(events[:1]) is None


def test_a_deployment_is_available_when_every_replica_is() -> None:
    available = Condition("Available", "True", "MinimumReplicasAvailable")
    assert deployment_available(DeploymentInfo("d", "ml", replicas=2, available_replicas=2,
                                               conditions=(available,)))
    assert not deployment_available(DeploymentInfo("d", "ml", replicas=2, available_replicas=1,
                                                   conditions=(available,)))
    assert not deployment_available(DeploymentInfo("d", "ml", replicas=0))
    # issue 28 item 10: Kubernetes reports a Deployment scaled to 0 as Available; it runs nothing
    assert not deployment_available(DeploymentInfo("d", "ml", replicas=0, available_replicas=0,
                                                   conditions=(available,)))
