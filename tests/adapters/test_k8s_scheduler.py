"""The simulated region's kube-scheduler (`scoctl.sim.k8s_scheduler`), rule by rule.

Each test names, in its docstring, the upstream file and function whose behaviour it shows
(kubernetes/kubernetes, ``pkg/scheduler/framework/plugins/…`` unless said otherwise). Pure:
JSON objects in, bindings and verdicts out.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scoctl.sim import k8s_scheduler as ks
from scoctl.sim.k8s_emulator import make_container, make_namespace, make_node, make_pod

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"


def names(result: ks.Round) -> dict[str, str]:
    return {b.pod: b.node for b in result.bindings}


def verdicts(result: ks.Round) -> dict[str, str]:
    return {v.pod: v.message for v in (*result.unschedulable, *result.refused)}


def zone_node(name: str, zone: str, cpu: str = "8", **kw: Any) -> dict[str, Any]:
    labels = {ZONE: zone, **kw.pop("labels", {})}
    return make_node(name, cpu=cpu, memory="32Gi", labels=labels, **kw)


def with_spec(pod: dict[str, Any], **spec: Any) -> dict[str, Any]:
    pod["spec"].update(spec)
    return pod


def bound(pod: dict[str, Any], node: str) -> dict[str, Any]:
    pod["spec"]["nodeName"] = node
    pod["status"]["phase"] = "Running"
    return pod


# --- quantities --------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "value"), [
    ("100m", Fraction(1, 10)), ("1.5", Fraction(3, 2)), ("2Gi", 2 * 2**30), ("1e3", 1000),
    ("500M", 500 * 10**6), ("12n", Fraction(12, 10**9)), (".5", Fraction(1, 2)),
    ("1Ki", 1024), ("3E-2", Fraction(3, 100)), (4, 4),
])
def test_quantities_follow_the_kubernetes_grammar(text, value):
    """k8s.io/apimachinery/pkg/api/resource/quantity.go `ParseQuantity`: binary (Ki…Ei) and
    decimal (n…E) suffixes and decimal exponents; cpu compares in rounded-up millicores
    (`MilliValue`), the rest in rounded-up units (`Value`)."""
    assert ks.parse_quantity(text) == value
    assert ks.amount("cpu", "0.1m") == 1 and ks.amount("memory", "0.5") == 1


@pytest.mark.parametrize("text", ["", "1.2.3", "Gi", "1Gb", "1 Gi", "abc"])
def test_a_quantity_outside_the_grammar_is_refused(text):
    """quantity.go `ParseQuantity` returns ErrFormatWrong for these."""
    with pytest.raises(ValueError):
        ks.parse_quantity(text)


# --- requests and NodeResourcesFit -------------------------------------------------------------


def test_pod_requests_take_the_init_containers_max_sidecars_and_overhead():
    """pkg/api/v1/resource/helpers.go `PodRequests` / `AggregateContainerRequests`: containers
    summed; each init container maxed against it with the sidecars started before it; a
    ``restartPolicy: Always`` init container also adds to the sum; overhead added. fit.go's own
    example: init 2cpu/1G and 2cpu/3G, containers 2cpu/1G and 1cpu/1G give 3 cpu, 3G."""
    pod = make_pod("p", containers=[make_container("a", cpu="2", memory="1G"),
                                    make_container("b", cpu="1", memory="1G")],
                   init_containers=[make_container("i1", cpu="2", memory="1G"),
                                    make_container("i2", cpu="2", memory="3G")])
    assert ks.pod_requests(pod) == {"cpu": 3000, "memory": 3 * 10**9}
    sidecar = make_pod("s", cpu="1", memory="1Gi", overhead={"cpu": "250m"},
                       init_containers=[make_container("log", cpu="500m", memory="1Gi",
                                                       restart_policy="Always"),
                                        make_container("setup", cpu="1", memory="3Gi")])
    # sum: 1 + 0.5 sidecar; init max: setup 1 + sidecar 0.5 = 1.5 (cpu), 3Gi + 1Gi (memory)
    assert ks.pod_requests(sidecar) == {"cpu": 1500 + 250, "memory": 4 * 2**30}


def test_a_limit_without_a_request_requests_the_limit():
    """pkg/apis/core/v1/defaults.go `SetDefaults_Pod`: requests default to limits."""
    pod = make_pod("p", cpu=None, memory=None)
    pod["spec"]["containers"][0]["resources"] = {"limits": {"cpu": "2", "nvidia.com/gpu": "1"}}
    assert ks.pod_requests(pod) == {"cpu": 2000, "nvidia.com/gpu": 1}


def test_insufficient_resources_and_pod_count_are_each_named():
    """noderesources/fit.go `fitsRequest`: "Too many pods" against allocatable.pods, then one
    "Insufficient <resource>" per resource short, extended resources included; the reasons of
    every node are counted in FitError.Error (framework/types.go); the pod count does not stop
    the resource checks."""
    full = make_node("full", cpu="4", memory="8Gi", pods=1)
    small = make_node("small", cpu="1", memory="1Gi")
    nogpu = make_node("nogpu", cpu="16", memory="64Gi")
    running = bound(make_pod("old", cpu="1", memory="1Gi"), "full")
    pod = make_pod("new", cpu="2", memory="4Gi", gpus=1)
    result = ks.schedule_round([running, pod], [full, small, nogpu])
    assert result.bindings == ()
    assert verdicts(result)["new"] == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 Insufficient memory, "
        "1 Too many pods, 3 Insufficient nvidia.com/gpu.")  # the histogram's strings sorted


def test_bound_pods_use_up_the_node_but_finished_ones_do_not():
    """noderesources/fit.go: the node's Requested is the sum of its pods' `PodRequests`;
    terminal pods (Succeeded/Failed) hold nothing."""
    node = make_node("n", cpu="4", memory="16Gi")
    busy = bound(make_pod("busy", cpu="3"), "n")
    done = bound(make_pod("done", cpu="3"), "n")
    done["status"]["phase"] = "Succeeded"
    pod = make_pod("p", cpu="1")
    assert names(ks.schedule_round([busy, done, pod], [node])) == {"p": "n"}
    bigger = make_pod("q", cpu="2")
    assert verdicts(ks.schedule_round([busy, bigger], [node]))["q"] == (
        "0/1 nodes are available: 1 Insufficient cpu.")


# --- NodeUnschedulable, TaintToleration, Ready -------------------------------------------------


def test_a_cordoned_node_takes_only_pods_that_tolerate_unschedulable():
    """nodeunschedulable/node_unschedulable.go `Filter`: spec.unschedulable refuses a pod
    unless it tolerates node.kubernetes.io/unschedulable:NoSchedule ("node(s) were
    unschedulable")."""
    node = make_node("cordoned", unschedulable=True)
    plain = make_pod("plain")
    tolerant = make_pod("tolerant", tolerations=[{"key": ks.TAINT_UNSCHEDULABLE,
                                                  "operator": "Exists", "effect": "NoSchedule"}])
    result = ks.schedule_round([plain, tolerant], [node])
    assert names(result) == {"tolerant": "cordoned"}
    assert verdicts(result)["plain"] == "0/1 nodes are available: 1 node(s) were unschedulable."


@pytest.mark.parametrize(("toleration", "fits"), [
    ({"key": "gpu", "operator": "Equal", "value": "yes", "effect": "NoSchedule"}, True),
    ({"key": "gpu", "value": "yes", "effect": "NoSchedule"}, True),  # no operator: Equal
    ({"key": "gpu", "operator": "Equal", "value": "no", "effect": "NoSchedule"}, False),
    ({"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}, True),
    ({"key": "gpu", "operator": "Exists"}, True),  # empty effect: every effect
    ({"key": "gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"operator": "Exists"}, True),  # empty key with Exists: every taint
    ({"key": "other", "operator": "Exists"}, False),
])
def test_tolerations_match_taints_as_the_api_defines(toleration, fits):
    """k8s.io/api/core/v1/toleration.go `ToleratesTaint` inside tainttoleration/
    taint_toleration.go `Filter` ("node(s) had untolerated taint {key: value}")."""
    node = make_node("n", taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])
    result = ks.schedule_round([make_pod("p", tolerations=[toleration])], [node])
    if fits:
        assert names(result) == {"p": "n"}
    else:
        assert verdicts(result)["p"] == (
            "0/1 nodes are available: 1 node(s) had untolerated taint {gpu: yes}.")


def test_prefer_no_schedule_taints_do_not_filter_and_no_execute_ones_do():
    """tainttoleration/taint_toleration.go `Filter` looks only at NoSchedule and NoExecute
    (`FindMatchingUntoleratedTaint` with that filter); PreferNoSchedule is for scoring."""
    soft = make_node("soft", taints=[{"key": "spot", "value": "x", "effect": "PreferNoSchedule"}])
    hard = make_node("hard", taints=[{"key": "drain", "effect": "NoExecute"}])
    result = ks.schedule_round([make_pod("p")], [soft, hard])
    assert names(result) == {"p": "soft"}
    only_hard = ks.schedule_round([make_pod("p")], [hard])
    assert verdicts(only_hard)["p"] == (
        "0/1 nodes are available: 1 node(s) had untolerated taint {drain: }.")


def test_a_not_ready_node_is_refused_by_its_not_ready_taint():
    """pkg/controller/nodelifecycle/node_lifecycle_controller.go `doNoScheduleTaintingPass`:
    Ready=False gives node.kubernetes.io/not-ready:NoSchedule, Ready=Unknown (or no Ready
    condition) node.kubernetes.io/unreachable; the scheduler refuses them as taints."""
    booting = make_node("booting", ready=False)
    lost = make_node("lost")
    lost["status"]["conditions"] = []
    result = ks.schedule_round([make_pod("p")], [booting, lost])
    assert verdicts(result)["p"] == (
        "0/2 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/"
        "not-ready: }, 1 node(s) had untolerated taint {node.kubernetes.io/unreachable: }.")
    tolerant = make_pod("t", tolerations=[{"key": ks.TAINT_NOT_READY, "operator": "Exists"}])
    assert names(ks.schedule_round([tolerant], [booting])) == {"t": "booting"}


# --- NodeAffinity ------------------------------------------------------------------------------


def _required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": list(terms)}}}


@pytest.mark.parametrize(("expression", "matches"), [
    ({"key": "size", "operator": "In", "values": ["7", "9"]}, {"a"}),
    ({"key": "size", "operator": "NotIn", "values": ["7"]}, {"b", "c"}),  # absent label too
    ({"key": "size", "operator": "Exists"}, {"a", "b"}),
    ({"key": "size", "operator": "DoesNotExist"}, {"c"}),
    ({"key": "size", "operator": "Gt", "values": ["8"]}, {"b"}),
    ({"key": "size", "operator": "Lt", "values": ["8"]}, {"a"}),
])
def test_node_selector_operators(expression, matches):
    """k8s.io/component-helpers/scheduling/corev1/nodeaffinity `nodeSelectorRequirementsAsSelector`
    / labels.Requirement.Matches: In, NotIn (true when the label is absent), Exists,
    DoesNotExist, Gt and Lt (integers; absent label: false)."""
    nodes = [make_node("a", labels={"size": "7"}), make_node("b", labels={"size": "12"}),
             make_node("c")]
    got = {n["metadata"]["name"] for n in nodes if ks.required_node_affinity(
        with_spec(make_pod("p"), affinity=_required({"matchExpressions": [expression]})), n)}
    assert got == matches


def test_node_selector_and_terms_ored_with_expressions_anded():
    """nodeaffinity/node_affinity.go `Filter` via `GetRequiredNodeAffinity(pod).Match`:
    nodeSelector AND the required terms; terms ORed, a term's expressions and matchFields
    ANDed; matchFields on metadata.name ("node(s) didn't match Pod's node affinity/selector")."""
    nodes = [make_node("a", labels={"tier": "x", "zone": "1"}),
             make_node("b", labels={"tier": "x", "zone": "2"}),
             make_node("c", labels={"tier": "y", "zone": "1"}),
             make_node("d", labels={"zone": "3"})]
    affinity = _required(
        {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]},
                              {"key": "zone", "operator": "In", "values": ["1"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["d"]}]})
    pods = [with_spec(make_pod(f"p{i}", cpu="10"), affinity=affinity) for i in range(3)]
    result = ks.schedule_round(pods, nodes)
    assert names(result) == {"p0": "a", "p1": "d"}
    assert verdicts(result)["p2"] == ("0/4 nodes are available: 2 Insufficient cpu, "
                                      "2 node(s) didn't match Pod's node affinity/selector.")
    selector = make_pod("s", node_selector={"tier": "x"})
    with_spec(selector, affinity=_required({"matchExpressions": [
        {"key": "zone", "operator": "In", "values": ["2", "3"]}]}))
    assert names(ks.schedule_round([selector], nodes)) == {"s": "b"}


def test_an_empty_term_matches_no_node():
    """component-helpers nodeaffinity `nodeSelectorTerm.match`: a term without expressions
    or fields matches nothing."""
    pod = with_spec(make_pod("p"), affinity=_required({}))
    assert not ks.required_node_affinity(pod, make_node("n"))


# --- NodePorts ---------------------------------------------------------------------------------


def test_a_taken_host_port_refuses_the_node():
    """nodeports/node_ports.go `Filter` / `fitsPorts` (HostPortInfo.CheckConflict: same
    protocol and port, 0.0.0.0 overlapping every IP)."""
    def with_port(pod: dict[str, Any]) -> dict[str, Any]:
        pod["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 8080}]
        return pod
    nodes = [make_node("a"), make_node("b")]
    old = with_port(bound(make_pod("old"), "a"))
    result = ks.schedule_round([old, with_port(make_pod("p")), with_port(make_pod("q"))], nodes)
    assert names(result) == {"p": "b"}
    assert verdicts(result)["q"] == ("0/2 nodes are available: 2 node(s) didn't have free "
                                     "ports for the requested pod ports.")


# --- PodTopologySpread -------------------------------------------------------------------------


def spread(max_skew: int = 1, key: str = ZONE, **extra: Any) -> dict[str, Any]:
    return {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "web"}}, **extra}


def web(name: str, *constraints: dict[str, Any], cpu: str = "1", **kw: Any) -> dict[str, Any]:
    return with_spec(make_pod(name, cpu=cpu, labels={"app": "web"}, **kw),
                     topologySpreadConstraints=list(constraints))


def test_zone_spread_within_one_round_keeps_the_skew():
    """podtopologyspread/filtering.go `Filter`: matchNum + selfMatch - globalMin <= maxSkew,
    the counts including the pods bound earlier in the round (`AddPod` on the cycle state)."""
    nodes = [zone_node("a1", "a", cpu="16"), zone_node("b1", "b", cpu="2")]
    result = ks.schedule_round([web(f"w{i}", spread()) for i in range(5)], nodes)
    # least allocated would put most on a1; the spread lets a run only one ahead of b
    assert names(result) == {"w0": "a1", "w1": "b1", "w2": "a1", "w3": "b1", "w4": "a1"}
    assert not result.unschedulable
    more = web("w5", spread())
    bound_pods = [bound(web(p, spread()), n) for p, n in names(result).items()]
    full = ks.schedule_round([*bound_pods, more], nodes)
    assert verdicts(full)["w5"] == ("0/2 nodes are available: 1 Insufficient cpu, 1 node(s) "
                                    "didn't match pod topology spread constraints.")


def test_a_node_without_the_topology_key_is_refused_by_name():
    """podtopologyspread/filtering.go `Filter`: ErrReasonNodeLabelNotMatch ("… (missing
    required label)") on a node without the constraint's key."""
    result = ks.schedule_round([web("w", spread())], [make_node("bare")])
    assert verdicts(result)["w"] == ("0/1 nodes are available: 1 node(s) didn't match pod "
                                     "topology spread constraints (missing required label).")


def test_schedule_anyway_does_not_filter():
    """podtopologyspread/common.go `filterTopologySpreadConstraints`: only DoNotSchedule
    constraints filter."""
    soft = {**spread(), "whenUnsatisfiable": "ScheduleAnyway"}
    nodes = [zone_node("a1", "a"), zone_node("b1", "b", ready=False)]
    result = ks.schedule_round([web(f"w{i}", soft) for i in range(3)], nodes)
    assert names(result) == {"w0": "a1", "w1": "a1", "w2": "a1"}


def test_min_domains_counts_the_global_minimum_as_zero_below_it():
    """podtopologyspread/filtering.go `minMatchNum`: with fewer eligible domains than
    minDomains the global minimum is 0."""
    nodes = [zone_node("a1", "a"), zone_node("b1", "b")]
    pods = [web(f"w{i}", spread(minDomains=3)) for i in range(4)]
    result = ks.schedule_round(pods, nodes)
    assert names(result) == {"w0": "a1", "w1": "b1"}
    assert set(verdicts(result)) == {"w2", "w3"}


def test_node_inclusion_policies_default_to_honor_affinity_and_ignore_taints():
    """podtopologyspread/common.go `matchNodeInclusionPolicies`: nodeAffinityPolicy defaults
    to Honor (nodes the pod's selector excludes are no domain), nodeTaintsPolicy to Ignore (a
    tainted node's zone counts, holding the others back)."""
    nodes = [zone_node("a1", "a", labels={"pool": "x"}), zone_node("b1", "b", labels={"pool": "x"}),
             zone_node("c1", "c", labels={"pool": "y"})]
    pods = [web(f"w{i}", spread(), node_selector={"pool": "x"}) for i in range(4)]
    assert names(ks.schedule_round(pods, nodes)) == {"w0": "a1", "w1": "b1", "w2": "a1",
                                                     "w3": "b1"}
    ignored = [web(f"w{i}", spread(nodeAffinityPolicy="Ignore"), node_selector={"pool": "x"})
               for i in range(4)]
    # zone c (no pod can land there) now counts: a and b get one each, then the skew stops
    assert names(ks.schedule_round(ignored, nodes)) == {"w0": "a1", "w1": "b1"}
    tainted = [*nodes[:2], zone_node("c1", "c", taints=[{"key": "t", "effect": "NoSchedule"}])]
    assert names(ks.schedule_round([web(f"w{i}", spread()) for i in range(4)], tainted)) == {
        "w0": "a1", "w1": "b1"}
    honour = [web(f"w{i}", spread(nodeTaintsPolicy="Honor")) for i in range(4)]
    assert len(ks.schedule_round(honour, tainted).bindings) == 4


def test_match_label_keys_split_the_count_by_the_pods_own_label():
    """podtopologyspread/common.go `buildDefaultConstraints`/`getConstraints`: matchLabelKeys
    add ``key In (pod's value)`` to the selector, so revisions spread apart."""
    nodes = [zone_node("a1", "a", cpu="64"), zone_node("b1", "b")]
    old = [bound(make_pod(f"o{i}", labels={"app": "web", "rev": "1"}), "a1") for i in range(3)]
    other = bound(make_pod("other", cpu="6", labels={"app": "other"}), "b1")
    pod = web("new", spread(matchLabelKeys=["rev"]))
    pod["metadata"]["labels"]["rev"] = "2"
    # rev 2 counts no pod anywhere: the least allocated node (a1) takes it
    assert names(ks.schedule_round([*old, other, pod], nodes)) == {"new": "a1"}
    plain = web("plain", spread())
    # counting every app=web pod, a is 3 ahead: only b may take it
    assert names(ks.schedule_round([*old, other, plain], nodes)) == {"plain": "b1"}


# --- InterPodAffinity --------------------------------------------------------------------------


def anti(key: str = HOST, **selector: str) -> dict[str, Any]:
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": key, "labelSelector": {"matchLabels": selector or {"app": "web"}}}]}}


def affine(key: str = ZONE, **selector: str) -> dict[str, Any]:
    return {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": key, "labelSelector": {"matchLabels": selector or {"app": "db"}}}]}}


def test_anti_affinity_puts_one_pod_per_host_within_a_round():
    """interpodaffinity/filtering.go `satisfyPodAntiAffinity` ("node(s) didn't match pod
    anti-affinity rules"), counting the pods bound earlier in the round."""
    nodes = [make_node("n1"), make_node("n2")]
    pods = [with_spec(make_pod(f"w{i}", labels={"app": "web"}), affinity=anti())
            for i in range(3)]
    result = ks.schedule_round(pods, nodes)
    assert sorted(names(result).values()) == ["n1", "n2"]
    assert verdicts(result)["w2"] == ("0/2 nodes are available: 2 node(s) didn't match pod "
                                      "anti-affinity rules.")


def test_an_existing_pods_anti_affinity_keeps_others_off_its_topology():
    """interpodaffinity/filtering.go `satisfyExistingPodsAntiAffinity` ("node(s) didn't
    satisfy existing pods anti-affinity rules"): the bound pod's term, matched against the
    incoming pod."""
    nodes = [zone_node("a1", "a"), zone_node("a2", "a"), zone_node("b1", "b")]
    loner = bound(with_spec(make_pod("loner"), affinity=anti(ZONE, app="web")), "a1")
    pods = [make_pod(f"w{i}", labels={"app": "web"}) for i in range(2)]
    result = ks.schedule_round([loner, *pods], nodes)
    assert names(result) == {"w0": "b1", "w1": "b1"}
    other = ks.schedule_round([loner, make_pod("x", labels={"app": "db"})], nodes)
    assert names(other) == {"x": "a2"}
    only_a = ks.schedule_round([loner, pods[0]], nodes[:2])
    assert verdicts(only_a)["w0"] == ("0/2 nodes are available: 2 node(s) didn't satisfy "
                                      "existing pods anti-affinity rules.")


def test_affinity_needs_a_matching_pod_in_the_topology():
    """interpodaffinity/filtering.go `satisfyPodAffinity` ("node(s) didn't match pod affinity
    rules"): a node whose zone holds a pod matching every term; a node without the topology
    key never."""
    nodes = [zone_node("a1", "a"), zone_node("b1", "b"), make_node("bare")]
    db = bound(make_pod("db", labels={"app": "db"}), "b1")
    app = with_spec(make_pod("app"), affinity=affine())
    assert names(ks.schedule_round([db, app], nodes)) == {"app": "b1"}
    full = [db, bound(make_pod("hog", cpu="8"), "b1"), app]
    assert verdicts(ks.schedule_round(full, nodes))["app"] == (
        "0/3 nodes are available: 1 Insufficient cpu, 2 node(s) didn't match pod affinity "
        "rules.")


def test_the_first_pod_of_a_self_affine_group_may_land():
    """interpodaffinity/filtering.go `satisfyPodAffinity`: with no matching pod anywhere, a pod
    matching its own terms passes (on a node with the topology key), so a group with
    affinity to itself can start; the next ones follow it into its zone."""
    nodes = [zone_node("a1", "a", cpu="1"), zone_node("b1", "b", cpu="4"), make_node("bare")]
    group = [with_spec(make_pod(f"g{i}", labels={"app": "db"}), affinity=affine())
             for i in range(3)]
    result = ks.schedule_round(group, nodes)
    assert names(result) == {"g0": "b1", "g1": "b1", "g2": "b1"}
    stranger = with_spec(make_pod("s", labels={"app": "web"}), affinity=affine())
    assert verdicts(ks.schedule_round([stranger], nodes))["s"].endswith(
        "3 node(s) didn't match pod affinity rules.")


def test_term_namespaces_and_namespace_selector():
    """pkg/scheduler/framework/types.go `newAffinityTerm` / util `GetNamespacesFromPodAffinityTerm`:
    no namespaces and no namespaceSelector mean the pod's own namespace; namespaceSelector
    picks namespaces by their labels ({} is every namespace)."""
    nodes = [make_node("n1"), make_node("n2")]
    other_ns = bound(make_pod("web", "team-b", labels={"app": "web"}), "n1")
    hog = bound(make_pod("hog", "team-c", cpu="8", labels={"app": "other"}), "n2")
    own = with_spec(make_pod("p", "team-a", labels={"app": "web"}), affinity=anti())
    # team-b's pod is not in the term's namespace: the least allocated n1 takes it
    assert names(ks.schedule_round([other_ns, hog, own], nodes)) == {"p": "n1"}
    term = anti()["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    by_label = with_spec(make_pod("q", "team-a", labels={"app": "web"}), affinity={
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {**term, "namespaceSelector": {"matchLabels": {"team": "b"}}}]}})
    namespaces = [make_namespace("team-a"), make_namespace("team-b", {"team": "b"})]
    assert names(ks.schedule_round([other_ns, hog, by_label], nodes, namespaces)) == {"q": "n2"}
    everywhere = with_spec(make_pod("r", "team-a", labels={"app": "web"}), affinity={
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {**term, "namespaceSelector": {}}]}})
    assert names(ks.schedule_round([other_ns, hog, everywhere], nodes)) == {"r": "n2"}


