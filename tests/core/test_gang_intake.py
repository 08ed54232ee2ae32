"""Gang intake (design: Gangs): Slurm jobs needing more than one node and Kubernetes pod groups
become gang claims, the gang size carried with the claim; a changed size is a claim delta."""

from __future__ import annotations

from dataclasses import replace

from scoctl.core.claims import ObservedClaim, claim_write
from scoctl.core.gang import Packing, pack_gang
from scoctl.core.intake.k8s import gang_of
from scoctl.core.intake.slurm import SlurmSnapshot, decide_slurm_intake
from scoctl.core.model import (
    ClaimRecord,
    Container,
    Placement,
    PodInfo,
    SlurmNode,
    Spread,
    Toleration,
)
from tests.core.test_intake import SNODES, SPOLICY, decide, make_pod, sjob

GROUP = "scheduling.x-k8s.io/pod-group"


def grouped(name: str, group: str = "train", size: str | None = None, *,
            as_annotation: bool = False) -> PodInfo:
    pod = make_pod(name)
    annotations = {"sco/gang-size": size} if size is not None else {}
    if as_annotation:
        return replace(pod, annotations={**annotations, GROUP: group})
    return replace(pod, labels={**pod.labels, GROUP: group}, annotations=annotations)


# --- Slurm --------------------------------------------------------------------------------


def test_a_job_needing_four_nodes_is_a_gang_of_four() -> None:
    snap = SlurmSnapshot(jobs=(sjob(1, nodes=4, cpus=16),), nodes=SNODES)
    (claim,) = decide_slurm_intake(snap, SPOLICY).claims
    assert (claim.pods, claim.gang, claim.largest_pod["cpu"]) == (4, 4, 4000)


def test_single_node_jobs_are_no_gang() -> None:
    snap = SlurmSnapshot(jobs=(sjob(1), sjob(2)), nodes=SNODES)
    (claim,) = decide_slurm_intake(snap, SPOLICY).claims
    assert (claim.pods, claim.gang) == (2, 0)


def test_two_four_node_jobs_are_two_gangs_of_four() -> None:
    snap = SlurmSnapshot(jobs=(sjob(1, nodes=4), sjob(2, nodes=4)), nodes=SNODES)
    decision = decide_slurm_intake(snap, SPOLICY)
    (claim,) = decision.claims
    assert (claim.pods, claim.gang, decision.warnings) == (8, 4, ())


def test_jobs_of_different_node_counts_are_planned_as_the_largest_gang_with_a_warning() -> None:
    snap = SlurmSnapshot(jobs=(sjob(1, nodes=2), sjob(2, nodes=4)), nodes=SNODES)
    decision = decide_slurm_intake(snap, SPOLICY)
    (claim,) = decision.claims
    assert (claim.pods, claim.gang) == (6, 4)
    assert decision.warnings == ("workload train-llm: jobs need 2, 4 nodes; planned as gangs "
                                 "of 4",)


def test_a_running_gang_on_cloud_nodes_stays_a_gang_claim() -> None:
    nodes = (*SNODES, *(SlurmNode(f"big-cpu-{i}", 64, 256000, partitions=("cpu",),
                                  flags=frozenset({"CLOUD"})) for i in (2, 3)))
    snap = SlurmSnapshot(jobs=(sjob(1, state="RUNNING", reason="None", nodes=3,
                                    where="big-cpu-[1-3]"),), nodes=nodes)
    (claim,) = decide_slurm_intake(snap, SPOLICY).claims
    assert (claim.pods, claim.gang, claim.nodes) == (3, 3, ("big-cpu-1", "big-cpu-2",
                                                           "big-cpu-3"))


# --- Kubernetes -------------------------------------------------------------------------------


def test_pods_of_a_pod_group_take_the_gang_size_annotation() -> None:
    pods = tuple(grouped(f"p{i}", size="6") for i in range(4))  # 4 of 6 seen so far
    (claim,) = decide(pods).claims
    assert (claim.pods, claim.gang) == (4, 6)


def test_a_pod_group_without_a_size_is_the_pods_seen() -> None:
    pods = (*(grouped(f"p{i}", as_annotation=True) for i in range(3)), make_pod("loner"))
    decision = decide(pods)
    (claim,) = decision.claims
    assert (claim.pods, claim.gang, decision.warnings) == (4, 3, ())


def test_pods_without_a_pod_group_are_no_gang() -> None:
    (claim,) = decide((make_pod("a"), make_pod("b"))).claims
    assert claim.gang == 0


def test_pods_disagreeing_on_the_size_are_the_pods_seen_with_a_warning() -> None:
    decision = decide((grouped("a", size="4"), grouped("b", size="2")))
    (claim,) = decision.claims
    assert claim.gang == 2
    assert decision.warnings == ("workload orders-daily: pod group train: pods disagree on "
                                 "sco/gang-size: 2, 4",)


def test_a_pod_group_takes_its_podgroups_min_member_when_no_pod_says_its_size() -> None:
    pods = tuple(grouped(f"p{i}") for i in range(2))  # 2 of the PodGroup's 4 seen so far
    (claim,) = decide(pods, pod_groups={("shop", "train"): 4}).claims
    assert (claim.pods, claim.gang) == (2, 4)


def test_the_size_annotation_wins_over_the_podgroups_min_member() -> None:
    pods = tuple(grouped(f"p{i}", size="6") for i in range(2))
    (claim,) = decide(pods, pod_groups={("shop", "train"): 4}).claims
    assert claim.gang == 6


