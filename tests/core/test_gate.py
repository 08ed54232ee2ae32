"""The capacity gate's pure decision: fits, fits via a pool, skipped, over capacity."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.gate import (
    CandidateNode,
    GateRequest,
    NodeAllocatable,
    decide_k8s,
    decide_slurm,
    largest_allocatable,
)
from scoctl.core.gres import Gres, parse_gres
from scoctl.core.model import Flavor, Pool, flavor_allocatable

GIB = 2**30
MIB = 2**20


@dataclass(frozen=True)
class Node:
    """A Slurm node as the gate reads it (the adapter's SlurmNode has the same fields)."""

    name: str
    cpus: int
    memory_mb: int
    gres: tuple[Gres, ...] = ()
    flags: frozenset[str] = frozenset()
    features: tuple[str, ...] = ()


def make_node(
    name: str,
    cpus: int,
    memory_mb: int,
    gres: str = "",
    *,
    cloud: bool = False,
    features: tuple[str, ...] = (),
) -> Node:
    flags = frozenset({"CLOUD", "POWERED_DOWN"}) if cloud else frozenset()
    return Node(name, cpus, memory_mb, parse_gres(gres), flags, features)


# The test cluster's `ml` partition (scripts/slurm-start.sh), as sinfo shows it.
ML = [
    make_node("local1", 4, 4000, "gpu:fake:2"),
    make_node("gpu-a100-1", 32, 512000, "gpu:a100:4", cloud=True),
    make_node("gpu-a100-2", 32, 512000, "gpu:a100:4", cloud=True),
    make_node("gpu-h100-1", 96, 1024000, "gpu:h100:8(S:0-1)", cloud=True),
    make_node("gpu-any-1", 16, 128000, "gpu:2", cloud=True),
]


def req(
    cpus: int = 1, memory_mb: int = 0, gpus: int = 0, gpu_type: str | None = None
) -> GateRequest:
    return GateRequest(cpus=cpus, memory_mb=memory_mb, gpus=gpus, gpu_type=gpu_type)


def flavor(name: str, vcpus: int, ram_gib: int, gpus: int = 0, **alloc: int) -> Flavor:
    accelerators = {"nvidia.com/gpu": gpus} if gpus else {}
    return Flavor(name=name, vcpus=vcpus, ram=ram_gib * GIB, accelerators=accelerators)


def pool(name: str, flavor_name: str) -> Pool:
    return Pool(
        name=name, region="r", az="az1", flavor=flavor_name, group="g", tier="reclaimable", depth=10
    )


# ---------------------------------------------------------------------------------- Slurm
def test_request_that_a_node_holds_fits_and_names_the_node() -> None:
    verdict = decide_slurm(req(cpus=2, memory_mb=1000, gpus=1), ML, partition="ml")
    assert verdict.verdict == "fits"
    assert verdict.node == CandidateNode("local1", 4, 4000, 2)
    assert verdict.pool is None


@pytest.mark.parametrize(
    ("request_", "words"),
    [
        (req(cpus=128), "no node in partition ml has 128 CPUs (largest: 96)"),
        (req(memory_mb=2_000_000), "2000000 MB of memory (largest: 1024000)"),
        (req(gpus=16), "has 16 GPUs (largest: 8)"),
        (req(gpus=8, gpu_type="a100"), "8 a100 GPUs (largest: 4)"),
    ],
)
def test_each_resource_alone_too_big_is_over_capacity(request_: GateRequest, words: str) -> None:
    verdict = decide_slurm(request_, ML, partition="ml")
    assert verdict.verdict == "over_capacity"
    assert words in verdict.reason


def test_each_resource_fits_some_node_but_none_holds_all_is_over_capacity() -> None:
    # 96 CPUs only on the h100 node, 4 a100 GPUs only on the a100 nodes
    verdict = decide_slurm(req(cpus=96, gpus=4, gpu_type="a100"), ML, partition="ml")
    assert verdict.verdict == "over_capacity"
    assert "each resource fits some node in partition ml but no node holds" in verdict.reason
    # best candidate: a100 and h100 nodes both satisfy two of three resources; then the
    # largest by (requested GPUs, CPUs, memory) wins, and the h100 node has no a100 GPUs
    assert verdict.node == CandidateNode("gpu-a100-1", 32, 512000, 4)


def test_gpu_type_filter_counts_only_gpus_of_that_type() -> None:
    assert decide_slurm(req(gpus=8, gpu_type="h100"), ML).verdict == "fits"
    assert decide_slurm(req(gpus=4, gpu_type="a100"), ML).node.name == "gpu-a100-1"  # type: ignore[union-attr]
    assert decide_slurm(req(gpus=1, gpu_type="v100"), ML).verdict == "over_capacity"


def test_untyped_gpus_hold_untyped_requests_but_never_typed_ones() -> None:
    nodes = [make_node("plain", 16, 64000, "gpu:2")]
    assert decide_slurm(req(gpus=2), nodes).verdict == "fits"
    assert decide_slurm(req(gpus=2, gpu_type="a100"), nodes).verdict == "over_capacity"


def test_several_gres_entries_on_one_node_add_up() -> None:
    nodes = [make_node("mixed", 16, 64000, "gpu:a100:2,gpu:v100:2,mps:100")]
    assert decide_slurm(req(gpus=4), nodes).verdict == "fits"
    assert decide_slurm(req(gpus=3, gpu_type="a100"), nodes).verdict == "over_capacity"


def test_gres_map_decides_which_gres_are_gpus() -> None:
    nodes = [make_node("n", 8, 8000, "tesla:4")]
    assert decide_slurm(req(gpus=4), nodes).verdict == "over_capacity"
    mapped = decide_slurm(req(gpus=4), nodes, gres_map={"tesla": "nvidia.com/gpu"})
    assert mapped.verdict == "fits"


def test_powered_down_cloud_nodes_count_but_a_running_node_is_preferred() -> None:
    cloud_only = decide_slurm(req(cpus=64), ML)
    assert cloud_only.verdict == "fits" and cloud_only.node.name == "gpu-h100-1"  # type: ignore[union-attr]
    both = [make_node("cloud-small", 4, 4000, cloud=True), make_node("real-big", 64, 256000)]
    assert decide_slurm(req(cpus=2), both).node.name == "real-big"  # type: ignore[union-attr]


def test_fitting_node_reported_is_the_smallest_that_fits() -> None:
    verdict = decide_slurm(req(cpus=8, gpus=2), ML)
    assert verdict.node == CandidateNode("gpu-any-1", 16, 128000, 2)


def test_unreadable_capacity_is_skipped_never_failed() -> None:
    verdict = decide_slurm(req(cpus=10_000), None, unreadable="sinfo: no answer within 10 s")
    assert verdict.verdict == "skipped"
    assert "sinfo: no answer within 10 s" in verdict.reason
    assert verdict.node is None


def test_a_partition_without_nodes_is_skipped() -> None:
    assert decide_slurm(req(), [], partition="nosuch").verdict == "skipped"


def test_slurm_pool_fit_needs_a_cloud_node_backing_the_flavor() -> None:
    # the CLOUD node of flavor g8.a100 is declared with less memory than the flavor has
    nodes = [
        make_node("local1", 4, 4000),
        make_node("a100-[1-4]", 32, 200000, "gpu:a100:4", cloud=True, features=("g8.a100",)),
    ]
    flavors = [flavor("g8.a100", 32, 512, gpus=4), flavor("huge", 256, 4096, gpus=8)]
    pools = [pool("a100.az1.spot", "g8.a100"), pool("huge.az1.spot", "huge")]
    request = req(cpus=16, memory_mb=400_000, gpus=4, gpu_type="a100")

    verdict = decide_slurm(request, nodes, pools, flavors, partition="ml")
    assert verdict.verdict == "fits"
    assert verdict.pool == "a100.az1.spot"
    assert verdict.node is None

    assert decide_slurm(request, nodes, pools, flavors, elastic=False).verdict == "over_capacity"
    # the huge flavor holds 8 GPUs, but no CLOUD node of the partition stands for it
    assert decide_slurm(req(gpus=8), nodes, pools, flavors).verdict == "over_capacity"


def test_slurm_pool_backing_by_shape_without_a_feature() -> None:
    nodes = [make_node("c-1", 16, 60000, cloud=True)]
    flavors = [flavor("c4.xlarge", 16, 64)]
    verdict = decide_slurm(req(cpus=16, memory_mb=62000), nodes, [pool("p", "c4.xlarge")], flavors)
    assert (verdict.verdict, verdict.pool) == ("fits", "p")
    real = [make_node("c-1", 16, 60000)]  # not a CLOUD node: scoctl cannot grow it
    assert (
        decide_slurm(req(cpus=16, memory_mb=62000), real, [pool("p", "c4.xlarge")], flavors).verdict
        == "over_capacity"
    )


def test_slurm_pool_cannot_help_when_capacity_is_unreadable() -> None:
    verdict = decide_slurm(req(), None, [pool("p", "f")], [flavor("f", 8, 32)])
    assert verdict.verdict == "skipped"


def test_as_dict_is_the_gate_json_object() -> None:
    verdict = decide_slurm(req(cpus=2), ML)
    assert verdict.as_dict() == {
        "verdict": "fits",
        "reason": verdict.reason,
        "node": {"name": "local1", "cpus": 4, "memory_mb": 4000, "gpus": 2},
        "pool": None,
    }


# ----------------------------------------------------------------------------- Kubernetes
def k8s_node(
    name: str, cpu_milli: int, memory_gib: int, gpus: int | None = None
) -> NodeAllocatable:
    allocatable = {"cpu": cpu_milli, "memory": memory_gib * GIB}
    if gpus is not None:
        allocatable["nvidia.com/gpu"] = gpus
    return NodeAllocatable(name, allocatable)


K8S = [k8s_node("cpu-1", 15_900, 60), k8s_node("gpu-1", 7_900, 30, gpus=4)]


def test_k8s_request_a_node_holds_fits() -> None:
    verdict = decide_k8s(req(cpus=4, memory_mb=16384, gpus=2), K8S)
    assert verdict.verdict == "fits"
    assert verdict.node == CandidateNode("gpu-1", 7.9, 30 * 1024, 4)


def test_k8s_checks_cpu_memory_and_gpu_as_one_conjunction_per_node() -> None:
    verdict = decide_k8s(req(cpus=12, gpus=2), K8S)
    assert verdict.verdict == "over_capacity"
    assert "each resource fits some node but no node holds" in verdict.reason
    assert decide_k8s(req(cpus=16), K8S).verdict == "over_capacity"  # 15.9 allocatable cores


def test_k8s_without_gpu_nodes_skips_gpu_requests_instead_of_failing() -> None:
    cpu_only = [k8s_node("cpu-1", 16_000, 64), k8s_node("cpu-2", 16_000, 64, gpus=0)]
    assert largest_allocatable(cpu_only, "nvidia.com/gpu") is None
    verdict = decide_k8s(req(gpus=1), cpu_only)
    assert verdict.verdict == "skipped"
    assert "no node advertises nvidia.com/gpu" in verdict.reason
    # a CPU request is still judged: 64 cores is beyond every node
    assert decide_k8s(req(cpus=64), cpu_only).verdict == "over_capacity"


def test_k8s_unreadable_nodes_are_skipped() -> None:
    assert largest_allocatable(None, "nvidia.com/gpu") is None
    verdict = decide_k8s(req(gpus=1), None, unreadable="HTTP 503")
    assert verdict.verdict == "skipped" and "HTTP 503" in verdict.reason


def test_k8s_largest_allocatable_is_the_maximum_across_nodes() -> None:
    assert largest_allocatable(K8S + [k8s_node("gpu-2", 1000, 1, gpus=8)], "nvidia.com/gpu") == 8


def test_k8s_gpu_request_over_the_largest_node_is_over_capacity() -> None:
    verdict = decide_k8s(req(gpus=8), K8S)
    assert verdict.verdict == "over_capacity"
    assert verdict.node is not None and verdict.node.name == "gpu-1"


def test_k8s_elastic_fit_through_a_pool_flavor_names_the_pool() -> None:
    flavors = [flavor("g4.large", 32, 128, gpus=8), flavor("g2.small", 16, 64, gpus=8)]
    pools = [pool("g4.az1.spot", "g4.large"), pool("g2.az1.spot", "g2.small")]
    verdict = decide_k8s(req(cpus=8, gpus=8), K8S, pools, flavors)
    assert (verdict.verdict, verdict.pool) == ("fits", "g2.az1.spot")  # the smallest that holds it
    assert decide_k8s(req(cpus=8, gpus=8), K8S, pools, flavors, elastic=False).verdict == (
        "over_capacity"
    )
    # a pool also answers when no node has GPUs, or nodes are unreadable
    assert decide_k8s(req(gpus=8), None, pools, flavors).pool == "g2.az1.spot"


def test_pool_flavor_is_judged_by_its_allocatable_not_its_capacity() -> None:
    f = flavor("c16", 16, 64)
    assert flavor_allocatable(f, {"cpu": 100, "memory": GIB}) == {"cpu": 15_900, "memory": 63 * GIB}
    pools = [pool("p", "c16")]
    assert decide_k8s(req(cpus=16), [], pools, [f]).verdict == "fits"
    reserved = decide_k8s(req(cpus=16), [], pools, [f], node_reserve={"cpu": 100})
    assert reserved.verdict == "skipped"  # no nodes at all, and the pool is too small
    explicit = Flavor("c16", 16, 64 * GIB, allocatable={"cpu": 14_000, "memory": 60 * GIB})
    assert flavor_allocatable(explicit, {"cpu": 100}) == {"cpu": 14_000, "memory": 60 * GIB}


# ----------------------------------------------------------------------------- properties
node_strategy = st.builds(
    make_node,
    name=st.sampled_from(["n1", "n2", "n3", "n4", "n5"]),
    cpus=st.integers(1, 128),
    memory_mb=st.integers(1000, 1_000_000),
    gres=st.sampled_from(["", "gpu:2", "gpu:a100:4", "gpu:h100:8(S:0-1)", "gpu:a100:2,mps:100"]),
    cloud=st.booleans(),
)
request_strategy = st.builds(
    req,
    cpus=st.integers(1, 160),
    memory_mb=st.integers(0, 1_200_000),
    gpus=st.integers(0, 10),
    gpu_type=st.sampled_from([None, "a100", "h100"]),
)


def _holds(node: Node, request: GateRequest) -> bool:
    gpus = sum(
        g.count
        for g in node.gres
        if g.name == "gpu" and (request.gpu_type is None or g.type == request.gpu_type)
    )
    return (
        node.cpus >= request.cpus and node.memory_mb >= request.memory_mb and gpus >= request.gpus
    )


@given(st.lists(node_strategy, min_size=1, max_size=6), request_strategy)
def test_fits_exactly_when_one_node_holds_every_resource(
    nodes: list[Node], request: GateRequest
) -> None:
    verdict = decide_slurm(request, nodes)
    assert verdict.verdict == (
        "fits" if any(_holds(n, request) for n in nodes) else "over_capacity"
    )
    assert verdict.node is not None
    if verdict.verdict == "fits":
        assert any(_holds(n, request) for n in nodes if n.name == verdict.node.name)


@given(st.lists(node_strategy, min_size=1, max_size=6), request_strategy, node_strategy)
def test_adding_a_node_never_turns_fits_into_over_capacity(
    nodes: list[Node], request: GateRequest, extra: Node
) -> None:
    if decide_slurm(request, nodes).verdict == "fits":
        assert decide_slurm(request, [*nodes, extra]).verdict == "fits"


@given(st.lists(node_strategy, min_size=1, max_size=6), request_strategy)
def test_a_smaller_request_still_fits(nodes: list[Node], request: GateRequest) -> None:
    if decide_slurm(request, nodes).verdict == "fits":
        smaller = req(
            max(1, request.cpus // 2), request.memory_mb // 2, request.gpus // 2, request.gpu_type
        )
        assert decide_slurm(smaller, nodes).verdict == "fits"


@given(request_strategy, st.one_of(st.none(), st.just([])))
def test_unreadable_or_empty_capacity_is_never_a_failure(
    request: GateRequest, nodes: list[Node] | None
) -> None:
    assert decide_slurm(request, nodes).verdict == "skipped"
    assert decide_k8s(request, nodes).verdict == "skipped"