# --- the queue, scoring and messages -----------------------------------------------------------


def test_the_queue_takes_priority_then_age():
    """queuesort/priority_sort.go `Less`: higher spec.priority first, then the earlier
    timestamp (creationTimestamp here), then namespace/name for a fixed order."""
    node = make_node("n", cpu="1")
    low_old = make_pod("a-low", cpu="1")
    low_old["metadata"]["creationTimestamp"] = "2026-01-01T00:00:00Z"
    high_new = with_spec(make_pod("z-high", cpu="1"), priority=1000)
    high_new["metadata"]["creationTimestamp"] = "2026-01-02T00:00:00Z"
    result = ks.schedule_round([low_old, high_new], [node])
    assert names(result) == {"z-high": "n"}
    assert [p["metadata"]["name"] for p in ks.queue_order([low_old, high_new])] == [
        "z-high", "a-low"]


def test_least_allocated_node_wins_then_the_name():
    """noderesources/least_allocated.go `leastResourceScorer` (cpu and memory, non-zero
    requests: 100m / 200Mi for a container without requests); ties go to the first name."""
    busy = make_node("a-busy", cpu="8", memory="32Gi")
    idle = make_node("b-idle", cpu="8", memory="32Gi")
    twin = make_node("c-idle", cpu="8", memory="32Gi")
    hog = bound(make_pod("hog", cpu="4", memory="16Gi"), "a-busy")
    assert names(ks.schedule_round([hog, make_pod("p")], [busy, twin, idle])) == {"p": "b-idle"}
    assert ks.nonzero_requests(make_pod("none", cpu=None, memory=None)) == (100, 200 * 2**20)


