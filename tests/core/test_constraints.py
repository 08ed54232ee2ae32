"""Where pods may run (design: Constraints): placement matching, pool eligibility through intake
and the
planner, never-satisfiable pods, opt-outs from voluntary disruption, workload limits.

The matching rules are kube-scheduler's: `k8s.io/component-helpers/scheduling/corev1/
nodeaffinity/nodeaffinity.go` (`nodeSelectorTerm.match`: an empty term matches nothing; terms
ORed, requirements ANDed; `Gt`/`Lt` parse the label as an integer) and
`k8s.io/api/core/v1/toleration.go` (`ToleratesTaint`). The property test checks eligibility
against a predicate written here from those rules, independently of `core.constraints`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from scoctl.core.constraints import (
    blocks_disruption,
    placement_refusal,
    pool_labels,
    tolerates,
    undisruptable_nodes,
    unit_labels,
)
from scoctl.core.intake.common import Capacity, WorkloadRule
from scoctl.core.intake.k8s import K8sPolicy, K8sSnapshot, daemon_overhead, decide_k8s_intake
from scoctl.core.model import (
    Claim,
    Contract,
    Flavor,
    Limits,
    Placement,
    PodInfo,
    Pool,
    Requirement,
    Spread,
    Taint,
    Toleration,
)
from scoctl.core.model.kubernetes import DaemonSetInfo
from scoctl.core.planner import plan_workload
from scoctl.core.userdata import BootContract
from tests.core.test_intake import make_pod, node

GI = 2**30
ZONE = "topology.kubernetes.io/zone"
ITYPE = "node.kubernetes.io/instance-type"
FLAVORS = {"m5.xlarge": Flavor("m5.xlarge", 4, 16 * GI),
           "m5.2xlarge": Flavor("m5.2xlarge", 8, 32 * GI)}


def pools() -> tuple[Pool, ...]:
    out = []
    for az in ("az1", "az2", "az3"):
        for flavor in FLAVORS:
            for tier in ("committed", "reclaimable"):
                out.append(Pool(f"{flavor}.{az}.{tier[:4]}", "region-a", az, flavor,
                                f"row-{az}", tier, 20))  # type: ignore[arg-type]
    return tuple(out)


def policy(**rule: object) -> K8sPolicy:
    return K8sPolicy(workloads=(WorkloadRule("orders-daily", "T1", "k8s", **rule),),  # type: ignore[arg-type]
                     default_isolation="shared",  # the pods here carry no isolation
                     capacity=Capacity(pools=pools(), flavors=tuple(FLAVORS.values())))


def placed(pod: PodInfo, placement: Placement) -> PodInfo:
    return replace(pod, placement=placement)


def zonal(zone: str) -> Placement:
    return Placement(node_selector=((ZONE, zone),))


# --- matching --------------------------------------------------------------------------------


def test_unit_labels_name_zone_region_instance_type_pool_tier_group_and_extras() -> None:
    labels = unit_labels(workload="w", contract="T1", pool="p", tier="reclaimable",
                         group="row-a", region="region-a", az="az2", flavor="m5.xlarge",
                         extra={"team": "shop"})
    assert {ZONE: "az2", "topology.kubernetes.io/region": "region-a", ITYPE: "m5.xlarge",
            "sco/pool": "p", "sco/tier": "reclaimable", "sco/group": "row-a",
            "team": "shop", "kubernetes.io/os": "linux"}.items() <= labels.items()


def test_the_user_data_contract_hands_kubelet_the_labels_intake_matches_against() -> None:
    pool = pools()[3]
    contract = BootContract(workload="w", contract="T1", pool=pool.name, tier=pool.tier,
                            generation=1, launch="l", region=pool.region, az=pool.az,
                            flavor=pool.flavor, group=pool.group, extra_labels={"team": "a"})
    expected = pool_labels(pool, workload="w", contract="T1", extra={"team": "a"})
    # kubelet sets kubernetes.io/os and arch itself; everything else comes from user-data
    assert contract.labels() == {k: v for k, v in expected.items()
                                 if not k.startswith("kubernetes.io/")}


def test_node_selector_and_each_affinity_operator() -> None:
    labels = {ZONE: "az2", ITYPE: "m5.2xlarge", "gen": "5"}

    def req(key: str, op: str, *values: str) -> Placement:
        return Placement(required=((Requirement(key, op, values),),))

    assert placement_refusal(zonal("az2"), labels) is None
    assert placement_refusal(zonal("az1"), labels) == f"nodeSelector {ZONE}=az1"
    assert placement_refusal(req(ITYPE, "In", "m5.2xlarge"), labels) is None
    assert placement_refusal(req(ITYPE, "In", "m5.xlarge"), labels) is not None
    assert placement_refusal(req(ITYPE, "NotIn", "m5.xlarge"), labels) is None
    assert placement_refusal(req("gpu", "NotIn", "a100"), labels) is None  # absent: not in
    assert placement_refusal(req("gen", "Exists"), labels) is None
    assert placement_refusal(req("gen", "DoesNotExist"), labels) is not None
    assert placement_refusal(req("gen", "Gt", "4"), labels) is None
    assert placement_refusal(req("gen", "Lt", "5"), labels) is not None
    assert placement_refusal(req(ZONE, "Gt", "1"), labels) is not None  # not an integer
    assert placement_refusal(req(ITYPE, "In"), labels) is not None  # no values: invalid
    # a new node's name is unknown: it exists, and no In of a name matches it
    assert placement_refusal(req("kubernetes.io/hostname", "Exists"), labels) is None
    assert placement_refusal(req("metadata.name", "In", "n1"), labels) is not None


def test_terms_are_ored_requirements_anded_and_an_empty_term_matches_nothing() -> None:
    labels = {ZONE: "az2", ITYPE: "m5.2xlarge"}
    az1 = Requirement(ZONE, "In", ("az1",))
    az2 = Requirement(ZONE, "In", ("az2",))
    small = Requirement(ITYPE, "In", ("m5.xlarge",))
    assert placement_refusal(Placement(required=((az1,), (az2,))), labels) is None
    assert placement_refusal(Placement(required=((az2, small),)), labels) is not None
    assert placement_refusal(Placement(required=((),)), labels) is not None
    assert placement_refusal(Placement(required=()), labels) is not None


def test_spread_needs_the_topology_key_and_volumes_their_zone() -> None:
    spread = Placement(spread=(Spread("rack"),))
    assert placement_refusal(spread, {ZONE: "az1"}) == "topology spread needs the label rack"
    assert placement_refusal(Placement(spread=(Spread(ZONE),)), {ZONE: "az1"}) is None
    assert placement_refusal(None, {ZONE: "az1"}, volume_zones=("az2",)) == "volume zone az2"


def test_tolerations_follow_tolerates_taint() -> None:
    taint = Taint("reclaimable", "NoSchedule", "true")
    assert tolerates(Toleration("reclaimable", "Equal", "true", "NoSchedule"), taint)
    assert tolerates(Toleration("reclaimable", "Exists"), taint)
    assert tolerates(Toleration("", "Exists"), taint)  # empty key, Exists: every taint
    assert not tolerates(Toleration("reclaimable", "Equal", "false"), taint)
    assert not tolerates(Toleration("reclaimable", "Exists", effect="NoExecute"), taint)


# --- intake: eligibility, failure -------------------------------------------------------------


def test_a_zonal_deployment_claims_only_its_zone_and_explain_names_the_selector() -> None:
    pods = tuple(placed(make_pod(f"p{i}"), zonal("az2")) for i in range(3))
    decision = decide_k8s_intake(K8sSnapshot(pods=pods, nodes=(node("n0"),)), policy())
    (claim,) = decision.claims
    eligible = {p.name for p in pools()} - set(claim.ineligible)
    assert eligible == {p.name for p in pools() if p.az == "az2"}
    assert set(claim.ineligible.values()) == {f"nodeSelector {ZONE}=az2"}
    plan = plan_workload(Claim("orders-daily", "T1", claim.requests, claim.largest_pod,
                               ineligible=claim.ineligible),
                         Contract("T1", min_pools=2), pools(), FLAVORS,
                         {p.name: 0.5 for p in pools()}, {}, {}, explain=True)
    az_of = {p.name: p.az for p in pools()}
    assert plan.pools and {az_of[pool.pool] for pool in plan.pools} == {"az2"}
    lines = {line.pool: line.reason for line in plan.explain}
    assert lines["m5.xlarge.az1.recl"] == f"the pods' nodeSelector {ZONE}=az2 rules it out"


def test_a_pool_is_eligible_only_if_every_pod_of_the_claim_could_run_there() -> None:
    flavor_pin = Placement(required=((Requirement(ITYPE, "In", ("m5.2xlarge",)),),))
    pods = (placed(make_pod("a"), zonal("az1")), placed(make_pod("b"), flavor_pin))
    (claim,) = decide_k8s_intake(K8sSnapshot(pods=pods, nodes=(node("n0"),)), policy()).claims
    # the two pods differ: each is a claim of its own (a part) with the pools it may use
    eligible = [{p.name for p in pools()} - set(part.ineligible) for part in claim.parts]
    assert sorted(map(sorted, eligible)) == sorted(map(sorted, [
        {p.name for p in pools() if p.az == "az1"},
        {p.name for p in pools() if p.flavor == "m5.2xlarge"}]))
    # the workload as a whole rules out only what neither may use
    assert {p.name for p in pools()} - set(claim.ineligible) == set().union(*eligible)
    # two pods alike: one claim, eligible where both may run
    (alike,) = decide_k8s_intake(K8sSnapshot(pods=(pods[0], replace(pods[0], name="c")),
                                             nodes=(node("n0"),)), policy()).claims
    assert alike.parts == () and {p.name for p in pools()} - set(alike.ineligible) == {
        p.name for p in pools() if p.az == "az1"}


def test_workload_node_labels_and_pool_labels_make_pools_eligible() -> None:
    team = placed(make_pod("a"), Placement(node_selector=(("team", "shop"),)))
    (claim,) = decide_k8s_intake(K8sSnapshot(pods=(team,), nodes=(node("n0"),)),
                                 policy(node_labels={"team": "shop"})).claims
    assert claim.ineligible == {}
    gpu = placed(make_pod("a"), Placement(node_selector=(("accelerator", "a100"),)))
    labelled = policy()
    one = replace(labelled.capacity.pools[0], labels={"accelerator": "a100"})
    labelled = replace(labelled, capacity=replace(labelled.capacity,
                                                  pools=(one, *labelled.capacity.pools[1:])))
    (claim,) = decide_k8s_intake(K8sSnapshot(pods=(gpu,), nodes=(node("n0"),)),
                                 labelled).claims
    assert set(claim.ineligible) == {p.name for p in pools()} - {one.name}


def test_a_bound_volume_pins_the_claim_to_its_zone() -> None:
    pod = placed(make_pod("a"), Placement(volume_claims=("data",)))
    snap = K8sSnapshot(pods=(pod,), nodes=(node("n0"),),
                       volume_zones={("shop", "data"): "az3"})
    (claim,) = decide_k8s_intake(snap, policy()).claims
    assert {p.name for p in pools()} - set(claim.ineligible) == {
        p.name for p in pools() if p.az == "az3"}


def test_a_pod_no_pool_or_node_could_ever_satisfy_fails_at_once_naming_the_constraint() -> None:
    pod = placed(make_pod("a"), zonal("az9"))
    decision = decide_k8s_intake(K8sSnapshot(pods=(pod,), nodes=(node("n0"),)), policy())
    (token,) = decision.tokens
    assert token.token == "POD_SCHEDULING_FAILED"
    assert token.detail["constraint"] == f"nodeSelector {ZONE}=az9"
    assert "az9" in token.detail["reason"]


def test_an_existing_node_that_satisfies_the_constraint_keeps_the_pod_queued() -> None:
    pod = placed(make_pod("a"), zonal("az9"))
    zoned = replace(node("n9"), labels={ZONE: "az9"})
    decision = decide_k8s_intake(K8sSnapshot(pods=(pod,), nodes=(zoned,)), policy())
    assert [t.token for t in decision.tokens] == ["POD_QUEUED"]
    tainted = replace(zoned, taints=(Taint("dedicated", "NoSchedule", "db"),))
    decision = decide_k8s_intake(K8sSnapshot(pods=(pod,), nodes=(tainted,)), policy())
    assert [t.token for t in decision.tokens] == ["POD_SCHEDULING_FAILED"]


# --- the property: eligibility iff an independent predicate --------------------------------


def _independent_match(expr: Requirement, labels: Mapping[str, str]) -> bool:
    """One requirement, written from nodeaffinity.go / labels.Requirement.Matches."""
    has = expr.key in labels
    if expr.operator == "In":
        return has and len(expr.values) > 0 and labels[expr.key] in expr.values
    if expr.operator == "NotIn":
        return len(expr.values) > 0 and (not has or labels[expr.key] not in expr.values)
    if expr.operator == "Exists":
        return has
    if expr.operator == "DoesNotExist":
        return not has
    if len(expr.values) != 1 or not has:
        return False
    if not (labels[expr.key].lstrip("-").isdigit() and expr.values[0].lstrip("-").isdigit()):
        return False
    a, b = int(labels[expr.key]), int(expr.values[0])
    return a > b if expr.operator == "Gt" else a < b


def _independent_fits(placement: Placement, labels: Mapping[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in placement.node_selector):
        return False
    if placement.required is not None:
        if not any(term and all(_independent_match(r, labels) for r in term)
                   for term in placement.required):
            return False
    return True


_KEYS = st.sampled_from([ZONE, ITYPE, "sco/tier", "sco/group", "gen"])
_VALUES = st.sampled_from(["az1", "az2", "az3", "m5.xlarge", "m5.2xlarge", "committed",
                           "reclaimable", "row-az1", "row-az2", "3", "7", "x"])
_REQ = st.builds(Requirement, _KEYS,
                 st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]),
                 st.lists(_VALUES, max_size=3).map(tuple))
_PLACEMENT = st.builds(
    Placement,
    node_selector=st.lists(st.tuples(_KEYS, _VALUES), max_size=2).map(tuple),
    required=st.none() | st.lists(st.lists(_REQ, max_size=3).map(tuple),
                                  max_size=3).map(tuple))


@settings(max_examples=300, deadline=None)
@given(st.lists(_PLACEMENT, min_size=1, max_size=4), st.sampled_from(["3", "7", "x"]))
def test_pool_eligible_iff_every_pod_could_be_scheduled_there(
        placements: Sequence[Placement], gen: str) -> None:
    pods = tuple(placed(make_pod(f"p{i}"), p) for i, p in enumerate(placements))
    labelled = tuple(replace(p, labels={"gen": gen}) for p in pools())
    pol = policy()
    pol = replace(pol, capacity=replace(pol.capacity, pools=labelled))
    decision = decide_k8s_intake(K8sSnapshot(pods=pods, nodes=(node("n0"),)), pol)
    claims = [c for c in decision.claims if c.pods]

    def fits(placement: Placement) -> frozenset[str]:
        return frozenset(q.name for q in labelled if _independent_fits(placement, {
            ZONE: q.az, ITYPE: q.flavor, "sco/tier": q.tier, "sco/group": q.group,
            "gen": gen}))

    for pool in labelled:
        labels = {ZONE: pool.az, ITYPE: pool.flavor, "sco/tier": pool.tier,
                  "sco/group": pool.group, "gen": gen}
        could = all(_independent_fits(p, labels) for p in placements)
        if claims and not claims[0].parts:
            assert (pool.name not in claims[0].ineligible) == could, pool.name
    if claims and claims[0].parts:
        # pods that differ are claims of their own (parts): each part's pools are exactly
        # where each of its pods could be scheduled, and every pod is in one part
        assert all(fits(p) for p in placements)
        names = frozenset(q.name for q in labelled)
        got = {names - frozenset(part.ineligible) for part in claims[0].parts}
        assert got == {fits(p) for p in placements}
        assert sum(part.pods for part in claims[0].parts) == len(placements)
    # a workload no pool could serve (and no node: n0 has no labels) fails at once
    if not any(all(_independent_fits(p, {ZONE: q.az, ITYPE: q.flavor, "sco/tier": q.tier,
                                         "sco/group": q.group, "gen": gen})
                   for p in placements) for q in labelled):
        fails = any(not any(_independent_fits(p, {ZONE: q.az, ITYPE: q.flavor,
                                                  "sco/tier": q.tier, "sco/group": q.group,
                                                  "gen": gen}) for q in labelled)
                    and not _independent_fits(p, {}) for p in placements)
        if fails:
            assert [t.token for t in decision.tokens] == ["POD_SCHEDULING_FAILED"]


# --- opt-outs, limits ----------------------------------------------------------------------


def test_do_not_disrupt_and_safe_to_evict_false_keep_their_node() -> None:
    karp = replace(make_pod("a", node="n1"), annotations={"karpenter.sh/do-not-disrupt": "true"})
    ca = replace(make_pod("b", node="n2"),
                 annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"})
    free = replace(make_pod("c", node="n3"),
                   annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"})
    done = replace(karp, name="d", node_name="n4", phase="Succeeded")
    assert blocks_disruption(karp) and blocks_disruption(ca) and not blocks_disruption(free)
    assert undisruptable_nodes((karp, ca, free, done)) == {"n1", "n2"}


def test_a_claim_above_its_limit_is_planned_up_to_it_degraded_naming_the_limit() -> None:
    huge = {"cpu": 100_000_000, "memory": 100_000 * GI}
    claim = Claim("orders-daily", "T1", huge, {"cpu": 4000, "memory": 16 * GI},
                  limits=Limits(resources={"cpu": 64_000}))
    plan = plan_workload(claim, Contract("T1", min_pools=2), pools(), FLAVORS,
                         {p.name: 0.5 for p in pools()}, {}, {})
    flavor_of = {p.name: p.flavor for p in pools()}
    cpu = sum(u.units * FLAVORS[flavor_of[u.pool]].vcpus for u in plan.pools)
    assert 56 < cpu <= 64 and plan.feasible and plan.degraded
    assert plan.reasons[0].startswith("LIMIT_REACHED: workloads[].limits.cpu 64")
    by_units = plan_workload(replace(claim, limits=Limits(units=3)), Contract("T1", min_pools=2),
                             pools(), FLAVORS, {p.name: 0.5 for p in pools()}, {}, {})
    assert sum(u.units for u in by_units.pools) == 3
    assert by_units.reasons[0].startswith("LIMIT_REACHED: workloads[].limits.units 3")


# --- zone spread ---------------------------------------------------------------------------


def test_intake_records_the_smallest_max_skew_of_a_do_not_schedule_zone_spread() -> None:
    def claim_of(*spread: Spread) -> int:
        pods = tuple(placed(make_pod(f"p{i}"), Placement(spread=spread)) for i in range(3))
        (claim,) = decide_k8s_intake(K8sSnapshot(pods=pods, nodes=(node("n0"),)),
                                     policy()).claims
        return claim.zone_spread

    assert claim_of(Spread(ZONE, 2), Spread(ZONE, 1)) == 1
    assert claim_of(Spread(ZONE, 3)) == 3
    assert claim_of(Spread(ZONE, 1, "ScheduleAnyway")) == 0  # soft: only orders nodes
    assert claim_of(Spread("kubernetes.io/hostname", 1)) == 0  # not a zone spread
    assert claim_of() == 0


def _pods_per_zone(plan: object, pod_cpu: int) -> dict[str, int]:
    """Pods of `pod_cpu` vCPU (4 GiB each) the plan's units hold, per zone."""
    by_name = {p.name: p for p in pools()}
    out: dict[str, int] = {}
    for unit in plan.pools:  # type: ignore[attr-defined]
        pool = by_name[unit.pool]
        flavor = FLAVORS[pool.flavor]
        per = min(flavor.vcpus // pod_cpu, flavor.ram // (4 * GI))
        out[pool.az] = out.get(pool.az, 0) + unit.units * per
    return out


def test_a_zone_spread_claim_is_covered_in_every_eligible_zone_within_its_skew() -> None:
    pod = {"cpu": 2000, "memory": 4 * GI}
    claim = Claim("orders-daily", "T1", {k: v * 9 for k, v in pod.items()}, pod, pods=9)
    # az1 is ranked best: without a spread every unit goes there
    scores = {p.name: 0.9 if p.az == "az1" else 0.5 for p in pools()}
    loose = Contract("T1", floor=0.0, pool_cap=1.0, group_cap=1.0, min_pools=1)
    plain = plan_workload(claim, loose, pools(), FLAVORS, scores, {}, {})
    assert set(_pods_per_zone(plain, 2)) == {"az1"}
    spread = plan_workload(replace(claim, zone_spread=1), loose, pools(), FLAVORS, scores, {},
                           {}, explain=True)
    held = _pods_per_zone(spread, 2)
    assert set(held) == {"az1", "az2", "az3"} and all(n >= 3 for n in held.values()), held
    assert spread.feasible and not spread.degraded and spread.coverage >= 1 - 1e-9
    assert math.isclose(sum(p.coverage for p in spread.pools), spread.coverage)
    # one explain line per pool outside the plan, from its own zone's share
    lines = [line.pool for line in spread.explain]
    assert len(lines) == len(set(lines))
    # a replan with the units in place moves nothing
    again = plan_workload(replace(claim, zone_spread=1), loose, pools(), FLAVORS, scores,
                          spread.units(), {})
    assert again.units() == spread.units()
    # pods a zonal selector confines to one zone have nothing to split
    az2 = {p.name: "nodeSelector" for p in pools() if p.az != "az2"}
    one = plan_workload(replace(claim, zone_spread=1, ineligible=az2), loose, pools(), FLAVORS,
                        scores, {}, {})
    assert set(_pods_per_zone(one, 2)) == {"az2"}


def test_a_zone_spread_claim_deals_its_pods_and_its_limits_to_the_zones() -> None:
    pod = {"cpu": 4000, "memory": 4 * GI}  # one per m5.xlarge, two per m5.2xlarge
    claim = Claim("orders-daily", "T1", {k: v * 4 for k, v in pod.items()}, pod, pods=4,
                  zone_spread=1)
    loose = Contract("T1", floor=0.0, pool_cap=1.0, group_cap=1.0, min_pools=1)
    scores = {p.name: 0.5 for p in pools()}
    plan = plan_workload(claim, loose, pools(), FLAVORS, scores, {}, {})
    held = _pods_per_zone(plan, 4)
    assert held["az1"] >= 2 and held["az2"] >= 1 and held["az3"] >= 1  # 4 pods: 2, 1, 1
    limited = plan_workload(replace(claim, limits=Limits(units=2)), loose, pools(), FLAVORS,
                            scores, {}, {})
    assert sum(u.units for u in limited.pools) <= 2 and limited.degraded
    assert any(r.startswith("LIMIT_REACHED: workloads[].limits.units") for r in limited.reasons)
    # the limit is named as the config gives it (2), never as a zone's share of it (issue
    # 49: "limits.units 0 (… zone az3's share …)")
    reached = [r for r in limited.reasons if r.startswith("LIMIT_REACHED")]
    assert all(r.startswith("LIMIT_REACHED: workloads[].limits.units 2 (") for r in reached)
    assert not any("limits.units 0" in r or "limits.units 1 " in r for r in reached)


def test_voluntary_disruption_skips_a_unit_running_a_pod_that_opts_out() -> None:
    from tests.core.test_disruption_rules import NOW, ago, decide, policy, world

    # 5 units one pod each, the plan wants 2: s02..s04 would be consolidated (underutilized)
    snapshot = world(5, pods_per=dict.fromkeys(range(5), 1), target=2)
    assert sorted(s.name for s in decide(snapshot, policy(), NOW).scale_downs) == [
        "sco-web-s02", "sco-web-s03", "sco-web-s04"]
    notes = {"sco-web-s02": {"karpenter.sh/do-not-disrupt": "true"},
             "sco-web-s03": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}}
    pods = {node: tuple(replace(p, annotations=notes.get(node, {})) for p in on)
            for node, on in snapshot.pods.items()}
    kept = replace(snapshot, pods=pods)
    d = decide(kept, policy(), NOW)
    assert [s.name for s in d.scale_downs] == ["sco-web-s04"]
    assert "sco-web-s02" not in {e.detail.get("name") for e in d.events}
    # expiry is voluntary too: of five old units the plan keeps, the two running an
    # opting-out pod are not expired
    old = replace(kept, instances=tuple(replace(i, created=ago(10_000))
                                        for i in kept.instances),
                  targets={"web": {"p-spot": 5}})
    d = decide(old, policy(expire_after=1000.0), NOW)
    expired = {e.detail["server"] for e in d.events if e.token == "DISRUPTION_STARTED"
               and e.detail["reason"] == "expired"}
    assert expired == {"s00", "s01", "s04"}


