"""The capacity gate's decision (design: Gate): pure, over plain values, no I/O.

`decide_slurm` and `decide_k8s` answer one question: could any node, or (elastic) any
configured pool, ever hold this request? Verdicts, first match wins:

1. ``fits`` — some node holds CPU, memory and GPUs *at once* (a per-node conjunction: each
   resource fitting some node is not enough). Every node counts whatever its state: the gate
   asks "ever", not "now", so powered-down CLOUD, drained and down nodes count.
2. ``fits`` via a pool — unless elastic is off, a configured pool whose flavor's allocatable
   (``flavors[].allocatable``, else capacity minus ``node_reserve``) holds the whole request.
   The verdict names the pool.
   *Slurm* (our reading of "only where the partition has CLOUD nodes of that shape"): sbatch
   rejects shapes no node in slurm.conf has, and scoctl can only grow a partition through its
   CLOUD nodes, so a pool counts only if the partition has a power-saving node backing the
   pool's flavor — one whose features name the flavor (design: Operating's ``Feature=<flavor>``), or
   one with the flavor's vCPU count and GPU count. With a GPU type, that node must have GPUs of
   the type. Slurm RealMemory is usually set below the flavor's RAM, so memory is not compared.
   *Kubernetes*: any pool of a flavor that holds the request counts.
3. ``skipped`` — capacity unreadable: the caller passes ``nodes=None`` (sinfo missing, failing,
   hanging, unparseable; the Kubernetes API unreadable), or no nodes at all, or (Kubernetes, a
   GPU request) no node advertises the GPU resource (`largest_allocatable` is None). Never a
   false failure.
4. ``over_capacity`` — nothing can hold it; the reason says which resource no node has, or that
   each fits some node but no node all of them.

*Best candidate node* (the verdict's ``node``): when it fits, the fitting node that is running
now (not powered down) before one that must be resumed, then the smallest (GPUs, CPUs, memory),
then by name — the node the request would most naturally land on. When over capacity: the
node that satisfies the most requested resources, then the largest (GPUs, CPUs, memory), then
by name — the node closest to holding it. GPUs reported are those the request counts (of its
type, when it names one).

Units: the request is in Slurm's terms (CPUs — whole for Slurm, a part of one for a pod —, MB
of memory, a GPU count). Kubernetes allocatable is canonical (`scoctl.core.quantity`): cpu
millicores, memory bytes, counts.
A GPU type only filters Slurm GRES; Kubernetes has no GRES type, so it is ignored there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from scoctl.core.gres import DEFAULT_GPU_RESOURCE, DEFAULT_GRES_MAP, Gres, gpu_count
from scoctl.core.model import ELASTIC_FLAGS, Flavor, Pool, flavor_allocatable
from scoctl.core.quantity import CPU, MEMORY, Resources, cores

Verdict = Literal["fits", "over_capacity", "skipped"]
FITS: Verdict = "fits"
OVER_CAPACITY: Verdict = "over_capacity"
SKIPPED: Verdict = "skipped"

MIB = 2**20

# Slurm node flags meaning power saving can bring the node up (the sinfo format-string fallback
# cannot see CLOUD itself, only the power states).

_GPU = "gpu"


@dataclass(frozen=True)
class GateRequest:
    """What one job or pod asks for: CPUs (whole for Slurm; a pod may ask for a part, 0.5),
    memory in MB (MiB), a GPU count.

    `gpu_type` filters Slurm GRES types (``a100``); `gpu_resource` names the GPU resource in
    Kubernetes and in flavor accelerators (``nvidia.com/gpu``).
    """

    cpus: int | float = 1
    memory_mb: int = 0
    gpus: int = 0
    gpu_type: str | None = None
    gpu_resource: str = DEFAULT_GPU_RESOURCE

    def describe(self) -> str:
        """``4 CPUs, 16384 MB, 2 a100 GPUs``."""
        parts = [f"{self.cpus} CPUs"]
        if self.memory_mb:
            parts.append(f"{self.memory_mb} MB")
        if self.gpus:
            parts.append(f"{self.gpus} {self.gpu_type + ' ' if self.gpu_type else ''}GPUs")
        return ", ".join(parts)


@dataclass(frozen=True)
class CandidateNode:
    """The node a verdict points at (design: Schemas's gate ``node`` object)."""

    name: str
    cpus: int | float
    memory_mb: int
    gpus: int


@dataclass(frozen=True)
class GateVerdict:
    """The gate's answer; `node` and `pool` as described in the module docstring."""

    verdict: Verdict
    reason: str
    node: CandidateNode | None = None
    pool: str | None = None

    def as_dict(self) -> dict[str, object]:
        """The verdict part of design: Schemas's ``scoctl gate --json`` object."""
        node = None
        if self.node is not None:
            node = {
                "name": self.node.name,
                "cpus": self.node.cpus,
                "memory_mb": self.node.memory_mb,
                "gpus": self.node.gpus,
            }
        return {"verdict": self.verdict, "reason": self.reason, "node": node, "pool": self.pool}


class SlurmNodeView(Protocol):
    """What the gate reads of a Slurm node (`scoctl.adapters.batch.SlurmNode` has it)."""

    @property
    def name(self) -> str: ...
    @property
    def cpus(self) -> int: ...
    @property
    def memory_mb(self) -> int: ...
    @property
    def gres(self) -> tuple[Gres, ...]: ...
    @property
    def flags(self) -> frozenset[str]: ...
    @property
    def features(self) -> tuple[str, ...]: ...


class K8sNodeView(Protocol):
    """What the gate reads of a Kubernetes node: its allocatable in canonical units."""

    @property
    def name(self) -> str: ...
    @property
    def allocatable(self) -> Resources: ...


@dataclass(frozen=True)
class NodeAllocatable:
    """A plain `K8sNodeView`: a node name and its allocatable (cpu millicores, memory bytes)."""

    name: str
    allocatable: Resources


@dataclass(frozen=True)
class _Shape:
    """A node reduced to what the request asks about, in the request's units."""

    name: str
    cpus: int | float
    memory_mb: int
    gpus: int
    resumable: bool = False


def _satisfied(request: GateRequest, shape: _Shape) -> tuple[bool, bool, bool]:
    return (
        shape.cpus >= request.cpus,
        shape.memory_mb >= request.memory_mb,
        shape.gpus >= request.gpus,
    )


def _candidate(shape: _Shape) -> CandidateNode:
    return CandidateNode(shape.name, shape.cpus, shape.memory_mb, shape.gpus)


def _best_fit(shapes: Sequence[_Shape]) -> _Shape:
    return min(shapes, key=lambda s: (s.resumable, s.gpus, s.cpus, s.memory_mb, s.name))


def _closest(request: GateRequest, shapes: Sequence[_Shape]) -> _Shape:
    return min(
        shapes,
        key=lambda s: (-sum(_satisfied(request, s)), -s.gpus, -s.cpus, -s.memory_mb, s.name),
    )


def _over_capacity_reason(request: GateRequest, shapes: Sequence[_Shape], where: str) -> str:
    """Which resource no node has; or the conjunction message when each fits somewhere."""
    checks = [
        ("CPUs", request.cpus, max(s.cpus for s in shapes), True),
        ("MB of memory", request.memory_mb, max(s.memory_mb for s in shapes), True),
        (
            f"{request.gpu_type + ' ' if request.gpu_type else ''}GPUs",
            request.gpus,
            max(s.gpus for s in shapes),
            request.gpus > 0,
        ),
    ]
    missing = [
        f"no node {where}has {wanted} {label} (largest: {largest})"
        for label, wanted, largest, asked in checks
        if asked and wanted > largest
    ]
    if missing:
        return "; ".join(missing)
    return f"each resource fits some node {where}but no node holds {request.describe()} at once"


def _flavor_holds(request: GateRequest, allocatable: Resources) -> bool:
    return (
        allocatable.get(CPU, 0) >= request.cpus * 1000
        and allocatable.get(MEMORY, 0) >= request.memory_mb * MIB
        and (request.gpus == 0 or allocatable.get(request.gpu_resource, 0) >= request.gpus)
    )


def _fitting_pools(
    request: GateRequest,
    pools: Iterable[Pool],
    flavors: Iterable[Flavor],
    node_reserve: Resources | None,
) -> list[tuple[Pool, Flavor, dict[str, int]]]:
    """Pools whose flavor holds the request, smallest flavor first, then by pool name."""
    by_name = {f.name: f for f in flavors}
    out = []
    for pool in pools:
        flavor = by_name.get(pool.flavor)
        if flavor is None:
            continue
        allocatable = flavor_allocatable(flavor, node_reserve)
        if _flavor_holds(request, allocatable):
            out.append((pool, flavor, allocatable))
    return sorted(
        out,
        key=lambda t: (
            t[2].get(request.gpu_resource, 0),
            t[2].get(CPU, 0),
            t[2].get(MEMORY, 0),
            t[0].name,
        ),
    )


def _where(partition: str | None) -> str:
    return f"in partition {partition} " if partition else ""


def decide_slurm(
    request: GateRequest,
    nodes: Sequence[SlurmNodeView] | None,
    pools: Iterable[Pool] = (),
    flavors: Iterable[Flavor] = (),
    *,
    elastic: bool = True,
    partition: str | None = None,
    gres_map: Mapping[str, str] = DEFAULT_GRES_MAP,
    node_reserve: Resources | None = None,
    unreadable: str | None = None,
) -> GateVerdict:
    """The gate for a Slurm partition (see the module docstring for the rules).

    `nodes` are the partition's nodes (None when sinfo/slurmrestd could not be read; then
    `unreadable` says why). GRES named by `gres_map` as `request.gpu_resource` (and ``gpu``)
    count as GPUs, of `request.gpu_type` only when it is set. `partition` is only used in
    reasons.
    """
    where = _where(partition)
    if nodes is None:
        return GateVerdict(SKIPPED, f"node capacity unreadable: {unreadable or 'unknown error'}")
    if not nodes:
        return GateVerdict(SKIPPED, f"no nodes {where}to judge by")

    def shape(node: SlurmNodeView) -> _Shape:
        gpus = gpu_count(node.gres, request.gpu_type, gres_map, request.gpu_resource)
        return _Shape(node.name, node.cpus, node.memory_mb, gpus, bool(node.flags & ELASTIC_FLAGS))

    shapes = [shape(n) for n in nodes]
    fitting = [s for s in shapes if all(_satisfied(request, s))]
    if fitting:
        best = _best_fit(fitting)
        return GateVerdict(
            FITS, f"{len(fitting)} of {len(shapes)} nodes {where}can hold it", _candidate(best)
        )

    if elastic:
        for pool, flavor, _ in _fitting_pools(request, pools, flavors, node_reserve):
            backing = [n for n in nodes if _backs(n, flavor, request, gres_map)]
            if backing:
                return GateVerdict(
                    FITS,
                    f"no node {where}can hold it, but pool {pool.name} (flavor {flavor.name}) "
                    f"can, through CLOUD node {sorted(n.name for n in backing)[0]}",
                    pool=pool.name,
                )

    closest = _closest(request, shapes)
    return GateVerdict(
        OVER_CAPACITY, _over_capacity_reason(request, shapes, where), _candidate(closest)
    )


def _backs(
    node: SlurmNodeView,
    flavor: Flavor,
    request: GateRequest,
    gres_map: Mapping[str, str],
) -> bool:
    """Whether a power-saving node of the partition stands for `flavor` (see module doc)."""
    if not node.flags & ELASTIC_FLAGS:
        return False
    if (
        request.gpu_type
        and gpu_count(node.gres, request.gpu_type, gres_map, request.gpu_resource) == 0
    ):
        return False
    if flavor.name in node.features:
        return True
    node_gpus = gpu_count(node.gres, None, gres_map, request.gpu_resource)
    flavor_gpus = flavor.accelerators.get(request.gpu_resource, 0)
    return node.cpus == flavor.vcpus and node_gpus == flavor_gpus


def largest_allocatable(nodes: Iterable[K8sNodeView] | None, resource: str) -> int | None:
    """The largest allocatable of `resource` across `nodes` — None, not 0, when the nodes
    could not be read or no node advertises a positive amount (DD-0018 §4a: then the gate is
    skipped rather than failing a request; a GPU node whose device plugin is down reports 0)."""
    if nodes is None:
        return None
    amounts = [n.allocatable.get(resource, 0) for n in nodes]
    largest = max(amounts, default=0)
    return largest if largest > 0 else None


def decide_k8s(
    request: GateRequest,
    nodes: Sequence[K8sNodeView] | None,
    pools: Iterable[Pool] = (),
    flavors: Iterable[Flavor] = (),
    *,
    elastic: bool = True,
    node_reserve: Resources | None = None,
    unreadable: str | None = None,
) -> GateVerdict:
    """The gate for Kubernetes (see the module docstring for the rules).

    `nodes` carry allocatable in canonical units (None when the API could not be read; then
    `unreadable` says why). The GPU resource is `request.gpu_resource`.
    """
    resource = request.gpu_resource
    shapes: list[_Shape] = []
    if nodes:
        for node in nodes:
            alloc = node.allocatable
            shapes.append(
                _Shape(
                    node.name,
                    cores(alloc.get(CPU, 0)),
                    alloc.get(MEMORY, 0) // MIB,
                    alloc.get(resource, 0),
                )
            )
    fitting = [s for s in shapes if all(_satisfied(request, s))]
    if fitting:
        best = _best_fit(fitting)
        return GateVerdict(
            FITS, f"{len(fitting)} of {len(shapes)} nodes can hold it", _candidate(best)
        )

    if elastic:
        pools_fitting = _fitting_pools(request, pools, flavors, node_reserve)
        if pools_fitting:
            pool, flavor, _ = pools_fitting[0]
            return GateVerdict(
                FITS,
                f"no node can hold it, but pool {pool.name} (flavor {flavor.name}) can",
                pool=pool.name,
            )

    if nodes is None:
        return GateVerdict(SKIPPED, f"node capacity unreadable: {unreadable or 'unknown error'}")
    if not nodes:
        return GateVerdict(SKIPPED, "no nodes to judge by")
    if request.gpus and largest_allocatable(nodes, resource) is None:
        return GateVerdict(SKIPPED, f"no node advertises {resource}: GPU capacity unknown")

    closest = _closest(request, shapes)
    return GateVerdict(
        OVER_CAPACITY, _over_capacity_reason(request, shapes, ""), _candidate(closest)
    )