def test_no_nodes_at_all_says_so():
    """schedule_one.go `schedulePod`: ErrNoNodesAvailable ("no nodes available to schedule
    pods") when the snapshot is empty."""
    assert verdicts(ks.schedule_round([make_pod("p")], [])) == {"p": ks.NO_NODES}


def test_gated_bound_and_deleting_pods_are_not_queued():
    """schedulinggates/scheduling_gates.go `PreEnqueue` keeps gated pods out of the queue;
    bound pods and pods being deleted are not pending."""
    gated = make_pod("g", scheduling_gates=["wait"])
    deleting = make_pod("d")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    result = ks.schedule_round([gated, deleting], [make_node("n")])
    assert result == ks.Round()


def test_the_condition_keeps_its_transition_time_and_is_not_rewritten_unchanged():
    """pkg/api/v1/pod/util.go `UpdatePodCondition`: lastTransitionTime changes only with the
    status; an identical condition is no update."""
    pod = make_pod("p", unschedulable="0/1 nodes are available: 1 Insufficient cpu.")
    pod["status"]["conditions"][0]["lastTransitionTime"] = "2026-01-01T00:00:00Z"
    same = ks.Verdict("default", "p", "Unschedulable",
                      "0/1 nodes are available: 1 Insufficient cpu.")
    assert ks.scheduled_condition(pod, same, "2026-02-02T00:00:00Z") is None
    other = ks.Verdict("default", "p", "Unschedulable", "0/2 nodes are available: x.")
    [cond] = ks.scheduled_condition(pod, other, "2026-02-02T00:00:00Z") or []
    assert cond["message"] == other.message
    assert cond["lastTransitionTime"] == "2026-01-01T00:00:00Z"