def test_a_podgroup_is_matched_by_the_pods_namespace_and_the_groups_name() -> None:
    pods = tuple(grouped(f"p{i}") for i in range(3))  # in namespace shop
    elsewhere = {("ml", "train"): 4, ("shop", "other"): 5}
    (claim,) = decide(pods, pod_groups=elsewhere).claims
    assert claim.gang == 3  # no PodGroup of theirs: the pods seen


def test_gang_of_prefers_the_annotation_then_min_member_then_the_pods_seen() -> None:
    sizes = {("shop", "train"): 4}
    assert gang_of({("shop", "train"): ["6", "6"]}, sizes) == (6, [])
    assert gang_of({("shop", "train"): [None, None]}, sizes) == (4, [])
    assert gang_of({("shop", "train"): [None, None]}, {}) == (2, [])
    assert gang_of({("shop", "train"): [None, None]}) == (2, [])


def test_pod_groups_of_one_name_in_two_namespaces_are_two_gangs_named_by_namespace() -> None:
    size, problems = gang_of({("a", "train"): [None], ("b", "train"): [None, None]},
                             {("a", "train"): 4})
    assert size == 4
    assert problems == ["pod groups of different sizes (a/train: 4, b/train: 2); planned as "
                        "gangs of 4"]


def test_a_bad_size_annotation_is_named() -> None:
    size, problems = gang_of({("shop", "train"): ["zero", "zero"]})
    assert (size, problems) == (2, ["pod group train: sco/gang-size 'zero' is not a whole "
                                    "number of at least 1"])


def test_pod_groups_of_different_sizes_are_planned_as_the_largest() -> None:
    size, problems = gang_of({("shop", "a"): ["2", "2"], ("shop", "b"): ["3", None]})
    assert size == 3
    assert problems == ["pod groups of different sizes (a: 2, b: 3); planned as gangs of 3"]


def test_a_deleting_pod_is_not_seen_as_a_member() -> None:
    pods = (grouped("a"), grouped("b"), replace(grouped("c"), deleting=True))
    (claim,) = decide(pods).claims
    assert claim.gang == 2


# --- the claim delta -------------------------------------------------------------------------


def test_a_changed_gang_size_is_a_new_claim_version() -> None:
    base = ObservedClaim("train", "T1", {"cpu": 16_000}, {"cpu": 4000}, 4, "slurm", gang=4)
    stored = ClaimRecord("train", 2, "T1", dict(base.requests), dict(base.largest_pod), 4,
                         True, "slurm", "2026-01-01T00:00:00Z", gang=4)
    assert claim_write(stored, base) is None
    write = claim_write(stored, replace(base, gang=2))
    assert write is not None and (write.version, write.delta) == (3, True)


# --- a gang of pods packs (design: Gangs, Truth)
# -----------------------------------------------------


def _eight_vcpu(name: str, **spread: object) -> PodInfo:
    pod = replace(grouped(name, size="4"), tolerations=(
        Toleration("reclaimable", "Equal", "true", "NoSchedule"),))
    pod = replace(pod, containers=(Container("main", {"cpu": 8000, "memory": 8 * 2**30}),))
    if spread:
        pod = replace(pod, placement=Placement(spread=(Spread(**spread),)))  # type: ignore[arg-type]
    return pod


def test_a_gang_of_four_8_vcpu_pods_packs_onto_two_32_vcpu_units() -> None:
    """The issue's gang: 4 pods of 8 vCPU took 4 nodes of 32 vCPU. A 32 vCPU flavor (31
    allocatable) holds 3 of them; 2 units of 2 pods hold the gang (64 vCPU for 32 asked)."""
    (claim,) = decide(tuple(_eight_vcpu(f"p{i}") for i in range(4))).claims
    assert (claim.gang, claim.pods, claim.largest_pod["cpu"]) == (2, 2, 16000)
    assert claim.requests["cpu"] == 32000


def test_a_gang_whose_pods_ask_for_one_node_each_keeps_one_member_per_unit() -> None:
    pods = tuple(_eight_vcpu(f"p{i}", max_skew=1, topology_key="kubernetes.io/hostname",
                             when_unsatisfiable="DoNotSchedule") for i in range(4))
    (claim,) = decide(pods).claims
    assert (claim.gang, claim.pods, claim.largest_pod["cpu"]) == (4, 4, 8000)


def test_pack_gang_deals_the_pods_evenly_over_the_fewest_units() -> None:
    alloc = [{"cpu": 31000}, {"cpu": 7000}]
    assert pack_gang(4, {"cpu": 8000}, alloc, one_per_node=False) == Packing(2, 2)
    assert pack_gang(7, {"cpu": 4000}, alloc, one_per_node=False) == Packing(1, 7)
    assert pack_gang(9, {"cpu": 4000}, alloc, one_per_node=False) == Packing(2, 5)
    assert pack_gang(4, {"cpu": 8000}, alloc, one_per_node=True) == Packing(4, 1)
    assert pack_gang(4, {"cpu": 8000}, [], one_per_node=False) == Packing(4, 1)


def test_a_gang_whose_pods_keep_apart_by_anti_affinity_keeps_one_member_per_unit() -> None:
    pods = tuple(replace(_eight_vcpu(f"p{i}"), placement=Placement(alone=True))
                 for i in range(4))
    (claim,) = decide(pods).claims
    assert (claim.gang, claim.pods) == (4, 4)