def test_pool_limits_cap_the_units_every_workload_holds_in_the_pool() -> None:
    from scoctl.core.planner import plan_all

    # only the az1 m5.xlarge pools may be used; the reclaimable one is limited to 16 vCPU
    # (4 units of 4) and the committed one has no depth
    only = {p.name for p in pools() if p.az == "az1" and p.flavor == "m5.xlarge"}
    ruled = {p.name: "nodeSelector" for p in pools() if p.name not in only}
    limited = tuple(replace(p, limits=Limits(resources={"cpu": 16_000}))
                    if p.name == "m5.xlarge.az1.recl" else
                    replace(p, depth=0) if p.name == "m5.xlarge.az1.comm" else p
                    for p in pools())
    pod = {"cpu": 4000, "memory": 4 * GI}  # one per unit
    loose = Contract("T1", floor=0.0, pool_cap=1.0, group_cap=1.0, min_pools=1)
    claims = [Claim(w, "T1", {k: v * 3 for k, v in pod.items()}, pod, pods=3, ineligible=ruled)
              for w in ("a-web", "b-web")]
    scores = {p.name: 0.5 for p in limited}
    plans = plan_all(claims, {"T1": loose}, limited, FLAVORS, scores, {})
    a, b = plans["a-web"], plans["b-web"]
    assert a.units() == {"m5.xlarge.az1.recl": 3} and not a.degraded
    # 4 units in all: the second workload gets the one left, degraded, the limit named
    assert b.units() == {"m5.xlarge.az1.recl": 1} and b.feasible and b.degraded
    assert b.reasons[0].startswith(
        "LIMIT_REACHED: pools[m5.xlarge.az1.recl].limits.cpu 16 vCPU (the plan covers 33.3%")
    # units one workload already holds count against the limit of every other
    again = plan_all(claims[1:], {"T1": loose}, limited, FLAVORS, scores,
                     {"a-web": {"m5.xlarge.az1.recl": 4}})
    assert again["b-web"].units() == {} and again["b-web"].reasons[0].startswith(
        "LIMIT_REACHED: pools[m5.xlarge.az1.recl].limits.cpu")