# --- refused fields ----------------------------------------------------------------------------


@pytest.mark.parametrize(("change", "field"), [
    ({"schedulerName": "volcano"}, "spec.schedulerName"),
    ({"resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}]}, "spec.resourceClaims"),
    ({"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]},
     "spec.volumes[0].persistentVolumeClaim"),
    ({"affinity": _required({"matchExpressions": [{"key": "k", "operator": "Near",
                                                   "values": ["x"]}]})},
     "nodeSelectorTerms[0].matchExpressions[0].operator"),
    ({"affinity": _required({"matchFields": [{"key": "spec.unschedulable",
                                              "operator": "In", "values": ["x"]}]})},
     "matchFields[0].key"),
    ({"tolerations": [{"key": "k", "operator": "Gt", "value": "1"}]}, "spec.tolerations"),
    ({"topologySpreadConstraints": [{**spread(), "whenUnsatisfiable": "Sometimes"}]},
     "spec.topologySpreadConstraints[0].whenUnsatisfiable"),
    ({"topologySpreadConstraints": [{**spread(), "labelSelector": {"matchExpressions": [
        {"key": "app", "operator": "Like", "values": ["w"]}]}}]},
     "spec.topologySpreadConstraints[0].labelSelector.matchExpressions[0].operator"),
    ({"affinity": anti(HOST) | {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                [{"topologyKey": ZONE, "labelSelector": {},
                                                  "namespaceSelector": {"matchExpressions": [
                                                      {"key": "t", "operator": "Gt"}]}}]}}},
     "namespaceSelector.matchExpressions[0].operator"),
])
def test_unsupported_fields_are_refused_naming_the_field(change, field):
    """Not upstream behaviour but the simulator's contract (module docstring): a field the
    simulated scheduler does not implement is never ignored; the pod stays Pending with
    PodScheduled=False/SchedulerError (upstream's v1.PodReasonSchedulerError) naming it."""
    pod = with_spec(make_pod("p"), **change)
    result = ks.schedule_round([pod], [make_node("n")])
    assert result.bindings == () and result.unschedulable == ()
    [verdict] = result.refused
    assert verdict.reason == "SchedulerError" and field in verdict.message


def test_preferred_terms_are_ignored_for_filtering():
    """nodeaffinity/node_affinity.go and interpodaffinity: preferredDuringScheduling… terms
    only score."""
    pod = with_spec(make_pod("p"), affinity={"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "preference": {"matchExpressions": [
                {"key": "nowhere", "operator": "Exists"}]}}]}})
    assert names(ks.schedule_round([pod], [make_node("n")])) == {"p": "n"}


