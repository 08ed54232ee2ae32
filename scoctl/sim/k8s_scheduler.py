"""The simulated region's kube-scheduler, written from upstream's plugins, not scoctl's rules.

A pure scheduler over the JSON objects the Kubernetes emulator serves (pods, nodes, namespaces).
It imports nothing of scoctl (an import contract in pyproject.toml keeps it so): quantities,
requests, selectors and tolerations are read here, the way kube-scheduler reads them, so the
simulated region grades scoctl's planner with rules of its own.

`schedule_round` takes the pending pods one at a time in queue order (`queue_order`:
``spec.priority`` descending, then creation time, then namespace/name, as the PrioritySort
plugin with the queue's timestamps), runs the filter plugins over every node in upstream's
default order, and binds the pod to the best node (`score`); each pod sees the bindings made
earlier in the round, so spread and anti-affinity hold within a round. The filters, with the
upstream file each follows (``pkg/scheduler/framework/plugins/…`` unless named otherwise):

* NodeUnschedulable (``nodeunschedulable/node_unschedulable.go``): ``spec.unschedulable``
  unless the pod tolerates ``node.kubernetes.io/unschedulable:NoSchedule``;
* NodeName (``nodename/node_name.go``): ``spec.nodeName`` names the node;
* TaintToleration (``tainttoleration/taint_toleration.go``): every NoSchedule / NoExecute taint
  tolerated (PreferNoSchedule is for scoring only). Taints are the Node's own plus the ones the
  node lifecycle controller keeps in step with its Ready condition
  (``pkg/controller/nodelifecycle/node_lifecycle_controller.go``: Ready=False →
  ``node.kubernetes.io/not-ready``, Unknown → ``node.kubernetes.io/unreachable``), so a NotReady
  Node is refused as on a real cluster;
* NodeAffinity (``nodeaffinity/node_affinity.go``, ``k8s.io/component-helpers/scheduling/
  corev1/nodeaffinity``): ``nodeSelector`` AND the required ``nodeSelectorTerms`` (terms ORed,
  expressions ANDed; In, NotIn, Exists, DoesNotExist, Gt, Lt; ``matchFields`` on
  ``metadata.name``);
* NodePorts (``nodeports/node_ports.go``): a ``hostPort`` already taken on the node;
* NodeResourcesFit (``noderesources/fit.go`` `fitsRequest`, requests from
  ``pkg/api/v1/resource/helpers.go`` `PodRequests`): containers summed, init containers' max,
  sidecars (``restartPolicy: Always`` init containers) added, pod-level ``spec.resources``,
  ``overhead``; cpu, memory, ephemeral-storage, extended resources (``nvidia.com/gpu``) and
  ``allocatable.pods``;
* PodTopologySpread (``podtopologyspread/filtering.go``): DoNotSchedule constraints (maxSkew,
  topologyKey, labelSelector, minDomains, matchLabelKeys, nodeAffinityPolicy default Honor,
  nodeTaintsPolicy default Ignore); ScheduleAnyway is for scoring only;
* InterPodAffinity (``interpodaffinity/filtering.go``): required podAffinity (with the rule that
  lets the first pod of a group that matches its own terms in), required podAntiAffinity, and
  the required anti-affinity of pods already on the nodes; namespaces, namespaceSelector,
  matchLabelKeys / mismatchLabelKeys.

A pod that no node passes gets upstream's FitError message (``framework/types.go``
`FitError.Error`: "0/3 nodes are available: 1 node(s) had untolerated taint {k: v}, 2
Insufficient cpu."; with no nodes at all, ``schedule_one.go``'s "no nodes available to schedule
pods"). Preemption is not simulated, so no "preemption: …" part follows.

Refused loudly (`unsupported`; the pod is not bound and gets PodScheduled=False, reason
SchedulerError, naming the field): ``spec.schedulerName`` other than ``default-scheduler``,
``spec.resourceClaims`` (dynamic resource allocation), volumes with a
``persistentVolumeClaim`` or ``ephemeral`` source (volume binding and volume zones are not
simulated), an operator the API does not define (node selector, label selector, toleration),
``matchFields`` on anything but ``metadata.name``, a topology spread constraint's unknown
``whenUnsatisfiable`` / inclusion policy, and quantities that do not parse. Ignored because
kube-scheduler only scores with them: ``preferredDuringSchedulingIgnoredDuringExecution`` terms,
ScheduleAnyway constraints and PreferNoSchedule taints. Scheduling-gated pods
(``spec.schedulingGates``) wait untouched, as upstream's SchedulingGates plugin keeps them.
"""

from __future__ import annotations

import functools
import heapq
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

Obj = dict[str, Any]
DEFAULT_SCHEDULER = "default-scheduler"
TAINT_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
TAINT_NOT_READY = "node.kubernetes.io/not-ready"
TAINT_UNREACHABLE = "node.kubernetes.io/unreachable"
HOSTNAME = "kubernetes.io/hostname"
NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"

# the reasons upstream's filter plugins give (their ErrReason… constants)
REASON_UNSCHEDULABLE = "node(s) were unschedulable"
REASON_NODE_NAME = "node(s) didn't match the requested node name"
REASON_TAINT = "node(s) had untolerated taint {{{key}: {value}}}"
REASON_NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
REASON_PORTS = "node(s) didn't have free ports for the requested pod ports"
REASON_TOO_MANY_PODS = "Too many pods"
REASON_INSUFFICIENT = "Insufficient {resource}"
REASON_SPREAD = "node(s) didn't match pod topology spread constraints"
REASON_SPREAD_LABEL = REASON_SPREAD + " (missing required label)"
REASON_AFFINITY = "node(s) didn't match pod affinity rules"
REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
NO_NODES = "no nodes available to schedule pods"