# --- DaemonSet overhead ----------------------------------------------------------------------


def daemonset(name: str, cpu: int, *, selector: tuple[tuple[str, str], ...] = (),
              tolerations: tuple[Toleration, ...] = ()) -> DaemonSetInfo:
    pod = replace(make_pod(name, cpu=f"{cpu}m", memory="1Gi", workload=None, rs=None,
                           namespace="kube-system", unschedulable=False, phase="Running"),
                  tolerations=tolerations,
                  placement=Placement(node_selector=selector) if selector else None)
    return DaemonSetInfo(name, "kube-system", pod)


def test_the_daemonsets_that_would_land_on_a_new_unit_count_against_its_flavor() -> None:
    every = daemonset("logs", 200, tolerations=(Toleration("", "Exists"),))
    plain = daemonset("metrics", 100)  # no toleration: not on reclaimable (tainted) units
    gpu = daemonset("big-only", 300, selector=((ITYPE, "m5.2xlarge"),))
    pods = tuple(make_pod(f"p{i}") for i in range(3))
    snap = K8sSnapshot(pods=pods, nodes=(node("n0"),), daemonsets=(every, plain, gpu))
    (claim,) = decide_k8s_intake(snap, policy()).claims
    # the most of a flavor's pools: committed units take all that select them
    assert claim.overhead == {"m5.xlarge": {"cpu": 300, "memory": 2 * GI},
                              "m5.2xlarge": {"cpu": 600, "memory": 3 * GI}}
    only_reclaimable = {p.name: "x" for p in pools() if p.tier == "committed"}
    assert daemon_overhead("orders-daily", "T1", {}, (every, plain, gpu), pools(),
                           only_reclaimable) == {"m5.xlarge": {"cpu": 200, "memory": GI},
                                                 "m5.2xlarge": {"cpu": 200, "memory": GI}}
    assert daemon_overhead("orders-daily", "T1", {}, (), pools(), {}) == {}