# --- properties --------------------------------------------------------------------------------


_ZONES = ["a", "b", "c"]
_TAINT = {"key": "spot", "value": "true", "effect": "NoSchedule"}
_TOLERATION = {"key": "spot", "operator": "Equal", "value": "true", "effect": "NoSchedule"}

nodes_strategy = st.lists(st.tuples(st.sampled_from(_ZONES), st.integers(1, 8),
                                    st.booleans(), st.booleans(), st.integers(1, 6)),
                          min_size=0, max_size=6)
pods_strategy = st.lists(st.tuples(st.integers(0, 4000), st.booleans(),
                                   st.sampled_from([None, *_ZONES]), st.booleans(),
                                   st.booleans(), st.integers(0, 2)),
                         min_size=1, max_size=14)


def _cluster(node_specs: list[Any], pod_specs: list[Any]) -> tuple[list[Any], list[Any]]:
    nodes = [zone_node(f"n{i}", zone, cpu=str(cpu), taints=[_TAINT] if tainted else None,
                       ready=ready, pods=slots)
             for i, (zone, cpu, tainted, ready, slots) in enumerate(node_specs)]
    pods = []
    for i, (milli, tolerant, zone, spread_it, anti_it, priority) in enumerate(pod_specs):
        pod = make_pod(f"p{i:02d}", cpu=f"{milli}m", labels={"app": "web"},
                       tolerations=[_TOLERATION] if tolerant else None,
                       node_selector={ZONE: zone} if zone else None)
        if spread_it:
            pod["spec"]["topologySpreadConstraints"] = [spread()]
        if anti_it:
            pod["spec"]["affinity"] = anti()
        pod["spec"]["priority"] = priority
        pods.append(pod)
    return nodes, pods


