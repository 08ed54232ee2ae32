"""Where pods may run (design: Constraints), pure: the labels a unit's Node will carry, whether a
pod's
placement (nodeSelector, required node affinity, tolerations, the zones of its volumes) admits
a node with given labels and taints, which pools a group of pods may use, and which pods keep
their node from voluntary disruption.

The matching follows kube-scheduler's filters, as `k8s.io/component-helpers/scheduling/corev1/
nodeaffinity` (`nodeSelectorTerm.match`, `nodeSelectorRequirementsAsSelector`) and
`k8s.io/api/core/v1.Toleration.ToleratesTaint` define them:

* nodeSelector: every key=value pair is a label of the node;
* required node affinity: the terms are ORed, the requirements of a term ANDed; a term with
  no requirements matches nothing; ``In`` / ``NotIn`` / ``Exists`` / ``DoesNotExist`` as label
  selectors, ``Gt`` / ``Lt`` compare the label's value as an integer with the one value given
  (a label that is not an integer matches neither); a requirement the API would reject (``In``
  with no values, ``Gt`` with two) matches nothing;
* taints: a ``NoSchedule`` or ``NoExecute`` taint must be tolerated (``PreferNoSchedule``
  only orders nodes); a toleration with an empty effect matches every effect, an empty key
  with ``Exists`` every taint;
* spread constraints (``DoNotSchedule``) need the topology key on the node;
* volumes: a pod whose bound PersistentVolume says a zone runs only in that zone.

A new node's name (``kubernetes.io/hostname``, ``metadata.name``) is unknown before it boots: it
exists, and no ``In`` of a name matches it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

from scoctl.core.model.vocabulary import DisruptionReason

if TYPE_CHECKING:  # annotations only: the Slurm gate (config -> user data) builds no pod
    from scoctl.core.model import Placement, PodInfo, Pool, Requirement, Taint, Toleration

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
HOSTNAME_LABEL = "kubernetes.io/hostname"
NAME_FIELD = "metadata.name"  # a `matchFields` requirement's key
DO_NOT_DISRUPT = ("karpenter.sh/do-not-disrupt", "true")
SAFE_TO_EVICT = ("cluster-autoscaler.kubernetes.io/safe-to-evict", "false")
# Labels a node has whose value is not known before it registers (its name).
_UNKNOWN_VALUE = frozenset({HOSTNAME_LABEL, NAME_FIELD})
# What kubelet itself puts on every Linux node it registers.
KUBELET_LABELS: Mapping[str, str] = {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
_FILTERED_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
# an exclusive workload's units carry its name as this label and as a NoSchedule taint
WORKLOAD_KEY = "sco/workload"


def workload_taint(workload: str) -> str:
    """The taint an exclusive workload's units register with (kubelet's form)."""
    return f"{WORKLOAD_KEY}={workload}:NoSchedule"


def unit_labels(*, workload: str, contract: str, pool: str, tier: str, group: str, region: str,
                az: str, flavor: str, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The labels the Node of a unit carries: kubelet's own, scoctl's (``sco/*``), the
    topology and instance-type labels, then `extra` (``pools[].labels`` and the workload's
    ``node_labels``, which may override kubelet's ``kubernetes.io/arch``). The user-data
    contract hands exactly these to kubelet (`core.userdata.BootContract.labels`)."""
    labels = {
        **KUBELET_LABELS,
        "sco/managed": "true",
        "sco/workload": workload,
        "sco/pool": pool,
        "sco/contract": contract,
        "sco/tier": tier,
        "sco/reclaimable": "true" if tier == "reclaimable" else "false",
        INSTANCE_TYPE_LABEL: flavor,
    }
    if group:
        labels["sco/group"] = group
    if az:
        labels[ZONE_LABEL] = az
    if region:
        labels[REGION_LABEL] = region
    labels.update(extra or {})
    return labels