def test_the_planner_fits_pods_beside_the_daemonset_overhead() -> None:
    pod = {"cpu": 1000, "memory": GI}
    claim = Claim("orders-daily", "T1", {k: v * 8 for k, v in pod.items()}, pod, pods=8)
    only = {p.name: "x" for p in pools() if p.name != "m5.xlarge.az1.comm"}
    claim = replace(claim, ineligible=only)
    loose = Contract("T1", floor=0.0, pool_cap=1.0, group_cap=1.0, min_pools=1)
    scores = {p.name: 0.5 for p in pools()}
    bare = plan_workload(claim, loose, pools(), FLAVORS, scores, {}, {})
    assert bare.units() == {"m5.xlarge.az1.comm": 2}  # 4 one-core pods per 4-vCPU unit
    ds = replace(claim, overhead={"m5.xlarge": {"cpu": 500}})
    heavy = plan_workload(ds, loose, pools(), FLAVORS, scores, {}, {})
    assert heavy.units() == {"m5.xlarge.az1.comm": 3}  # 3 beside half a core of DaemonSets


# --- pods of one workload that differ in where they may run (claims `<workload>/<n>`) ---------


def _two_zone_pods(n: int = 3) -> tuple[PodInfo, ...]:
    """`n` pods of orders-daily pinned to az1 and `n` to az2 (two Deployments, one workload)."""
    return (*(placed(make_pod(f"a{i}", cpu="2", memory="4Gi"), zonal("az1")) for i in range(n)),
            *(placed(make_pod(f"b{i}", cpu="2", memory="4Gi", rs="orders-b-7f6d5c4b3"),
                     zonal("az2")) for i in range(n)))


