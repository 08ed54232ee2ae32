"""The watch stage's pure decisions: batch window, claims, backstop tokens, Slurm intake."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.gres import Gres
from scoctl.core.intake.batch import extend_window, window_deadline, window_due
from scoctl.core.intake.common import Capacity, IntakeDecision, WorkloadRule, WorkloadState
from scoctl.core.intake.k8s import (
    K8sPolicy,
    K8sSnapshot,
    could_ever_hold,
    decide_k8s_intake,
    quota_request_fits,
)
from scoctl.core.intake.slurm import (
    SlurmPolicy,
    SlurmSnapshot,
    decide_slurm_intake,
    expand_hostlist,
    job_node_shape,
    parse_sco_comment,
)
from scoctl.core.model import (
    Condition,
    Container,
    DeploymentInfo,
    EventInfo,
    Flavor,
    InferenceServiceInfo,
    JobInfo,
    NodeInfo,
    OwnerRef,
    PodInfo,
    Pool,
    ReplicaSetInfo,
    SlurmJob,
    SlurmNode,
    Toleration,
)
from scoctl.core.quantity import parse_resources

GI = 2**30
UNSCHEDULABLE = Condition("PodScheduled", "False", "Unschedulable",
                          "0/3 nodes are available: 3 Insufficient cpu.")
QUOTA = ('pods "web-5d8f-x" is forbidden: exceeded quota: team, requested: requests.cpu=4,'
         'requests.memory=16Gi, used: requests.cpu=8,requests.memory=32Gi, limited: '
         'requests.cpu=8,requests.memory=32Gi')


# --- builders ------------------------------------------------------------------------------


def res(**values: str) -> dict[str, int]:
    return parse_resources({k.replace("_", "/").replace("nvidia/", "nvidia.com/"): v
                            for k, v in values.items()})


def make_pod(name: str, *, workload: str | None = "orders-daily", cpu: str = "4",
             memory: str = "16Gi", gpus: int = 0, namespace: str = "shop",
             rs: str | None = "orders-daily-5d8f7c9b4", node: str = "",
             phase: str = "Pending", unschedulable: bool = True, ready: bool = False,
             labels: Mapping[str, str] | None = None, tolerate: bool = False,
             init: tuple[Container, ...] = (), containers: tuple[Container, ...] | None = None,
             ) -> PodInfo:
    pod_labels = dict(labels or {})
    if workload:
        pod_labels["sco/workload"] = workload
    if rs:
        pod_labels["pod-template-hash"] = rs.rsplit("-", 1)[1]
    requests = {"cpu": cpu, "memory": memory}
    if gpus:
        requests["nvidia.com/gpu"] = str(gpus)
    conditions: tuple[Condition, ...] = ()
    if node:
        conditions = (Condition("PodScheduled", "True"),
                      Condition("Ready", "True" if ready else "False"))
    elif unschedulable:
        conditions = (UNSCHEDULABLE,)
    return PodInfo(
        name=name, namespace=namespace, uid=f"uid-{name}", labels=pod_labels,
        owners=(OwnerRef("ReplicaSet", rs, controller=True),) if rs else (),
        containers=containers or (Container("main", parse_resources(requests)),),
        init_containers=init, node_name=node, phase=phase, conditions=conditions,
        tolerations=(Toleration("reclaimable", "Equal", "true", "NoSchedule"),) if tolerate
        else ())


def node(name: str, cpu: str = "16", memory: str = "64Gi", gpus: int = 0,
         managed: bool = False) -> NodeInfo:
    alloc = {"cpu": cpu, "memory": memory}
    if gpus:
        alloc["nvidia.com/gpu"] = str(gpus)
    return NodeInfo(name=name, labels={"sco/managed": "true"} if managed else {},
                    allocatable=parse_resources(alloc), ready=True)


def deployment(name: str = "orders-daily", *, namespace: str = "shop", managed: bool = True,
               replicas: int = 2, available: int = 0, conditions: tuple[Condition, ...] = (),
               labels: Mapping[str, str] | None = None) -> DeploymentInfo:
    meta = dict(labels or {})
    if managed:
        meta["sco/managed"] = "true"
    conds = conditions
    if available >= replicas:
        conds = (*conds, Condition("Available", "True"))
    return DeploymentInfo(name=name, namespace=namespace, uid=f"uid-{name}", labels=meta,
                          replicas=replicas, available_replicas=available, conditions=conds)


# the demand rules these tests judge hold whatever the isolation: the pods are built without the
# workload's toleration and selector, so their workloads are shared (isolation has its own
# tests, tests/core/test_truth.py)
POLICY = K8sPolicy(
    default_isolation="shared",
    workloads=(WorkloadRule("orders-daily", "T1", "k8s", namespace="shop"),),
    contracts=frozenset({"T1", "T2"}),
    capacity=Capacity(
        pools=(Pool("c4.az1.spot", "r", "az1", "c4.2xlarge", "row-a", "reclaimable", 10),),
        flavors=(Flavor("c4.2xlarge", 32, 128 * GI, allocatable=res(cpu="31", memory="120Gi")),),
    ),
)


def decide(pods: tuple[PodInfo, ...] = (), nodes: tuple[NodeInfo, ...] = (node("n1"),),
           policy: K8sPolicy = POLICY, **kw: Any) -> IntakeDecision:
    return decide_k8s_intake(K8sSnapshot(pods=pods, nodes=nodes, **kw), policy)


def state(status: str, last: str | None = None,
          kind: str = "deployment") -> dict[str, WorkloadState]:
    return {"orders-daily": WorkloadState("orders-daily", status, kind=kind, last_token=last,
                                          namespace="shop")}


# --- batch window ----------------------------------------------------------------------------


def test_42_pods_over_two_seconds_close_one_window_a_second_after_the_last() -> None:
    window = None
    now = 0.0
    for _ in range(42):
        window = extend_window(window, now)
        assert not window_due(window, now, idle=1.0, longest=10.0)
        now += 2.0 / 41
    last = window.last if window else 0
    assert window is not None and window.changes == 42
    assert not window_due(window, last + 0.99, 1.0, 10.0)
    assert window_due(window, last + 1.0, 1.0, 10.0)


def test_a_steady_trickle_is_committed_at_the_maximum() -> None:
    window = None
    for tick in range(40):
        window = extend_window(window, tick * 0.5)  # a pod every 0.5 s: idle never reached
    assert window is not None
    assert window_deadline(window, 1.0, 5.0) == 5.0
    assert window_due(window, 5.0, 1.0, 5.0)
    assert not window_due(None, 100.0, 1.0, 5.0)


@given(st.lists(st.floats(min_value=0, max_value=3), min_size=1, max_size=30),
       st.floats(min_value=0.1, max_value=2), st.floats(min_value=2, max_value=10))
def test_the_window_closes_at_idle_after_the_last_change_or_at_most_max(
        gaps: list[float], idle: float, longest: float) -> None:
    window = None
    now = 0.0
    for gap in gaps:
        now += gap
        window = extend_window(window, now)
    assert window is not None
    deadline = window_deadline(window, idle, longest)
    assert deadline <= window.opened + longest
    assert deadline <= window.last + idle
    assert deadline == min(window.last + idle, window.opened + longest)
    assert window_due(window, deadline, idle, longest)


# --- claims ------------------------------------------------------------------------------------


def test_42_pending_pods_are_one_claim_of_168_vcpu_and_672_gib() -> None:
    pods = tuple(make_pod(f"p{i}") for i in range(42))
    decision = decide(pods)
    assert len(decision.claims) == 1
    claim = decision.claims[0]
    assert (claim.workload, claim.contract, claim.kind, claim.pods) == \
        ("orders-daily", "T1", "deployment", 42)
    assert claim.requests == {"cpu": 168_000, "memory": 672 * GI}
    assert claim.largest_pod == {"cpu": 4000, "memory": 16 * GI}


def test_claim_uses_the_effective_request_fit_go_example() -> None:
    init = (Container("ic1", res(cpu="2", memory="1G")),
            Container("ic2", res(cpu="2", memory="3G")))
    mains = (Container("c1", res(cpu="2", memory="1G")),
             Container("c2", res(cpu="1", memory="1G")))
    claim = decide((make_pod("p", init=init, containers=mains),)).claims[0]
    assert claim.requests == {"cpu": 3000, "memory": 3 * 10**9}


def test_claim_counts_sidecars_with_the_regular_containers() -> None:
    init = (Container("mesh", res(cpu="1", memory="1Gi"), restart_policy="Always"),
            Container("setup", res(cpu="4", memory="1Gi")))
    mains = (Container("app", res(cpu="2", memory="2Gi")),)
    claim = decide((make_pod("p", init=init, containers=mains),)).claims[0]
    # setup runs beside the sidecar started before it: 1 + 4 = 5 CPU beats 2 + 1
    assert claim.requests == {"cpu": 5000, "memory": 3 * GI}


def test_claims_group_by_workload_and_keep_the_per_resource_largest_pod() -> None:
    pods = (
        make_pod("a", workload="w1", rs="w1-abc12",
                 containers=(Container("m", {"cpu": 8000, "memory": GI}),)),
        make_pod("b", workload="w1", rs="w1-abc12",
                 containers=(Container("m", {"cpu": 1000, "memory": 8 * GI,
                                             "nvidia.com/gpu": 1}),)),
        make_pod("c", workload="w2", rs="w2-abc12"),
        make_pod("d", workload=None, rs="shop-frontend-abc12"),  # not scoctl's business
    )
    claims = {c.workload: c for c in decide(pods, nodes=()).claims}
    assert sorted(claims) == ["w1", "w2"]
    assert claims["w1"].requests == {"cpu": 9000, "memory": 9 * GI, "nvidia.com/gpu": 1}
    assert claims["w1"].largest_pod == {"cpu": 8000, "memory": 8 * GI, "nvidia.com/gpu": 1}
    assert claims["w2"].pods == 1


@given(st.lists(st.tuples(st.sampled_from(["w1", "w2", "w3"]),
                          st.integers(1, 64_000), st.integers(1, 2**40)), max_size=30))
def test_a_claim_is_the_sum_of_its_pods_whatever_their_order(
    specs: list[tuple[str, int, int]]
) -> None:
    pods = tuple(make_pod(f"p{i}", workload=w, rs=f"{w}-abc12",
                          containers=(Container("m", {"cpu": cpu, "memory": mem}),))
                 for i, (w, cpu, mem) in enumerate(specs))
    claims = decide(pods, nodes=()).claims
    assert decide(tuple(reversed(pods)), nodes=()).claims == claims
    for claim in claims:
        mine = [(cpu, mem) for name, cpu, mem in specs if name == claim.workload]
        assert claim.pods == len(mine)
        assert claim.requests == {"cpu": sum(c for c, _ in mine), "memory": sum(m for _, m in mine)}


def test_only_managed_pods_are_demand() -> None:
    stranger = make_pod("s", workload=None, rs="shop-frontend-abc12")
    labelled_elsewhere = make_pod("l", workload="batch-x", namespace="other",
                                  rs="batchy-abc12")
    configured = make_pod("c", workload=None)  # owned by Deployment orders-daily (configured)
    decision = decide((stranger, labelled_elsewhere, configured))
    assert sorted(c.workload for c in decision.claims) == ["batch-x", "orders-daily"]


def test_pods_bound_to_nodes_scoctl_launched_stay_in_the_claim() -> None:
    ours = node("sco-1", managed=True)
    theirs = node("base-1")
    pods = (make_pod("a"), make_pod("b", node="sco-1", phase="Running", ready=True),
            make_pod("c", node="base-1", phase="Running", ready=True))
    claim = decide(pods, nodes=(ours, theirs)).claims[0]
    assert claim.pods == 2
    assert claim.requests == {"cpu": 8000, "memory": 32 * GI}


def test_contract_comes_from_the_label_then_the_config() -> None:
    t2 = make_pod("a", workload="svc", rs="svc-abc12", labels={"sco/contract": "T2"})
    bogus = make_pod("b", workload="other", rs="other-abc12", labels={"sco/contract": "T9"})
    claims = {c.workload: c for c in decide((t2, bogus)).claims}
    assert claims["svc"].contract == "T2"
    assert claims["other"].contract == "T1"


def test_tolerating_the_reclaimable_taint_is_recorded() -> None:
    claims = {c.workload: c for c in decide((
        make_pod("a", workload="tol", rs="tol-abc12", tolerate=True),
        make_pod("b", workload="intol", rs="intol-abc12"))).claims}
    assert claims["tol"].tolerates_reclaimable
    assert not claims["intol"].tolerates_reclaimable


def test_a_claim_whose_pods_are_gone_drops_to_zero() -> None:
    decision = decide((), claims=frozenset({"orders-daily"}))
    claim = decision.claims[0]
    assert (claim.workload, claim.requests, claim.pods) == ("orders-daily", {}, 0)


def test_bad_slug_labels_are_skipped_with_a_warning() -> None:
    decision = decide((make_pod("a", workload="Not_A_Slug"),))
    assert decision.claims == ()
    assert "Not_A_Slug" in decision.warnings[0]


# --- backstop -----------------------------------------------------------------------------------


def tokens(decision: IntakeDecision) -> list[str]:
    return [t.token for t in decision.tokens]


def test_unschedulable_pod_that_fits_somewhere_is_queued() -> None:
    assert tokens(decide((make_pod("a"),))) == ["POD_QUEUED"]


def test_pod_beyond_every_node_and_flavor_fails_and_names_the_teardown() -> None:
    big = make_pod("a", cpu="64")
    decision = decide((big,), deployments=(deployment(),))
    (token,) = decision.tokens
    assert token.token == "POD_SCHEDULING_FAILED"
    assert token.detail["request"] == {"cpu": 64, "memory": 16 * GI}
    assert [str(r) for r in token.teardown] == ["Deployment shop/orders-daily"]


def test_elastic_flavor_that_could_hold_it_keeps_it_queued() -> None:
    pod = make_pod("a", cpu="24", memory="100Gi")  # nodes have 16 CPUs; the flavor 31
    assert tokens(decide((pod,))) == ["POD_QUEUED"]
    no_elastic = K8sPolicy(workloads=POLICY.workloads, default_isolation="shared",
                           capacity=Capacity(
        pools=POLICY.capacity.pools, flavors=POLICY.capacity.flavors, elastic=False))
    assert tokens(decide((pod,), policy=no_elastic)) == ["POD_SCHEDULING_FAILED"]


def test_capacity_that_cannot_be_judged_never_fails() -> None:
    gpu_pod = make_pod("a", gpus=1)
    assert tokens(decide((gpu_pod,))) == ["POD_QUEUED"]  # no node advertises the GPU
    assert tokens(decide((make_pod("b", cpu="64"),), nodes=())) == ["POD_QUEUED"]
    holds, why = could_ever_hold(res(cpu="1", nvidia_gpu="1"), (node("g", gpus=8),), Capacity())
    assert holds is True and "node g" in why


def test_quota_block_fails_the_deployment_and_names_only_managed_objects() -> None:
    blocked = deployment(conditions=(Condition("ReplicaFailure", "True", "FailedCreate", QUOTA),))
    (token,) = decide((), deployments=(blocked,)).tokens
    assert token.token == "POD_QUOTA_EXCEEDED_FAILED"
    assert token.teardown[0].managed
    unmanaged = deployment(managed=False, conditions=blocked.conditions)
    (token,) = decide((), deployments=(unmanaged,)).tokens
    assert [r.managed for r in token.teardown] == [False]


def test_quota_block_on_the_newest_replicaset_counts_too() -> None:
    dep = deployment()
    rs = ReplicaSetInfo("orders-daily-5d8f7c9b4", "shop",
                        owners=(OwnerRef("Deployment", "orders-daily", "uid-orders-daily"),),
                        conditions=(Condition("ReplicaFailure", "True", "FailedCreate",
                                              QUOTA.upper()),))
    assert tokens(decide((), deployments=(dep,), replicasets=(rs,))) == \
        ["POD_QUOTA_EXCEEDED_FAILED"]


def test_quota_block_queue_mode_keeps_a_busy_quota_queued() -> None:
    queue = K8sPolicy(workloads=POLICY.workloads, quota_block="queue",
                      default_isolation="shared")
    busy = deployment(conditions=(Condition("ReplicaFailure", "True", "FailedCreate", QUOTA),))
    assert tokens(decide((), deployments=(busy,), policy=queue)) == ["POD_QUEUED"]
    too_small = QUOTA.replace("requested: requests.cpu=4", "requested: requests.cpu=12")
    small = deployment(conditions=(Condition("ReplicaFailure", "True", "FailedCreate",
                                             too_small),))
    assert tokens(decide((), deployments=(small,), policy=queue)) == \
        ["POD_QUOTA_EXCEEDED_FAILED"]


def test_quota_request_fits_reads_the_admission_text() -> None:
    assert quota_request_fits(QUOTA) is True
    assert quota_request_fits(QUOTA.replace("requests.memory=16Gi", "requests.memory=33Gi")) \
        is False
    assert quota_request_fits("failed quota: team: must specify requests.cpu") is None


def test_inference_quota_block_tears_down_the_inference_service() -> None:
    isvc = InferenceServiceInfo("llm", "ml", labels={"sco/managed": "true",
                                                    "sco/workload": "llm"})
    predictor = deployment("llm-predictor", namespace="ml", managed=False,
                           labels={"serving.kserve.io/inferenceservice": "llm"},
                           conditions=(Condition("ReplicaFailure", "True", "FailedCreate",
                                                 QUOTA),))
    (token,) = decide((), deployments=(predictor,), inference_services=(isvc,)).tokens
    assert (token.token, token.kind) == ("POD_QUOTA_EXCEEDED_FAILED", "inference")
    assert [str(r) for r in token.teardown] == ["InferenceService ml/llm"]


def test_job_quota_block_is_only_logged() -> None:
    job = JobInfo("etl", "shop", labels={"sco/workload": "etl"})
    event = EventInfo("etl.1", "shop", "Job", "etl", "FailedCreate", "Error creating: " + QUOTA,
                      "Warning")
    (token,) = decide((), jobs=(job,), events=(event,)).tokens
    assert (token.token, token.kind, token.teardown) == ("POD_CREATION_BLOCKED", "job", ())


def test_available_initialising_and_settled() -> None:
    starting = make_pod("a", node="n1", phase="Pending", unschedulable=False)
    assert tokens(decide((starting,), deployments=(deployment(),))) == ["POD_INITIALIZING"]
    running = make_pod("a", node="n1", phase="Running", ready=True)
    assert tokens(decide((running,), deployments=(deployment(available=2),))) == \
        ["DEPLOYMENT_AVAILABLE"]
    # settled workloads are no longer watched
    for status in ("running", "failed"):
        assert tokens(decide((make_pod("b", cpu="64"),), workloads=state(status))) == []


def test_a_deployment_scaled_to_zero_is_not_running() -> None:
    # issue 28 item 10: 0 desired replicas, Available=True, no pods: nothing runs
    assert tokens(decide((), deployments=(deployment(replicas=0),))) == []


def test_a_running_workload_whose_replicas_grow_is_watched_again() -> None:
    # issue 28 item 10: scaled from 2 to 44 replicas, 42 pods pending: queued again
    ready = tuple(make_pod(f"r{i}", node="n1", phase="Running", ready=True) for i in range(2))
    waiting = tuple(make_pod(f"p{i}") for i in range(42))
    grown = decide((*ready, *waiting), deployments=(deployment(replicas=44, available=2),),
                   workloads=state("running", "DEPLOYMENT_AVAILABLE"))
    [token] = grown.tokens
    assert (token.token, token.detail["pods"]) == ("POD_QUEUED", 42)
    # all desired replicas available: settled, one pod pending (a rolling update) is no news
    steady = decide((*ready, waiting[0]), deployments=(deployment(replicas=2, available=2),),
                    workloads=state("running", "DEPLOYMENT_AVAILABLE"))
    assert tokens(steady) == []
    # an inactive workload is never watched again, whatever its Deployment wants
    ended = decide(waiting, deployments=(deployment(replicas=44, available=2),),
                   workloads=state("failed", "POD_SCHEDULING_FAILED"))
    assert tokens(ended) == []


    assert tokens(decide((make_pod("a"),), workloads=state("queued", "POD_QUEUED"))) == []
    assert tokens(decide((make_pod("a"),), workloads=state("preparing", "POD_INITIALIZING"))) \
        == ["POD_QUEUED"]


# --- Slurm ----------------------------------------------------------------------------------------


SPOLICY = SlurmPolicy(
    workloads=(WorkloadRule("train-llm", "T1", "slurm", kind="job", account="ml-team"),
               WorkloadRule("cloudy", "T2", "slurm", kind="job", partition="cloud")),
    contracts=frozenset({"T1", "T2"}),
    capacity=Capacity(pools=POLICY.capacity.pools, flavors=POLICY.capacity.flavors),
)
SNODES = (
    SlurmNode("local1", 4, 4000, partitions=("cpu",)),
    SlurmNode("big-cpu-1", 64, 256000, partitions=("cpu",), flags=frozenset({"CLOUD"})),
    SlurmNode("test-cloud-[1-2]".replace("[1-2]", "1"), 2, 1000, partitions=("cloud",),
              flags=frozenset({"CLOUD", "POWERED_DOWN"})),
)


def sjob(job_id: int, *, state: str = "PENDING", reason: str = "Resources", cpus: int = 4,
         mem: int | None = 16384, per_cpu: int | None = None, nodes: int = 1,
         partition: str = "cpu", account: str = "ml-team", comment: str = "",
         gres: tuple[Gres, ...] = (), where: str = "") -> SlurmJob:
    return SlurmJob(job_id=job_id, name="j", state=state, reason=reason, partition=partition,
                    account=account, comment=comment, cpus=cpus, memory_per_node_mb=mem,
                    memory_per_cpu_mb=per_cpu, gres_per_node=gres, node_count=nodes,
                    nodes=where)


def test_job_shape_from_cpus_memory_gres_and_nodes() -> None:
    shape, count = job_node_shape(sjob(1, cpus=64, mem=None, per_cpu=2048, nodes=2,
                                       gres=(Gres("gpu", "a100", 4),)), {"gpu": "nvidia.com/gpu"})
    assert count == 2
    assert shape == {"cpu": 32_000, "memory": 64 * GI, "nvidia.com/gpu": 4}


def test_pending_jobs_of_managed_workloads_are_claims() -> None:
    snap = SlurmSnapshot(jobs=(sjob(1, nodes=2, cpus=8), sjob(2), sjob(3, account="other"),
                               sjob(4, reason="JobHeldUser"),
                               sjob(5, partition="cloud", account="x", cpus=1, mem=500),
                               sjob(6, account="x", comment="sco:workload=solo sco:contract=T2")),
                         nodes=SNODES)
    claims = {c.workload: c for c in decide_slurm_intake(snap, SPOLICY).claims}
    assert sorted(claims) == ["cloudy", "solo", "train-llm"]
    train = claims["train-llm"]
    assert (train.pods, train.requests) == (3, {"cpu": 12_000, "memory": 48 * GI})
    assert train.largest_pod == {"cpu": 4000, "memory": 16 * GI}
    assert (claims["solo"].contract, claims["cloudy"].contract) == ("T2", "T2")


def test_running_jobs_on_cloud_nodes_keep_their_nodes_in_the_claim() -> None:
    snap = SlurmSnapshot(jobs=(sjob(1, state="RUNNING", reason="None", where="big-cpu-1"),
                               sjob(2, state="RUNNING", reason="None", where="local1")),
                         nodes=SNODES)
    (claim,) = decide_slurm_intake(snap, SPOLICY).claims
    assert (claim.pods, claim.nodes) == (1, ("big-cpu-1",))


def test_queued_reason_is_emitted_once_per_distinct_reason() -> None:
    row = WorkloadState("w", "queued", kind="job", source="slurm", job_id="7",
                        last_queued_reason="Priority", last_token="SLURM_JOB_QUEUED")
    same = SlurmSnapshot(jobs=(sjob(7, reason="Priority", account="x"),), nodes=SNODES,
                         tracked=(row,))
    assert decide_slurm_intake(same, SPOLICY).tokens == ()
    other = SlurmSnapshot(jobs=(sjob(7, reason="Resources", account="x"),), nodes=SNODES,
                          tracked=(row,))
    (token,) = decide_slurm_intake(other, SPOLICY).tokens
    assert (token.token, token.detail["reason"], token.job_id) == \
        ("SLURM_JOB_QUEUED", "Resources", "7")


def test_hopeless_reason_fails_only_when_nothing_could_hold_it() -> None:
    row = WorkloadState("w", "queued", kind="job", source="slurm", job_id="8")
    too_big = sjob(8, reason="BadConstraints", partition="cloud", cpus=1, mem=5000, account="x")
    decision = decide_slurm_intake(SlurmSnapshot(jobs=(too_big,), nodes=SNODES, tracked=(row,)),
                                   SPOLICY)
    assert [t.token for t in decision.tokens] == ["SLURM_JOB_QUEUED", "SLURM_JOB_SCHEDULING_FAILED"]
    assert "no node in partition cloud has 5000 MB" in decision.tokens[1].detail["gate"]
    fits = sjob(8, reason="DependencyNeverSatisfied", partition="cloud", cpus=1, mem=500,
                account="x")
    decision = decide_slurm_intake(SlurmSnapshot(jobs=(fits,), nodes=SNODES, tracked=(row,)),
                                   SPOLICY)
    assert [t.token for t in decision.tokens] == ["SLURM_JOB_QUEUED"]
    unreadable = SlurmSnapshot(jobs=(too_big,), nodes=None, tracked=(row,))
    assert [t.token for t in decide_slurm_intake(unreadable, SPOLICY).tokens] == \
        ["SLURM_JOB_QUEUED"]
    # pending in a partition list (sbatch -p cloud,cpu): a node of any of them may hold it
    either = replace(too_big, partition="cloud,cpu")
    decision = decide_slurm_intake(SlurmSnapshot(jobs=(either,), nodes=SNODES, tracked=(row,)),
                                   SPOLICY)
    assert [t.token for t in decision.tokens] == ["SLURM_JOB_QUEUED"]
    nowhere = replace(too_big, partition="cloud,cpu", memory_per_node_mb=300000)
    decision = decide_slurm_intake(SlurmSnapshot(jobs=(nowhere,), nodes=SNODES, tracked=(row,)),
                                   SPOLICY)
    assert [t.token for t in decision.tokens] == ["SLURM_JOB_QUEUED", "SLURM_JOB_SCHEDULING_FAILED"]


def test_states_map_to_status_tokens_only_on_change() -> None:
    row = WorkloadState("w", "queued", kind="job", source="slurm", job_id="9")
    for state_name, expected in (("RUNNING", 1), ("COMPLETED", 1), ("TIMEOUT", 1)):
        snap = SlurmSnapshot(jobs=(sjob(9, state=state_name, account="x"),), tracked=(row,))
        out = decide_slurm_intake(snap, SPOLICY).tokens
        assert len(out) == expected and out[0].detail["state"] == state_name
    running = WorkloadState("w", "running", kind="job", source="slurm", job_id="9")
    snap = SlurmSnapshot(jobs=(sjob(9, state="COMPLETING", account="x"),), tracked=(running,))
    assert decide_slurm_intake(snap, SPOLICY).tokens == ()
    gone = SlurmSnapshot(jobs=(), tracked=(running,))
    assert decide_slurm_intake(gone, SPOLICY).tokens == ()


def test_a_job_with_a_sco_comment_becomes_a_tracked_workload() -> None:
    snap = SlurmSnapshot(jobs=(sjob(11, account="x", reason="Priority",
                                    comment="sco:workload=solo,sco:contract=T2"),))
    (token,) = decide_slurm_intake(snap, SPOLICY).tokens
    assert (token.slug, token.token, token.job_id, token.contract) == \
        ("solo", "SLURM_JOB_QUEUED", "11", "T2")
    known = SlurmSnapshot(jobs=snap.jobs, known_jobs=frozenset({"11"}))
    assert decide_slurm_intake(known, SPOLICY).tokens == ()


def test_hostlists_and_comments() -> None:
    assert expand_hostlist("gpu-a100-[1-2],local1") == ["gpu-a100-1", "gpu-a100-2", "local1"]
    assert expand_hostlist("n[01-03,7]") == ["n01", "n02", "n03", "n7"]
    assert expand_hostlist("") == []
    assert parse_sco_comment("run 3 sco:workload=a.b sco:contract=T2") == \
        {"workload": "a.b", "contract": "T2"}
    assert parse_sco_comment("sco:solo") == {"workload": "solo"}


def test_pods_starting_on_our_nodes_are_initialising_and_stay_in_the_claim() -> None:
    starting = make_pod("a", node="sco-1", phase="Pending", unschedulable=False)
    decision = decide((starting,), nodes=(node("sco-1", managed=True),),
                      deployments=(deployment(),))
    assert tokens(decision) == ["POD_INITIALIZING"]
    assert decision.claims[0].pods == 1