NODE_SELECTOR_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"})
LABEL_SELECTOR_OPS = frozenset({"In", "NotIn", "Exists", "DoesNotExist"})
TOLERATION_OPS = frozenset({"", "Equal", "Exists"})
FILTER_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
POD_LEVEL_RESOURCES = frozenset({"cpu", "memory"})
# the requests kube-scheduler assumes for scoring a container that sets none
# (pkg/scheduler/util/pod_resources.go: DefaultMilliCPURequest, DefaultMemoryRequest)
NONZERO_CPU = 100
NONZERO_MEMORY = 200 * 2**20


class Unsupported(ValueError):
    """A pod uses a scheduling field the simulated scheduler does not implement (the message
    names the field)."""


# --- quantities (k8s.io/apimachinery/pkg/api/resource/quantity.go) ----------------------------

_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
                       r"(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def parse_quantity(value: Any) -> Fraction:
    """A Kubernetes quantity (``<signedNumber><suffix>``: binary Ki…Ei, decimal n…E or an
    exponent e3/E-2) as an exact fraction. Raises ValueError."""
    if isinstance(value, bool):
        raise ValueError(f"not a quantity: {value!r}")
    if isinstance(value, int):
        return Fraction(value)
    text = str(value).strip()
    match = _QUANTITY.match(text)
    if not match:
        raise ValueError(f"not a quantity: {value!r}")
    number, suffix = Fraction(match.group(1)), match.group(2) or ""
    exponent = 0
    if suffix in _BINARY:
        return number * Fraction(1024 ** _BINARY[suffix])
    if suffix in _DECIMAL:
        exponent = _DECIMAL[suffix]
    elif suffix:
        exponent = int(suffix[1:])
    return number * Fraction(10**exponent) if exponent >= 0 else number / 10**-exponent