def pool_labels(pool: Pool, *, workload: str, contract: str,
                extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """`unit_labels` of a unit of `pool` for `workload`."""
    return unit_labels(workload=workload, contract=contract, pool=pool.name, tier=pool.tier,
                       group=pool.group, region=pool.region, az=pool.az, flavor=pool.flavor,
                       extra=extra)


# --- matching -------------------------------------------------------------------------------


def _requirement_matches(req: Requirement, labels: Mapping[str, str], *, new_node: bool) -> bool:
    op = req.operator
    present = req.key in labels or (new_node and req.key in _UNKNOWN_VALUE)
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    unknown = new_node and req.key in _UNKNOWN_VALUE and req.key not in labels
    value = labels.get(req.key)
    if op == "In":
        return bool(req.values) and not unknown and value is not None and value in req.values
    if op == "NotIn":
        return bool(req.values) and (unknown or value is None or value not in req.values)
    if op in ("Gt", "Lt"):
        if len(req.values) != 1 or value is None or unknown:
            return False
        try:
            have, want = int(value), int(req.values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False  # an operator the API does not know


def term_matches(term: Sequence[Requirement], labels: Mapping[str, str], *,
                 new_node: bool = True) -> bool:
    """A node selector term: every requirement holds (an empty term matches nothing)."""
    return bool(term) and all(_requirement_matches(r, labels, new_node=new_node) for r in term)


def _describe(req: Requirement) -> str:
    if req.operator in ("Exists", "DoesNotExist"):
        return f"{req.key} {req.operator}"
    return f"{req.key} {req.operator} [{', '.join(req.values)}]"


def _describe_term(term: Sequence[Requirement]) -> str:
    return " and ".join(map(_describe, term)) or "an empty term"


def placement_refusal(placement: Placement | None, labels: Mapping[str, str], *,
                      volume_zones: Sequence[str] = (), new_node: bool = True) -> str | None:
    """Why a node with `labels` cannot take a pod of `placement`, naming the constraint, or
    None when it can. `volume_zones` are the zones of the pod's bound PersistentVolumes."""
    for zone in volume_zones:
        if labels.get(ZONE_LABEL) != zone:
            return f"volume zone {zone}"
    if placement is None:
        return None
    for key, value in placement.node_selector:
        if labels.get(key) != value:
            return f"nodeSelector {key}={value}"
    if placement.required is not None and not any(
            term_matches(t, labels, new_node=new_node) for t in placement.required):
        terms = " or ".join(_describe_term(t) for t in placement.required) or "no terms"
        return f"required node affinity {terms}"
    for spread in placement.spread:
        if spread.when_unsatisfiable == "DoNotSchedule" and not (
                spread.topology_key in labels
                or (new_node and spread.topology_key in _UNKNOWN_VALUE)):
            return f"topology spread needs the label {spread.topology_key}"
    return None


def tolerates(toleration: Toleration, taint: Taint) -> bool:
    """`v1.Toleration.ToleratesTaint`."""
    if toleration.effect and toleration.effect != taint.effect:
        return False
    if toleration.key and toleration.key != taint.key:
        return False
    if toleration.operator == "Exists":
        return True
    return toleration.operator in ("Equal", "") and toleration.value == taint.value


def untolerated_taint(tolerations: Iterable[Toleration], taints: Iterable[Taint]) -> Taint | None:
    """The first NoSchedule / NoExecute taint no toleration tolerates, or None."""
    held = tuple(tolerations)
    for taint in taints:
        if taint.effect in _FILTERED_EFFECTS and not any(tolerates(t, taint) for t in held):
            return taint
    return None


def pod_refusal(pod: PodInfo, labels: Mapping[str, str], taints: Sequence[Taint] = (), *,
                volume_zones: Sequence[str] = (), new_node: bool = True) -> str | None:
    """Why `pod` could not run on a node with `labels` and `taints` (its resources aside), or
    None when it could."""
    why = placement_refusal(pod.placement, labels, volume_zones=volume_zones, new_node=new_node)
    if why is not None:
        return why
    taint = untolerated_taint(pod.tolerations, taints)
    if taint is not None:
        return f"taint {taint.key}={taint.value}:{taint.effect} not tolerated"
    return None


def preference(placement: Placement | None, labels: Mapping[str, str]) -> int:
    """The summed weight of the preferred node affinity terms a node with `labels` matches
    (soft terms only order pools)."""
    if placement is None:
        return 0
    return sum(weight for weight, term in placement.preferred if term_matches(term, labels))


# --- pools of a group of pods ---------------------------------------------------------------


@dataclass(frozen=True)
class Eligibility:
    """Which pools a group of pods may use: `ineligible` maps a pool to the constraint that
    rules it out; `preferred` is the summed weight of soft terms per eligible pool."""

    ineligible: Mapping[str, str]
    preferred: Mapping[str, int]


def pools_for(placement: Placement | None, pools: Iterable[Pool], *, workload: str,
              contract: str, extra: Mapping[str, Mapping[str, str]],
              volume_zones: Sequence[str] = ()) -> Eligibility:
    """The pools a pod of `placement` may run on (reclaimable taint and resources aside: the
    planner judges those). `extra` maps a pool to the labels beyond `unit_labels`'s own that
    its nodes carry for `workload` (``pools[].labels`` and ``workloads[].node_labels``)."""
    ineligible: dict[str, str] = {}
    preferred: dict[str, int] = {}
    for pool in pools:
        labels = pool_labels(pool, workload=workload, contract=contract,
                             extra=extra.get(pool.name))
        why = placement_refusal(placement, labels, volume_zones=volume_zones)
        if why is None:
            weight = preference(placement, labels)
            if weight:
                preferred[pool.name] = weight
        else:
            ineligible[pool.name] = why
    return Eligibility(ineligible, preferred)


# --- voluntary disruption -------------------------------------------------------------------


def blocks_disruption(pod: PodInfo) -> bool:
    """A pod annotated ``karpenter.sh/do-not-disrupt: "true"`` or
    ``cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`` keeps its node from voluntary
    disruption (scale-down, expiry, drift, rebalance); a reclaim takes the node regardless."""
    notes = pod.annotations
    return (notes.get(DO_NOT_DISRUPT[0]) == DO_NOT_DISRUPT[1]
            or notes.get(SAFE_TO_EVICT[0]) == SAFE_TO_EVICT[1])


def undisruptable_nodes(pods: Iterable[PodInfo]) -> frozenset[str]:
    """The nodes running a pod that blocks voluntary disruption (pods that ended aside)."""
    return frozenset(p.node_name for p in pods if p.node_name and p.phase not in
                     ("Succeeded", "Failed") and blocks_disruption(p))


# the voluntary disruptions an opting-out pod holds back (design: Disruption): not a repair
# (unhealthy), a failed launch (late) or a reclaim (noticed)
VOLUNTARY = frozenset({DisruptionReason.EMPTY, DisruptionReason.UNDERUTILIZED,
                       DisruptionReason.EXPIRED, DisruptionReason.DRIFTED,
                       DisruptionReason.REBALANCED})


class _Candidate(Protocol):
    @property
    def reason(self) -> DisruptionReason: ...


C = TypeVar("C", bound=_Candidate)


def opted_out(candidates: Iterable[C], pods: Mapping[str, Iterable[PodInfo]],
              node_of: Callable[[C], str | None]) -> tuple[C, ...]:
    """`candidates` less the voluntary disruptions of a unit whose Node (`node_of`) runs a
    pod that blocks disruption (`undisruptable_nodes` of `pods`, by node name)."""
    kept = undisruptable_nodes(pod for on in pods.values() for pod in on)
    return tuple(c for c in candidates
                 if not kept or c.reason not in VOLUNTARY or node_of(c) not in kept)