@settings(max_examples=150, deadline=None)
@given(nodes_strategy, pods_strategy)
def test_property_no_node_is_over_committed(node_specs, pod_specs):
    """noderesources/fit.go `fitsRequest`: whatever the mix, the pods bound to a node never
    request more cpu than it has, nor outnumber allocatable.pods; every pending pod is either
    bound or told why not."""
    nodes, pods = _cluster(node_specs, pod_specs)
    result = ks.schedule_round(pods, nodes)
    by_pod = {p["metadata"]["name"]: p for p in pods}
    for node in nodes:
        name = node["metadata"]["name"]
        mine = [by_pod[b.pod] for b in result.bindings if b.node == name]
        assert sum(ks.pod_requests(p).get("cpu", 0) for p in mine) <= ks.amount(
            "cpu", node["status"]["allocatable"]["cpu"])
        assert len(mine) <= int(node["status"]["allocatable"]["pods"])
    told = {b.pod for b in result.bindings} | {v.pod for v in result.unschedulable}
    assert told == set(by_pod)


@settings(max_examples=150, deadline=None)
@given(nodes_strategy, pods_strategy)
def test_property_a_bound_pod_tolerates_its_node_and_meets_its_required_rules(node_specs,
                                                                            pod_specs):
    """tainttoleration `Filter`, nodeaffinity `Filter`, interpodaffinity
    `satisfyPodAntiAffinity` and podtopologyspread `Filter`, checked on the outcome: a bound
    pod tolerates its node's NoSchedule taints (the not-ready one included), matches its node
    selector, no two anti-affine pods share a host, and each zone spread holds skew <= 1
    over the zones of the nodes the pods may use."""
    nodes, pods = _cluster(node_specs, pod_specs)
    result = ks.schedule_round(pods, nodes)
    by_pod = {p["metadata"]["name"]: p for p in pods}
    by_node = {n["metadata"]["name"]: n for n in nodes}
    hosts: dict[str, list[str]] = {}
    for b in result.bindings:
        pod, node = by_pod[b.pod], by_node[b.node]
        assert ks.untolerated(pod, ks.node_taints(node)) is None
        assert ks.required_node_affinity(pod, node)
        hosts.setdefault(b.node, []).append(b.pod)
    for node_name, bound_here in hosts.items():
        anti_here = [p for p in bound_here if by_pod[p]["spec"].get("affinity")]
        # an anti-affine pod shares its host with no other app=web pod
        assert not anti_here or len(bound_here) == 1, (node_name, bound_here)
    # the spread: replay the bindings in order and check each constrained one when it landed
    placed: list[tuple[str, str]] = []  # (pod, zone)
    for b in result.bindings:
        pod = by_pod[b.pod]
        zone = by_node[b.node]["metadata"]["labels"][ZONE]
        if pod["spec"].get("topologySpreadConstraints"):
            eligible = {n["metadata"]["labels"][ZONE] for n in nodes
                        if ks.required_node_affinity(pod, n)}
            counts = {z: sum(1 for _, pz in placed if pz == z) for z in eligible}
            assert counts[zone] + 1 - min(counts.values()) <= 1
        placed.append((b.pod, zone))