def test_pods_that_differ_in_where_they_may_run_become_parts_each_with_its_pools() -> None:
    (claim,) = decide_k8s_intake(K8sSnapshot(pods=_two_zone_pods(), nodes=(node("n0"),)),
                                 policy()).claims
    assert len(claim.parts) == 2 and claim.pods == 6
    eligible = [{p.name for p in pools()} - set(part.ineligible) for part in claim.parts]
    az = {p.name: p.az for p in pools()}
    assert sorted(sorted({az[p] for p in pools_of}) for pools_of in eligible) == [["az1"],
                                                                                   ["az2"]]
    assert all(part.pods == 3 and part.requests["cpu"] == 6000 for part in claim.parts)
    # the workload rules out only what no part may use: az3
    assert {az[p] for p in claim.ineligible} == {"az3"}
    # one placement for all pods: no parts, as before
    (same,) = decide_k8s_intake(K8sSnapshot(pods=_two_zone_pods()[:3], nodes=(node("n0"),)),
                                policy()).claims
    assert same.parts == () and {az[p] for p in same.ineligible} == {"az2", "az3"}


def test_each_part_is_covered_in_its_own_pools_and_a_replan_moves_nothing() -> None:
    (decided,) = decide_k8s_intake(K8sSnapshot(pods=_two_zone_pods(), nodes=(node("n0"),)),
                                   policy()).claims
    claim = Claim("orders-daily", "T1", dict(decided.requests), dict(decided.largest_pod),
                  pods=decided.pods, ineligible=dict(decided.ineligible), parts=decided.parts)
    loose = Contract("T1", floor=0.0, pool_cap=1.0, group_cap=1.0, min_pools=1)
    scores = {p.name: 0.9 if p.az == "az1" else 0.5 for p in pools()}
    plan = plan_workload(claim, loose, pools(), FLAVORS, scores, {}, {}, explain=True)
    held = _pods_per_zone(plan, 2)
    assert held.get("az1", 0) >= 3 and held.get("az2", 0) >= 3 and "az3" not in held, held
    assert plan.feasible and not plan.degraded and plan.coverage >= 1 - 1e-9
    assert math.isclose(sum(p.coverage for p in plan.pools), plan.coverage)
    lines = [line.pool for line in plan.explain]
    assert len(lines) == len(set(lines)) and not set(lines) & set(plan.units())
    # the units in place: nothing moves, however often it is planned again
    again = plan_workload(claim, loose, pools(), FLAVORS, scores, plan.units(), {})
    assert again.units() == plan.units()
    # the whole claim confined to the pools every pod may use has none: it cannot be placed
    union = {p.name: "nodeSelector" for p in pools()}
    assert not plan_workload(replace(claim, parts=(), ineligible=union), loose, pools(),
                             FLAVORS, scores, {}, {}).pools