def _ceil(value: Fraction) -> int:
    return -((-value.numerator) // value.denominator)


def amount(resource: str, value: Any) -> int:
    """A quantity in the unit the scheduler compares: millicores for cpu (`MilliValue`),
    whole units for everything else (`Value`), both rounded up as quantity.go does."""
    if isinstance(value, str):
        return _amount_text(resource == "cpu", value)
    quantity = parse_quantity(value)
    return _ceil(quantity * 1000) if resource == "cpu" else _ceil(quantity)


@functools.lru_cache(maxsize=4096)
def _amount_text(milli: bool, value: str) -> int:
    """`amount` of a quantity string, remembered: a round reads the same few strings on
    every pod and node (ValueError is raised each time, never remembered)."""
    quantity = parse_quantity(value)
    return _ceil(quantity * 1000) if milli else _ceil(quantity)


def resource_list(values: Mapping[str, Any] | None, where: str) -> dict[str, int]:
    """A ResourceList (name → quantity) in scheduler units; raises Unsupported naming `where`
    for a quantity that does not parse."""
    out: dict[str, int] = {}
    for name, value in (values or {}).items():
        try:
            out[str(name)] = amount(str(name), value)
        except ValueError as exc:
            raise Unsupported(f"{where}.{name}: {exc}") from exc
    return out


# --- requests (pkg/api/v1/resource/helpers.go) -------------------------------------------------


def _add(into: dict[str, int], more: Mapping[str, int]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for name, value in other.items():
        if value > into.get(name, 0):
            into[name] = value


def container_requests(container: Mapping[str, Any], where: str) -> dict[str, int]:
    """A container's requests; a resource with only a limit requests the limit, as the
    apiserver's defaulting writes it (pkg/apis/core/v1/defaults.go `SetDefaults_Pod`)."""
    resources = container.get("resources") or {}
    limits = resource_list(resources.get("limits"), f"{where}.resources.limits")
    requests = resource_list(resources.get("requests"), f"{where}.resources.requests")
    return {**limits, **requests}


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """`PodRequests`: containers summed; each init container's request (plus the sidecars
    started before it) maxed with that; sidecars (``restartPolicy: Always``) also add to the
    containers' sum; pod-level ``spec.resources.requests`` (cpu, memory, hugepages) replace the
    aggregate; ``overhead`` added. Raises Unsupported for a quantity that does not parse."""
    spec = pod.get("spec") or {}
    total: dict[str, int] = {}
    for i, container in enumerate(spec.get("containers") or []):
        _add(total, container_requests(container, f"spec.containers[{i}]"))
    sidecars: dict[str, int] = {}
    init_max: dict[str, int] = {}
    for i, container in enumerate(spec.get("initContainers") or []):
        requests = container_requests(container, f"spec.initContainers[{i}]")
        if container.get("restartPolicy") == "Always":
            _add(total, requests)
            _add(sidecars, requests)
            use = dict(sidecars)
        else:
            use = dict(requests)
            _add(use, sidecars)
        _max(init_max, use)
    _max(total, init_max)
    pod_level = resource_list((spec.get("resources") or {}).get("requests"),
                              "spec.resources.requests")
    for name, value in pod_level.items():
        if name in POD_LEVEL_RESOURCES or name.startswith("hugepages-"):
            total[name] = value
    _add(total, resource_list(spec.get("overhead"), "spec.overhead"))
    return total


def nonzero_requests(pod: Mapping[str, Any]) -> tuple[int, int]:
    """(millicores, bytes) for scoring: a container without a cpu or memory request counts
    100m / 200Mi (pkg/scheduler/framework/types.go `calculateResource` with
    `schedutil.GetNonzeroRequests`)."""
    spec = pod.get("spec") or {}
    cpu = memory = 0
    for i, container in enumerate(spec.get("containers") or []):
        requests = container_requests(container, f"spec.containers[{i}]")
        cpu += requests.get("cpu") or NONZERO_CPU
        memory += requests.get("memory") or NONZERO_MEMORY
    return cpu, memory


# --- selectors ---------------------------------------------------------------------------------


def _node_requirement(req: Mapping[str, Any], value: str | None, where: str) -> bool:
    """One NodeSelectorRequirement against a label (or field) value (None: absent)."""
    op = str(req.get("operator", ""))
    values = [str(v) for v in req.get("values") or []]
    if op not in NODE_SELECTOR_OPS:
        raise Unsupported(f"{where}.operator: {op!r} is not a node selector operator")
    if op == "In":
        return value is not None and value in values
    if op == "NotIn":
        return value is None or value not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if len(values) != 1:
        raise Unsupported(f"{where}.values: {op} takes exactly one integer")
    try:
        bound = int(values[0])
    except ValueError as exc:
        raise Unsupported(f"{where}.values: {values[0]!r} is not an integer") from exc
    if value is None:
        return False
    try:
        have = int(value)
    except ValueError:
        return False
    return have > bound if op == "Gt" else have < bound


def node_selector_term_matches(term: Mapping[str, Any], node: Mapping[str, Any],
                               where: str = "nodeSelectorTerms[0]") -> bool:
    """A NodeSelectorTerm: its matchExpressions (labels) and matchFields (``metadata.name``)
    all hold; a term with neither matches no node (component-helpers nodeaffinity
    `nodeSelectorTerm.match`)."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not expressions and not fields:
        return False
    ok = True
    for i, req in enumerate(expressions):
        key = str(req.get("key", ""))
        ok &= _node_requirement(req, labels.get(key), f"{where}.matchExpressions[{i}]")
    for i, req in enumerate(fields):
        if req.get("key") != "metadata.name":
            raise Unsupported(f"{where}.matchFields[{i}].key: {req.get('key')!r} (only "
                              f"metadata.name is a node field selector)")
        if req.get("operator") not in ("In", "NotIn"):
            raise Unsupported(f"{where}.matchFields[{i}].operator: {req.get('operator')!r}")
        name = str((node.get("metadata") or {}).get("name", ""))
        ok &= _node_requirement(req, name, f"{where}.matchFields[{i}]")
    return ok


def required_node_affinity(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """`GetRequiredNodeAffinity(pod).Match(node)`: every ``nodeSelector`` label, and (when
    set) any of the required ``nodeSelectorTerms``."""
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    required = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                .get("requiredDuringSchedulingIgnoredDuringExecution"))
    terms_ok = True
    if required is not None:
        base = "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
        # every term is evaluated (not any()), so an unsupported operator anywhere is refused
        results = [node_selector_term_matches(t, node, f"{base}.nodeSelectorTerms[{i}]")
                   for i, t in enumerate(required.get("nodeSelectorTerms") or [])]
        terms_ok = any(results)
    selector = spec.get("nodeSelector") or {}
    return terms_ok and all(labels.get(k) == str(v) for k, v in selector.items())


def label_selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str],
                           where: str = "labelSelector") -> bool:
    """A metav1.LabelSelector (`LabelSelectorAsSelector`): None selects nothing, ``{}``
    everything; matchLabels and matchExpressions (In, NotIn, Exists, DoesNotExist) ANDed."""
    if selector is None:
        return False
    ok = all(labels.get(str(k)) == str(v) for k, v in (selector.get("matchLabels") or {}).items())
    for i, req in enumerate(selector.get("matchExpressions") or []):
        op = str(req.get("operator", ""))
        if op not in LABEL_SELECTOR_OPS:
            raise Unsupported(f"{where}.matchExpressions[{i}].operator: {op!r} is not a label "
                              f"selector operator")
        key = str(req.get("key", ""))
        values = {str(v) for v in req.get("values") or []}
        value = labels.get(key)
        if op == "In":
            ok &= value is not None and value in values
        elif op == "NotIn":
            ok &= value is None or value not in values
        elif op == "Exists":
            ok &= value is not None
        else:
            ok &= value is None
    return ok


def _with_label_keys(selector: Mapping[str, Any] | None, pod: Mapping[str, Any],
                     match_keys: Sequence[str], mismatch_keys: Sequence[str] = ()) -> Any:
    """The selector with ``key In (pod's value)`` for each matchLabelKeys key the pod carries
    (and ``NotIn`` for mismatchLabelKeys), as the scheduler merges them."""
    if selector is None or (not match_keys and not mismatch_keys):
        return selector
    labels = _labels(pod)
    extra = [{"key": k, "operator": "In", "values": [labels[k]]}
             for k in match_keys if k in labels]
    extra += [{"key": k, "operator": "NotIn", "values": [labels[k]]}
              for k in mismatch_keys if k in labels]
    return {**selector, "matchExpressions": [*(selector.get("matchExpressions") or []),
                                             *extra]}


# --- tolerations (k8s.io/api/core/v1/toleration.go) --------------------------------------------


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """`Toleration.ToleratesTaint`: an empty effect matches every effect, an empty key (with
    Exists) every key; Exists ignores the value, Equal (or no operator) compares it."""
    op = str(toleration.get("operator") or "")
    if op not in TOLERATION_OPS:
        raise Unsupported(f"spec.tolerations: operator {op!r} is not Equal or Exists")
    effect = str(toleration.get("effect") or "")
    key = str(toleration.get("key") or "")
    if effect and effect != str(taint.get("effect") or ""):
        return False
    if key and key != str(taint.get("key") or ""):
        return False
    if op == "Exists":
        return True
    return str(toleration.get("value") or "") == str(taint.get("value") or "")


def _tolerations(pod: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((pod.get("spec") or {}).get("tolerations") or [])


def untolerated(pod: Mapping[str, Any], taints: Iterable[Mapping[str, Any]]
                ) -> Mapping[str, Any] | None:
    """The first NoSchedule/NoExecute taint no toleration of the pod tolerates
    (`v1helper.FindMatchingUntoleratedTaint`), or None."""
    tolerations = _tolerations(pod)
    for taint in taints:
        if str(taint.get("effect")) not in FILTER_EFFECTS:
            continue
        if not any(tolerates(t, taint) for t in tolerations):
            return taint
    return None


def node_taints(node: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The Node's taints plus the ones the node lifecycle controller keeps in step with its
    Ready condition (`doNoScheduleTaintingPass` / `doNoExecuteTaintingPass`) and with
    ``spec.unschedulable``, when not written yet."""
    taints: list[Mapping[str, Any]] = list((node.get("spec") or {}).get("taints") or [])
    ready = next((c.get("status") for c in (node.get("status") or {}).get("conditions") or []
                  if c.get("type") == "Ready"), "Unknown")
    key = None if ready == "True" else TAINT_NOT_READY if ready == "False" else TAINT_UNREACHABLE
    have = {(t.get("key"), t.get("effect")) for t in taints}
    wanted = [(key, "NoSchedule"), (key, "NoExecute")] if key else []
    if (node.get("spec") or {}).get("unschedulable"):
        wanted.append((TAINT_UNSCHEDULABLE, "NoSchedule"))
    taints += [{"key": k, "effect": e} for k, e in wanted if (k, e) not in have]
    return taints


# --- refused fields ----------------------------------------------------------------------------


def unsupported(pod: Mapping[str, Any], namespaces: Mapping[str, Mapping[str, str]]
                ) -> str | None:
    """The field of a pod the simulated scheduler does not implement, or None: the pod is then
    refused (PodScheduled=False, SchedulerError) instead of scheduled as if it were absent.
    Operators and quantities are checked by evaluating them once against an empty node."""
    spec = pod.get("spec") or {}
    name = spec.get("schedulerName") or DEFAULT_SCHEDULER
    if name != DEFAULT_SCHEDULER:
        return (f"spec.schedulerName: {name!r} (only {DEFAULT_SCHEDULER} runs in the simulated "
                f"region)")
    if spec.get("resourceClaims"):
        return "spec.resourceClaims: dynamic resource allocation is not simulated"
    for i, volume in enumerate(spec.get("volumes") or []):
        for source in ("persistentVolumeClaim", "ephemeral"):
            if source in volume:
                return (f"spec.volumes[{i}].{source}: volume binding and volume zones are not "
                        f"simulated")
    for i, constraint in enumerate(spec.get("topologySpreadConstraints") or []):
        where = f"spec.topologySpreadConstraints[{i}]"
        if constraint.get("whenUnsatisfiable") not in ("DoNotSchedule", "ScheduleAnyway"):
            return f"{where}.whenUnsatisfiable: {constraint.get('whenUnsatisfiable')!r}"
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if constraint.get(policy, "Honor") not in ("Honor", "Ignore"):
                return f"{where}.{policy}: {constraint.get(policy)!r}"
    probe: Obj = {"metadata": {"name": "", "labels": {}}}
    try:
        pod_requests(pod)
        required_node_affinity(pod, probe)
        untolerated(pod, [{"key": "", "effect": "NoSchedule"}])
        for term in _pod_terms(pod, "podAffinity") + _pod_terms(pod, "podAntiAffinity"):
            label_selector_matches(term.selector, {}, term.where)
            _term_namespace_match(term, "", {}, namespaces)
        for c in _spread_constraints(pod):
            label_selector_matches(c.selector, {}, c.where)
    except Unsupported as exc:
        return str(exc)
    return None


# --- pod affinity terms ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Term:
    """A required PodAffinityTerm with its namespaces resolved (`GetNamespacesFromPodAffinityTerm`
    / namespaceSelector) and its matchLabelKeys merged."""

    selector: Any
    topology_key: str
    namespaces: frozenset[str]
    namespace_selector: Any
    where: str


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in ((obj.get("metadata") or {}).get("labels") or {}).items()}


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def _pod_terms(pod: Mapping[str, Any], kind: str) -> list[_Term]:
    affinity = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    out = []
    for i, term in enumerate(affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
                             or []):
        names = frozenset(str(n) for n in term.get("namespaces") or [])
        ns_selector = term.get("namespaceSelector")
        if not names and ns_selector is None:
            names = frozenset({_namespace(pod)})
        selector = _with_label_keys(term.get("labelSelector"), pod,
                                    [str(k) for k in term.get("matchLabelKeys") or []],
                                    [str(k) for k in term.get("mismatchLabelKeys") or []])
        out.append(_Term(selector, str(term.get("topologyKey", "")), names, ns_selector,
                         f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution"
                         f"[{i}]"))
    return out


def _term_namespace_match(term: _Term, namespace: str, labels: Mapping[str, str],
                          namespaces: Mapping[str, Mapping[str, str]]) -> bool:
    if namespace in term.namespaces:
        return True
    if term.namespace_selector is None:
        return False
    ns_labels = namespaces.get(namespace, {NAMESPACE_NAME_LABEL: namespace})
    return label_selector_matches(term.namespace_selector, ns_labels,
                                  f"{term.where}.namespaceSelector")


def _term_matches(term: _Term, pod: Mapping[str, Any],
                  namespaces: Mapping[str, Mapping[str, str]]) -> bool:
    """`PodMatchesTermsNamespaceAndSelector`."""
    return (_term_namespace_match(term, _namespace(pod), _labels(pod), namespaces)
            and label_selector_matches(term.selector, _labels(pod), term.where))


# --- topology spread constraints ---------------------------------------------------------------


@dataclass(frozen=True)
class _Spread:
    max_skew: int
    topology_key: str
    selector: Any
    min_domains: int
    honor_affinity: bool
    honor_taints: bool
    where: str


def _spread_constraints(pod: Mapping[str, Any]) -> list[_Spread]:
    """The pod's DoNotSchedule constraints (`filterTopologySpreadConstraints`)."""
    out = []
    for i, c in enumerate((pod.get("spec") or {}).get("topologySpreadConstraints") or []):
        if c.get("whenUnsatisfiable") != "DoNotSchedule":
            continue
        selector = _with_label_keys(c.get("labelSelector"), pod,
                                    [str(k) for k in c.get("matchLabelKeys") or []])
        out.append(_Spread(int(c.get("maxSkew", 1)), str(c.get("topologyKey", "")), selector,
                           int(c.get("minDomains") or 1),
                           c.get("nodeAffinityPolicy", "Honor") == "Honor",
                           c.get("nodeTaintsPolicy", "Ignore") == "Honor",
                           f"spec.topologySpreadConstraints[{i}].labelSelector"))
    return out


# --- the snapshot ------------------------------------------------------------------------------


@dataclass
class _NodeState:
    node: Mapping[str, Any]
    name: str
    labels: dict[str, str]
    taints: list[Mapping[str, Any]]
    allocatable: dict[str, int]
    requested: dict[str, int] = field(default_factory=dict)
    nonzero: list[int] = field(default_factory=lambda: [0, 0])
    pods: list[Mapping[str, Any]] = field(default_factory=list)
    ports: set[tuple[str, str, int]] = field(default_factory=set)
    anti_terms: list[_Term] = field(default_factory=list)  # its pods' required anti-affinity

    def add(self, pod: Mapping[str, Any]) -> None:
        self.pods.append(pod)
        try:
            self.anti_terms += _pod_terms(pod, "podAntiAffinity")
        except Unsupported:
            pass  # a bound pod's own bad selector: it was refused, it binds nothing
        try:
            _add(self.requested, pod_requests(pod))
            cpu, memory = nonzero_requests(pod)
        except Unsupported:
            cpu = memory = 0  # a bound pod with a bad quantity: the apiserver would not have it
        self.nonzero[0] += cpu
        self.nonzero[1] += memory
        self.ports |= host_ports(pod)


def host_ports(pod: Mapping[str, Any]) -> set[tuple[str, str, int]]:
    """(hostIP, protocol, hostPort) of every container port with a hostPort."""
    spec = pod.get("spec") or {}
    out = set()
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        for port in container.get("ports") or []:
            if port.get("hostPort"):
                out.add((str(port.get("hostIP") or "0.0.0.0"), str(port.get("protocol") or "TCP"),
                         int(port["hostPort"])))
    return out


def _ports_conflict(wanted: set[tuple[str, str, int]], used: set[tuple[str, str, int]]) -> bool:
    """`HostPortInfo.CheckConflict`: same protocol and port, and the same IP or either is
    0.0.0.0."""
    for ip, proto, port in wanted:
        for uip, uproto, uport in used:
            if proto == uproto and port == uport and (ip == uip or "0.0.0.0" in (ip, uip)):
                return True
    return False


def _is_terminal(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def is_pending(pod: Mapping[str, Any]) -> bool:
    """A pod the scheduler queues: unbound, Pending, not being deleted, not gated."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    return (not spec.get("nodeName") and (pod.get("status") or {}).get("phase") == "Pending"
            and not meta.get("deletionTimestamp") and not spec.get("schedulingGates"))


def queue_order(pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """PrioritySort (``queuesort/priority_sort.go`` `Less`): higher ``spec.priority`` first,
    then the earlier queue timestamp (creation time here), then namespace/name."""
    def key(pod: Mapping[str, Any]) -> tuple[int, str, str, str]:
        meta = pod.get("metadata") or {}
        return (-int((pod.get("spec") or {}).get("priority") or 0),
                str(meta.get("creationTimestamp") or ""), _namespace(pod), str(meta.get("name")))
    return sorted(pods, key=key)


# --- filters -----------------------------------------------------------------------------------


@dataclass
class _PreFilter:
    """What the PreFilter extension points compute once per pod over every node."""

    spread: list[_Spread]
    spread_counts: list[dict[str, int]]
    affinity: list[_Term]
    anti_affinity: list[_Term]
    affinity_counts: dict[tuple[str, str], int]
    anti_counts: dict[tuple[str, str], int]
    existing_anti_counts: dict[tuple[str, str], int]
    self_match: list[bool] = field(default_factory=list)  # per spread constraint
    ports: set[tuple[str, str, int]] = field(default_factory=set)
    nonzero: tuple[int, int] = (0, 0)


def _prefilter(pod: Mapping[str, Any], nodes: Sequence[_NodeState],
               namespaces: Mapping[str, Mapping[str, str]]) -> _PreFilter:
    spread = _spread_constraints(pod)
    counts: list[dict[str, int]] = [{} for _ in spread]
    ns = _namespace(pod)
    for state in nodes:
        # nodeLabelsMatchSpreadConstraints: the node carries every constraint's key
        if not spread or any(c.topology_key not in state.labels for c in spread):
            continue
        for i, c in enumerate(spread):
            if c.honor_affinity and not required_node_affinity(pod, state.node):
                continue
            if c.honor_taints and untolerated(pod, state.taints) is not None:
                continue
            matching = sum(1 for p in state.pods
                           if _namespace(p) == ns
                           and not (p.get("metadata") or {}).get("deletionTimestamp")
                           and label_selector_matches(c.selector, _labels(p), c.where))
            value = state.labels[c.topology_key]
            counts[i][value] = counts[i].get(value, 0) + matching
    affinity = _pod_terms(pod, "podAffinity")
    anti = _pod_terms(pod, "podAntiAffinity")
    affinity_counts: dict[tuple[str, str], int] = {}
    anti_counts: dict[tuple[str, str], int] = {}
    existing: dict[tuple[str, str], int] = {}
    for state in nodes:
        for t in state.anti_terms:
            try:
                hit = _term_matches(t, pod, namespaces) and t.topology_key in state.labels
            except Unsupported:
                continue  # a bound pod's own bad selector: it was refused, it binds nothing
            if hit:
                pair = (t.topology_key, state.labels[t.topology_key])
                existing[pair] = existing.get(pair, 0) + 1
        if not affinity and not anti:
            continue
        for other in state.pods:
            if affinity and all(_term_matches(t, other, namespaces) for t in affinity):
                for t in affinity:
                    if t.topology_key in state.labels:
                        pair = (t.topology_key, state.labels[t.topology_key])
                        affinity_counts[pair] = affinity_counts.get(pair, 0) + 1
            for t in anti:
                if _term_matches(t, other, namespaces) and t.topology_key in state.labels:
                    pair = (t.topology_key, state.labels[t.topology_key])
                    anti_counts[pair] = anti_counts.get(pair, 0) + 1
    labels = _labels(pod)
    return _PreFilter(spread, counts, affinity, anti, affinity_counts, anti_counts, existing,
                      [label_selector_matches(c.selector, labels, c.where) for c in spread],
                      host_ports(pod), nonzero_requests(pod))


def _fit_reasons(pod: Mapping[str, Any], request: Mapping[str, int],
                 state: _NodeState) -> list[str]:
    """`fitsRequest`: pods, then cpu, memory, ephemeral-storage, then extended resources; a
    request of all zeroes fits once the pod count does."""
    reasons = []
    if len(state.pods) + 1 > state.allocatable.get("pods", 0):
        reasons.append(REASON_TOO_MANY_PODS)
    if not any(request.values()):
        return reasons
    order = ["cpu", "memory", "ephemeral-storage"]
    order += sorted(k for k in request if k not in order and k != "pods")
    for name in order:
        want = request.get(name, 0)
        if want > 0 and want > state.allocatable.get(name, 0) - state.requested.get(name, 0):
            reasons.append(REASON_INSUFFICIENT.format(resource=name))
    return reasons


def _spread_reason(pod: Mapping[str, Any], pre: _PreFilter, state: _NodeState) -> str | None:
    for i, c in enumerate(pre.spread):
        value = state.labels.get(c.topology_key)
        if value is None:
            return REASON_SPREAD_LABEL
        counts = pre.spread_counts[i]
        minimum = min(counts.values()) if counts else 0
        if len(counts) < c.min_domains:
            minimum = 0
        if counts.get(value, 0) + int(pre.self_match[i]) - minimum > c.max_skew:
            return REASON_SPREAD
    return None


def _affinity_reason(pod: Mapping[str, Any], pre: _PreFilter, state: _NodeState,
                     namespaces: Mapping[str, Mapping[str, str]]) -> str | None:
    exist = True
    for t in pre.affinity:
        if t.topology_key not in state.labels:
            return REASON_AFFINITY
        if pre.affinity_counts.get((t.topology_key, state.labels[t.topology_key]), 0) <= 0:
            exist = False
    # the first pod of a group with affinity to itself may land where the topology exists
    if not exist and not (not pre.affinity_counts
                          and all(_term_matches(t, pod, namespaces) for t in pre.affinity)):
        return REASON_AFFINITY
    for t in pre.anti_affinity:
        value = state.labels.get(t.topology_key)
        if value is not None and pre.anti_counts.get((t.topology_key, value), 0) > 0:
            return REASON_ANTI_AFFINITY
    if any(pre.existing_anti_counts.get((k, v), 0) > 0 for k, v in state.labels.items()):
        return REASON_EXISTING_ANTI_AFFINITY
    return None


def _node_reason(pod: Mapping[str, Any], state: _NodeState) -> str | None:
    """The reason of the first of the filters that read only the pod's spec and the Node
    (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity), or None: they pass. What
    they say holds for a whole round (`_FastClass`)."""
    spec = pod.get("spec") or {}
    if (state.node.get("spec") or {}).get("unschedulable") and not any(
            tolerates(t, {"key": TAINT_UNSCHEDULABLE, "effect": "NoSchedule"})
            for t in _tolerations(pod)):
        return REASON_UNSCHEDULABLE
    if spec.get("nodeName") and spec["nodeName"] != state.name:
        return REASON_NODE_NAME
    taint = untolerated(pod, state.taints)
    if taint is not None:
        return REASON_TAINT.format(key=taint.get("key", ""), value=taint.get("value", ""))
    if not required_node_affinity(pod, state.node):
        return REASON_NODE_AFFINITY
    return None


def filter_node(pod: Mapping[str, Any], state: _NodeState, pre: _PreFilter,
                request: Mapping[str, int],
                namespaces: Mapping[str, Mapping[str, str]]) -> list[str]:
    """The reasons the first failing filter plugin gives for `state`'s node ([]: it fits),
    plugins in upstream's default order (``pkg/scheduler/apis/config/v1/default_plugins.go``)."""
    static = _node_reason(pod, state)
    if static is not None:
        return [static]
    if pre.ports and _ports_conflict(pre.ports, state.ports):
        return [REASON_PORTS]
    fit = _fit_reasons(pod, request, state)
    if fit:
        return fit
    spread = _spread_reason(pod, pre, state)
    if spread:
        return [spread]
    affinity = _affinity_reason(pod, pre, state, namespaces)
    return [affinity] if affinity else []


def score(nonzero: tuple[int, int], state: _NodeState) -> int:
    """NodeResourcesFit's default LeastAllocated score over cpu and memory (weights 1), on the
    non-zero requests (`nonzero_requests`; ``noderesources/least_allocated.go``); higher is
    better."""
    cpu, memory = nonzero
    total = 0
    for index, (name, want) in enumerate((("cpu", cpu), ("memory", memory))):
        capacity = state.allocatable.get(name, 0)
        used = state.nonzero[index] + want
        total += 0 if capacity == 0 or used > capacity else (capacity - used) * 100 // capacity
    return total // 2


def fit_error(node_count: int, reasons: Mapping[str, Sequence[str]]) -> str:
    """`FitError.Error`: "0/N nodes are available: " and the sorted histogram of reasons."""
    if node_count == 0:
        return NO_NODES
    histogram: dict[str, int] = {}
    for node_reasons in reasons.values():
        for reason in node_reasons:
            histogram[reason] = histogram.get(reason, 0) + 1
    parts = sorted(f"{count} {reason}" for reason, count in histogram.items())
    message = f"0/{node_count} nodes are available:"
    if parts:
        message += f" {', '.join(parts)}."
    return message


# --- a round -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Binding:
    namespace: str
    pod: str
    node: str


@dataclass(frozen=True)
class Verdict:
    """A pod not bound this round: `reason` is Unschedulable (no node fits; `message` is the
    FitError) or SchedulerError (a field the simulated scheduler refuses)."""

    namespace: str
    pod: str
    reason: str
    message: str


@dataclass(frozen=True)
class Round:
    bindings: tuple[Binding, ...] = ()
    unschedulable: tuple[Verdict, ...] = ()
    refused: tuple[Verdict, ...] = ()


def namespace_labels(namespaces: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Namespace name → labels, for namespaceSelector."""
    return {str(n["metadata"]["name"]): {NAMESPACE_NAME_LABEL: str(n["metadata"]["name"]),
                                         **_labels(n)} for n in namespaces}


def schedule_round(pods: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]],
                   namespaces: Iterable[Mapping[str, Any]] = (), *, fast: bool = True) -> Round:
    """Schedule every pending pod of `pods` once, in queue order, onto `nodes` (which already
    hold the bound, not finished pods of `pods`); each binding is seen by the pods after it.

    `fast` (the default) gives the same round in less time at scale: a pod whose filters
    cannot depend on other pods (no topology spread, no pod (anti-)affinity, no host ports,
    and no pod on any node with a required anti-affinity) is placed through `_FastClass`, which
    runs the filters that read only the pod's spec and the Node once per such spec and round,
    and keeps the nodes that fit in score order (`fast=False`: every filter on every node for
    every pod, the reference the tests compare it with)."""
    ns_labels = namespace_labels(namespaces)
    states: list[_NodeState] = []
    for node in sorted(nodes, key=lambda n: str(n["metadata"]["name"])):
        try:
            allocatable = resource_list((node.get("status") or {}).get("allocatable"),
                                        "status.allocatable")
        except Unsupported:
            allocatable = {}
        states.append(_NodeState(node, str(node["metadata"]["name"]), _labels(node),
                                 node_taints(node), allocatable))
    by_name = {s.name: s for s in states}
    for pod in pods:
        bound = str((pod.get("spec") or {}).get("nodeName") or "")
        if bound in by_name and not _is_terminal(pod):
            by_name[bound].add(pod)
    index = {s.name: i for i, s in enumerate(states)}
    versions = [0] * len(states)  # a node's version: bindings onto it this round
    anti = any(s.anti_terms for s in states)
    classes: dict[str, _FastClass] = {}
    bindings: list[Binding] = []
    failed: list[Verdict] = []
    refused: list[Verdict] = []
    for pod in queue_order(p for p in pods if is_pending(p)):
        ns, name = _namespace(pod), str(pod["metadata"]["name"])
        problem = unsupported(pod, ns_labels)
        if problem is not None:
            refused.append(Verdict(ns, name, "SchedulerError",
                                   f"the simulated kube-scheduler does not implement {problem}"))
            continue
        if not states:
            failed.append(Verdict(ns, name, "Unschedulable", NO_NODES))
            continue
        request = pod_requests(pod)
        key = _fast_key(pod, request) if fast and not anti else None
        if key is not None:
            fast_class = classes.get(key)
            if fast_class is None:
                fast_class = classes[key] = _FastClass(pod, request, states, versions)
            chosen_index = fast_class.best(states, versions)
            if chosen_index is None:
                failed.append(Verdict(ns, name, "Unschedulable",
                                      fast_class.message(states, sum(versions))))
                continue
            chosen = states[chosen_index]
        else:
            pre = _prefilter(pod, states, ns_labels)
            reasons: dict[str, list[str]] = {}
            best: tuple[int, str] | None = None
            for state in states:
                why = filter_node(pod, state, pre, request, ns_labels)
                if why:
                    reasons[state.name] = why
                    continue
                points = score(pre.nonzero, state)
                if best is None or points > best[0]:
                    best = (points, state.name)
            if best is None:
                failed.append(Verdict(ns, name, "Unschedulable",
                                      fit_error(len(states), reasons)))
                continue
            chosen = by_name[best[1]]
        bound_pod = {**pod, "spec": {**(pod.get("spec") or {}), "nodeName": chosen.name}}
        chosen.add(bound_pod)
        versions[index[chosen.name]] += 1
        anti = anti or bool(chosen.anti_terms)
        bindings.append(Binding(ns, name, chosen.name))
    return Round(tuple(bindings), tuple(failed), tuple(refused))


def _fast_key(pod: Mapping[str, Any], request: Mapping[str, int]) -> str | None:
    """What the filters of a pod without spread, pod (anti-)affinity or host ports read of it
    (so pods with the same key get the same verdicts from the same nodes), or None: the pod
    has one of those and takes every filter on every node."""
    if _spread_constraints(pod) or _pod_terms(pod, "podAffinity") \
            or _pod_terms(pod, "podAntiAffinity") or host_ports(pod):
        return None
    spec = pod.get("spec") or {}
    return json.dumps([spec.get("nodeName"), spec.get("tolerations"), spec.get("nodeSelector"),
                       (spec.get("affinity") or {}).get("nodeAffinity"),
                       sorted(request.items()), nonzero_requests(pod)],
                      sort_keys=True, default=str)


class _FastClass:
    """The pods of one `_fast_key` in one round. The spec-and-Node filters (`_node_reason`)
    are run once per node; the nodes that pass them and fit the request are kept in a heap by
    (-score, node order) — the slow path's pick: the highest score, the first node in name
    order among equals. Bindings only add to a node, so a node that stopped fitting never fits
    again this round and a node's score only falls: an entry of an older version of its node
    is scored again when it comes to the top (lazily), and the top entry of the current
    version is the best node."""

    def __init__(self, pod: Mapping[str, Any], request: Mapping[str, int],
                 states: Sequence[_NodeState], versions: Sequence[int]) -> None:
        self.pod = pod
        self.request = request
        self.nonzero = nonzero_requests(pod)
        self.static = [_node_reason(pod, state) for state in states]
        self.heap: list[tuple[int, int, int]] = [
            (-score(self.nonzero, state), i, versions[i]) for i, state in enumerate(states)
            if self.static[i] is None and not _fit_reasons(pod, request, state)]
        heapq.heapify(self.heap)
        self.cached: tuple[int, str] | None = None  # (bindings so far, FitError message)

    def best(self, states: Sequence[_NodeState], versions: Sequence[int]) -> int | None:
        """The node the next pod of this class binds to, or None: no node passes."""
        while self.heap:
            _, i, version = self.heap[0]
            if version == versions[i]:
                return i
            heapq.heappop(self.heap)
            if not _fit_reasons(self.pod, self.request, states[i]):
                heapq.heappush(self.heap, (-score(self.nonzero, states[i]), i, versions[i]))
        return None

    def message(self, states: Sequence[_NodeState], bound: int) -> str:
        """The FitError when no node passes: each node's static reason, else its fit reasons
        (remembered until the next binding of the round)."""
        if self.cached is None or self.cached[0] != bound:
            reasons: dict[str, list[str]] = {}
            for i, state in enumerate(states):
                static = self.static[i]
                reasons[state.name] = [static] if static is not None \
                    else _fit_reasons(self.pod, self.request, state)
            self.cached = (bound, fit_error(len(states), reasons))
        return self.cached[1]


def scheduled_condition(pod: Mapping[str, Any], verdict: Verdict, stamp: str) -> list[Obj] | None:
    """The pod's conditions with PodScheduled=False for `verdict` (lastTransitionTime kept when
    the status does not change, as `podutil.UpdatePodCondition`), or None when the pod already
    carries exactly that condition."""
    conditions = list((pod.get("status") or {}).get("conditions") or [])
    old = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
    if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (
            "False", verdict.reason, verdict.message):
        return None
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == "False" \
        else None
    new = {"type": "PodScheduled", "status": "False", "reason": verdict.reason,
           "message": verdict.message, "lastTransitionTime": since or stamp}
    return [c for c in conditions if c.get("type") != "PodScheduled"] + [new]