# A cluster where most pods take the fast path (`_FastClass`): plain pods of a few shapes,
# some tolerant or zone-bound, a few with spread or anti-affinity, some already bound.
fast_nodes_strategy = st.lists(st.tuples(st.sampled_from(_ZONES), st.integers(1, 8),
                                         st.booleans(), st.booleans(), st.integers(1, 6),
                                         st.booleans()),
                               min_size=0, max_size=8)
fast_pods_strategy = st.lists(st.tuples(st.sampled_from([0, 250, 500, 1000, 1500, 4000]),
                                        st.sampled_from(["0", "1Gi", "2Gi", "8Gi"]),
                                        st.booleans(), st.sampled_from([None, None, *_ZONES]),
                                        st.sampled_from([None, None, None, None, "spread",
                                                         "anti"]),
                                        st.integers(0, 1), st.integers(-1, 7)),
                              min_size=1, max_size=40)


@settings(max_examples=300, deadline=None)
@given(fast_nodes_strategy, fast_pods_strategy)
def test_property_the_fast_round_is_the_reference_round(node_specs, pod_specs):
    """Not an upstream rule but the simulator's own: `schedule_round`'s fast path (a pod with
    no spread, pod (anti-)affinity or host ports, placed from a per-spec heap of the nodes that
    fit) binds every pod to the node, and gives every unplaced pod the message, that running
    every filter on every node (`fast=False`) gives — ties to the first node by name, nodes
    that fill up or go cordoned, pods already bound (`bound`: slot -1 is pending)."""
    nodes = [zone_node(f"n{i}", zone, cpu=str(cpu), taints=[_TAINT] if tainted else None,
                       ready=ready, pods=slots, unschedulable=cordoned)
             for i, (zone, cpu, tainted, ready, slots, cordoned) in enumerate(node_specs)]
    pods = []
    for i, (milli, memory, tolerant, zone, rule, priority, slot) in enumerate(pod_specs):
        pod = make_pod(f"p{i:02d}", cpu=f"{milli}m", memory=memory, labels={"app": "web"},
                       tolerations=[_TOLERATION] if tolerant else None,
                       node_selector={ZONE: zone} if zone else None)
        if rule == "spread":
            pod["spec"]["topologySpreadConstraints"] = [spread()]
        elif rule == "anti" and slot < 0:  # a bound anti-affine pod makes every pod slow
            pod["spec"]["affinity"] = anti()
        pod["spec"]["priority"] = priority
        if 0 <= slot < len(nodes):
            bound(pod, f"n{slot}")
        pods.append(pod)
    assert ks.schedule_round(pods, nodes) == ks.schedule_round(pods, nodes, fast=False)


def test_a_fast_pod_told_why_sees_the_bindings_made_since_the_last_one():
    """framework/types.go `FitError.Error`, per pod: the second big pod's message counts the
    node that the small pod between them filled (Too many pods), not the first one's."""
    node = make_node("n", cpu="2", pods=1)
    pods = [make_pod("a", cpu="4"), make_pod("b", cpu="1"), make_pod("c", cpu="4")]
    for i, pod in enumerate(pods):
        pod["metadata"]["creationTimestamp"] = f"2026-01-01T00:00:0{i}Z"
    result = ks.schedule_round(pods, [node])
    assert names(result) == {"b": "n"}
    assert verdicts(result) == {"a": "0/1 nodes are available: 1 Insufficient cpu.",
                                "c": "0/1 nodes are available: 1 Insufficient cpu, "
                                     "1 Too many pods."}
    assert result == ks.schedule_round(pods, [node], fast=False)