def test_parts_share_the_workloads_limits_and_a_pools_depth() -> None:
    (decided,) = decide_k8s_intake(K8sSnapshot(pods=_two_zone_pods(4), nodes=(node("n0"),)),
                                   policy()).claims
    claim = Claim("orders-daily", "T1", dict(decided.requests), dict(decided.largest_pod),
                  pods=decided.pods, ineligible=dict(decided.ineligible), parts=decided.parts,
                  limits=Limits(units=1))  # 8 vCPU a part: one m5.2xlarge each would do
    loose = Contract("T1", floor=0.0, pool_cap=1.0, group_cap=1.0, min_pools=1)
    plan = plan_workload(claim, loose, pools(), FLAVORS, {p.name: 0.5 for p in pools()}, {}, {})
    assert sum(plan.units().values()) == 1 and plan.degraded
    assert any("LIMIT_REACHED" in r and "orders-daily/" in r for r in plan.reasons)
    # two parts that both want the best pool, one unit deep: together they never plan more
    # new units there than it has, and both are still covered
    flavor_pin = Placement(required=((Requirement(ITYPE, "In", ("m5.2xlarge",)),),))
    pods = (*(placed(make_pod(f"a{i}", cpu="2", memory="4Gi"), zonal("az1")) for i in range(4)),
            *(placed(make_pod(f"b{i}", cpu="2", memory="4Gi", rs="orders-b-7f6d5c4b3"),
                     flavor_pin) for i in range(4)))
    (overlap,) = decide_k8s_intake(K8sSnapshot(pods=pods, nodes=(node("n0"),)), policy()).claims
    assert len(overlap.parts) == 2
    best = "m5.2xlarge.az1.recl"
    shallow = tuple(replace(p, depth=1) for p in pools())
    scores = {p.name: 0.9 if p.name == best else 0.5 for p in pools()}
    both = plan_workload(Claim("orders-daily", "T1", dict(overlap.requests),
                               dict(overlap.largest_pod), pods=8,
                               ineligible=dict(overlap.ineligible), parts=overlap.parts),
                         loose, shallow, FLAVORS, scores, {}, {})
    assert both.units()[best] == 1 and all(n <= 1 for n in both.units().values())
    assert both.coverage >= 1 - 1e-9 and not both.degraded


def test_preferred_terms_only_order_pools_the_heaviest_match_first() -> None:
    # design: Constraints: a soft term rules nothing out, it puts the pools it matches first
    soft = Placement(preferred=((10, (Requirement(ZONE, "In", ("az3",)),)),
                                (5, (Requirement(ITYPE, "In", ("m5.2xlarge",)),))))
    pods = tuple(placed(make_pod(f"p{i}", cpu="2", memory="4Gi"), soft) for i in range(3))
    (claim,) = decide_k8s_intake(K8sSnapshot(pods=pods, nodes=(node("n0"),)), policy()).claims
    assert claim.ineligible == {} and claim.parts == ()
    by_name = {p.name: p for p in pools()}
    assert {n: (by_name[n].az, by_name[n].flavor) for n in claim.preferred} == {
        n: (p.az, p.flavor) for n, p in by_name.items() if p.az == "az3" or
        p.flavor == "m5.2xlarge"}
    assert claim.preferred["m5.2xlarge.az3.recl"] == 15
    planned = Claim("orders-daily", "T1", dict(claim.requests), dict(claim.largest_pod),
                    pods=3, preferred=dict(claim.preferred))
    loose = Contract("T1", floor=0.0, pool_cap=1.0, group_cap=1.0, min_pools=1)
    scores = {p.name: 0.9 if p.az == "az1" else 0.5 for p in pools()}  # az1 ranks best
    plan = plan_workload(planned, loose, pools(), FLAVORS, scores, {}, {})
    assert plan.units() == {"m5.2xlarge.az3.recl": 1}, plan.units()
    plain = plan_workload(replace(planned, preferred={}), loose, pools(), FLAVORS, scores, {}, {})
    assert {by_name[p].az for p in plain.units()} == {"az1"}
