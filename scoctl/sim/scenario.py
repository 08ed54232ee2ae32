"""Scenario files for `scoctl sim`: what the simulated region starts with.

A scenario names the Nova side (project, quota, per-AZ host capacity, conductor timing), the
Kubernetes side (existing nodes, resource quotas, Deployments whose pods are pending, with their
pods' labels, annotations, node selector, affinity, tolerations and topology spread, and
scheduler-plugins PodGroups: a gang's ``minMember``, with their CRD installed) and the node
agent (poll interval, NotReady → Ready delay, spot reclaims at a rate, and how Nodes are
named: after their server, or `<server><node_suffix>` as a real cloud's `.novalocal`). The
cloud's flavors, availability zones, image, networks and security groups are not repeated: they
come from a scoctl config (`config: bundled`, a path, or the command's config), so the simulated
cloud offers exactly what the planner plans with.

`load_scenario` reads and validates (errors name the file, line and field: exit 2);
`nova_seed`, `kubernetes_objects` (with `kubernetes_crds`) and `agent_settings` turn a scenario
plus a config into what the emulators and the agent are started with. All are pure.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from scoctl.config.schema import Config
from scoctl.config.yamlsrc import Located, load_located, read_text
from scoctl.core.constraints import WORKLOAD_KEY
from scoctl.core.quantity import (
    CPU,
    MEMORY,
    QuantityError,
    format_cpu,
    parse_cpu,
    parse_memory,
    parse_resources,
)
from scoctl.errors import ConfigError

SCENARIO_NAME = "scenario.yaml"
BUNDLED = "bundled"
MIB = 2**20
RECLAIM_MODES = ("delete", "error")
TIMING_KEYS = ("schedule", "recheck", "active", "delete")
# Stable ids: the same flavor, image or network has the same id in every simulated region.
_NS = uuid.UUID("6f1c1e52-0d4e-4c55-9a57-5c0c7a1f3b10")
UNSCHEDULABLE_MESSAGE = (
    "0/{n} nodes are available: {n} Insufficient cpu, {n} Insufficient memory. preemption: "
    "0/{n} nodes are available: {n} No preemption victims found for incoming pod.")

Path_ = tuple[str | int, ...]


@dataclass(frozen=True)
class NodeSeed:
    """An existing Kubernetes node (not scoctl's)."""

    name: str
    cpu: int  # millicores
    memory: int  # bytes
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: tuple[str, ...] = ()  # "key=value:Effect"


@dataclass(frozen=True)
class QuotaSeed:
    """A namespace ResourceQuota (`hard` as the API writes it)."""

    name: str
    namespace: str
    hard: Mapping[str, str]


@dataclass(frozen=True)
class DeploymentSeed:
    """A Deployment whose `replicas` pods all start pending (PodScheduled=False/Unschedulable)."""

    name: str
    namespace: str
    replicas: int
    requests: Mapping[str, int]  # canonical units per pod
    workload: str | None = None
    managed: bool = False
    tolerate_reclaimable: bool = False
    pdb: Mapping[str, int | str] = field(default_factory=dict)  # maxUnavailable / minAvailable
    # written onto the pod template (and so onto every pod) as the Kubernetes API spells them
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    node_selector: Mapping[str, str] = field(default_factory=dict)
    affinity: Mapping[str, Any] = field(default_factory=dict)
    tolerations: tuple[Mapping[str, Any], ...] = ()
    topology_spread_constraints: tuple[Mapping[str, Any], ...] = ()


@dataclass(frozen=True)
class InferenceServiceSeed:
    """A KServe InferenceService (serving.kserve.io/v1beta1, RawDeployment): the region makes
    its predictor Deployment ``<name>-predictor`` and pods as KServe does."""

    name: str
    namespace: str
    requests: Mapping[str, int]  # canonical units per predictor pod
    replicas: int = 1  # the predictor's minReplicas
    workload: str | None = None
    managed: bool = False
    tolerate_reclaimable: bool = False


@dataclass(frozen=True)
class PodGroupSeed:
    """A scheduler-plugins PodGroup (design: Gangs): the pods labelled
    ``scheduling.x-k8s.io/pod-group: <name>`` in its namespace are a gang of `min_member`."""

    name: str
    namespace: str
    min_member: int | None = None


@dataclass(frozen=True)
class Scenario:
    """A validated scenario."""

    source: str
    config: str | None  # "bundled", a path, or None: the command's config
    project: str = "admin"
    quota: Mapping[str, int] = field(default_factory=dict)  # instances, cores, ram (MiB)
    capacity: Mapping[str, int] | None = None  # per-AZ host: vcpus, ram (MiB); None: unlimited
    az_capacity: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # one AZ's host
    timing: Mapping[str, float] = field(default_factory=dict)
    nodes: tuple[NodeSeed, ...] = ()
    quotas: tuple[QuotaSeed, ...] = ()
    deployments: tuple[DeploymentSeed, ...] = ()
    pod_groups: tuple[PodGroupSeed, ...] = ()  # the PodGroup CRD is installed when any is given
    inference_services: tuple[InferenceServiceSeed, ...] = ()
    poll_interval: float = 0.5
    ready_after: float = 2.0
    reclaim_rate_per_hour: float = 0.0
    reclaim_mode: str = "delete"
    seed: int | None = None
    node_suffix: str = ""  # Nodes are named <server><suffix> (e.g. ".novalocal"), as clouds do
    # design: Drift: images Nova offers beyond the config's (`nova.images`), and those whose
    # servers boot but never register a Node (`agent.unregistered_images`: a bad image)
    images: tuple[str, ...] = ()
    unregistered_images: tuple[str, ...] = ()

    def config_path(self) -> Path | None:
        """The config file named by `config:` (None for `bundled` or when absent)."""
        if self.config in (None, BUNDLED):
            return None
        return Path(str(self.config))


# --- loading -----------------------------------------------------------------------------------


def bundled_scenario_text() -> str:
    """The bundled scenario, shipped inside the package."""
    return resources.files("scoctl.data").joinpath(SCENARIO_NAME).read_text(encoding="utf-8")


def load_scenario(path: Path | None) -> Scenario:
    """Read and validate a scenario file (None: the bundled one). Raises ConfigError."""
    if path is None:
        return parse_scenario(load_located(bundled_scenario_text(), "<bundled scenario.yaml>"),
                              base=None)
    return parse_scenario(load_located(read_text(path, "scenario"), str(path)), base=path.parent)


class _Reader:
    def __init__(self, doc: Located) -> None:
        self.doc = doc

    def fail(self, path: Path_, message: str) -> ConfigError:
        return self.doc.error(path, message)

    def mapping(self, value: Any, path: Path_, allowed: set[str]) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(path, "must be a mapping")
        for key in value:
            if str(key) not in allowed:
                raise self.fail((*path, str(key)), f"unknown field (allowed: "
                                                   f"{', '.join(sorted(allowed))})")
        return {str(k): v for k, v in value.items()}

    def seq(self, value: Any, path: Path_) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(path, "must be a list")
        return value

    def string(self, data: Mapping[str, Any], path: Path_, key: str,
               default: str | None = None) -> str | None:
        value = data.get(key, default)
        if value is None:
            return None
        if not isinstance(value, str) or not value:
            raise self.fail((*path, key), "must be a non-empty string")
        return value

    def name(self, data: Mapping[str, Any], path: Path_, key: str = "name") -> str:
        value = self.string(data, path, key)
        if value is None:
            raise self.fail((*path, key), "is required")
        if len(value) > 63 or not value.replace("-", "").replace(".", "").isalnum() \
                or value != value.lower() or not value[0].isalnum():
            raise self.fail((*path, key), f"{value!r} is not a lowercase DNS name")
        return value

    def number(self, data: Mapping[str, Any], path: Path_, key: str, default: float, *,
               low: float = 0.0) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < low \
                or not math.isfinite(value):
            raise self.fail((*path, key), f"must be a number >= {low:g}")
        return float(value)

    def integer(self, data: Mapping[str, Any], path: Path_, key: str, default: int | None, *,
                low: int = 0) -> int | None:
        value = data.get(key, default)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.fail((*path, key), f"must be an integer >= {low}")
        return value

    def boolean(self, data: Mapping[str, Any], path: Path_, key: str, default: bool) -> bool:
        value = data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail((*path, key), "must be true or false")
        return value

    def duration(self, data: Mapping[str, Any], path: Path_, key: str, default: float) -> float:
        from scoctl.config.schema import parse_duration

        try:
            return parse_duration(data.get(key, default))
        except ValueError as exc:
            raise self.fail((*path, key), str(exc)) from exc

    def quantity(self, value: Any, path: Path_, parse: Any) -> int:
        try:
            return int(parse(value))
        except (QuantityError, ValueError, TypeError) as exc:
            raise self.fail(path, f"not a quantity: {value!r}") from exc


def _taint_text(r: _Reader, value: Any, path: Path_) -> str:
    text = str(value)
    key_value, sep, effect = text.partition(":")
    if not sep or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute") or not key_value:
        raise r.fail(path, f"{text!r} is not a taint (key=value:NoSchedule)")
    return text


def parse_scenario(doc: Located, *, base: Path | None) -> Scenario:
    """Validate a parsed scenario; raises ConfigError naming the file, line and field."""
    r = _Reader(doc)
    root = r.mapping(doc.data, (), {"config", "nova", "kubernetes", "agent"})
    config = r.string(root, (), "config")
    if config not in (None, BUNDLED) and base is not None:
        config = str((base / str(config)).resolve()) if not Path(str(config)).is_absolute() \
            else config

    npath: Path_ = ("nova",)
    nova = r.mapping(root.get("nova"), npath, {"project", "quota", "capacity", "az_capacity",
                                               "timing", "images"})
    project = r.string(nova, npath, "project", "admin") or "admin"
    qpath = (*npath, "quota")
    quota_raw = r.mapping(nova.get("quota"), qpath, {"instances", "cores", "ram"})
    quota = {"instances": r.integer(quota_raw, qpath, "instances", 1000, low=-1) or 0,
             "cores": r.integer(quota_raw, qpath, "cores", 16000, low=-1) or 0,
             "ram": r.quantity(quota_raw.get("ram", "64Ti"), (*qpath, "ram"), parse_memory)
             // MIB}
    capacity: dict[str, int] | None = None
    cap_raw = nova.get("capacity", "unlimited")
    if cap_raw != "unlimited":
        capacity = _host(r, cap_raw, (*npath, "capacity"))
    # design: Gangs: one AZ's host size; a multi-create it cannot take whole is NoValidHost
    azpath = (*npath, "az_capacity")
    az_raw = nova.get("az_capacity") or {}
    az_map = r.mapping(az_raw, azpath,
                       {str(k) for k in az_raw} if isinstance(az_raw, Mapping) else set())
    az_capacity = {str(az): _host(r, cap, (*azpath, str(az))) for az, cap in az_map.items()}
    tpath = (*npath, "timing")
    timing_raw = r.mapping(nova.get("timing"), tpath, set(TIMING_KEYS))
    timing = {k: r.number(timing_raw, tpath, k, 0.0) for k in timing_raw}
    images = _names(r, nova.get("images"), (*npath, "images"))

    kpath: Path_ = ("kubernetes",)
    kube = r.mapping(root.get("kubernetes"), kpath, {"nodes", "quotas", "deployments",
                                                     "pod_groups", "inference_services"})
    nodes = tuple(_node(r, raw, (*kpath, "nodes", i))
                  for i, raw in enumerate(r.seq(kube.get("nodes"), (*kpath, "nodes"))))
    quotas = tuple(_quota(r, raw, (*kpath, "quotas", i))
                   for i, raw in enumerate(r.seq(kube.get("quotas"), (*kpath, "quotas"))))
    deployments = tuple(
        _deployment(r, raw, (*kpath, "deployments", i))
        for i, raw in enumerate(r.seq(kube.get("deployments"), (*kpath, "deployments"))))
    pod_groups = tuple(
        _pod_group(r, raw, (*kpath, "pod_groups", i))
        for i, raw in enumerate(r.seq(kube.get("pod_groups"), (*kpath, "pod_groups"))))
    isvc_path = (*kpath, "inference_services")
    isvcs = tuple(_inference_service(r, raw, (*isvc_path, i))
                  for i, raw in enumerate(r.seq(kube.get("inference_services"), isvc_path)))
    for label, names in (("nodes", [n.name for n in nodes]),
                         ("deployments", [f"{d.namespace}/{d.name}" for d in deployments]),
                         ("inference_services", [f"{i.namespace}/{i.name}" for i in isvcs]),
                         ("pod_groups", [f"{g.namespace}/{g.name}" for g in pod_groups])):
        if len(set(names)) != len(names):
            raise r.fail((*kpath, label), "names must be unique")

    apath: Path_ = ("agent",)
    agent = r.mapping(root.get("agent"), apath, {"poll_interval", "ready_after", "reclaim",
                                                  "seed", "node_suffix",
                                                  "unregistered_images"})
    rpath = (*apath, "reclaim")
    reclaim = r.mapping(agent.get("reclaim"), rpath, {"rate_per_hour", "mode"})
    mode = r.string(reclaim, rpath, "mode", "delete") or "delete"
    if mode not in RECLAIM_MODES:
        raise r.fail((*rpath, "mode"), f"must be one of {', '.join(RECLAIM_MODES)}")
    poll = r.duration(agent, apath, "poll_interval", 0.5)
    if poll <= 0:
        raise r.fail((*apath, "poll_interval"), "must be above 0")
    suffix = r.string(agent, apath, "node_suffix") or ""
    if not re.fullmatch(r"(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*", suffix):
        raise r.fail((*apath, "node_suffix"), "must be DNS labels each after a dot, e.g. "
                     ".novalocal")
    return Scenario(
        source=doc.file, config=config, project=project, quota=quota, capacity=capacity,
        az_capacity=az_capacity,
        timing=timing, nodes=nodes, quotas=quotas, deployments=deployments,
        pod_groups=pod_groups, inference_services=isvcs, poll_interval=poll,
        ready_after=r.duration(agent, apath, "ready_after", 2.0),
        reclaim_rate_per_hour=r.number(reclaim, rpath, "rate_per_hour", 0.0),
        reclaim_mode=mode, seed=r.integer(agent, apath, "seed", None), node_suffix=suffix,
        images=images, unregistered_images=_names(r, agent.get("unregistered_images"),
                                                  (*apath, "unregistered_images")),
    )


def _host(r: _Reader, raw: Any, path: Path_) -> dict[str, int]:
    cap = r.mapping(raw, path, {"vcpus", "ram"})
    return {"vcpus": r.integer(cap, path, "vcpus", 10**6, low=1) or 1,
            "ram": r.quantity(cap.get("ram", "64Ti"), (*path, "ram"), parse_memory) // MIB,
            "disk": 10**7}


def _names(r: _Reader, raw: Any, path: Path_) -> tuple[str, ...]:
    """A list of non-empty names (image names)."""
    out: list[str] = []
    for i, item in enumerate(r.seq(raw, path)):
        if not isinstance(item, str) or not item:
            raise r.fail((*path, i), "must be a non-empty string")
        out.append(item)
    return tuple(out)


def _node(r: _Reader, raw: Any, path: Path_) -> NodeSeed:
    data = r.mapping(raw, path, {"name", "cpu", "memory", "labels", "taints"})
    raw_labels = data.get("labels") or {}
    labels = r.mapping(raw_labels, (*path, "labels"),
                       {str(k) for k in raw_labels} if isinstance(raw_labels, Mapping) else set())
    return NodeSeed(
        name=r.name(data, path),
        cpu=r.quantity(data.get("cpu", 2), (*path, "cpu"), parse_cpu),
        memory=r.quantity(data.get("memory", "8Gi"), (*path, "memory"), parse_memory),
        labels={k: str(v) for k, v in labels.items()},
        taints=tuple(_taint_text(r, t, (*path, "taints", i))
                     for i, t in enumerate(r.seq(data.get("taints"), (*path, "taints")))),
    )


def _quota(r: _Reader, raw: Any, path: Path_) -> QuotaSeed:
    data = r.mapping(raw, path, {"name", "namespace", "hard"})
    hard_raw = data.get("hard")
    if not isinstance(hard_raw, Mapping) or not hard_raw:
        raise r.fail((*path, "hard"), "must be a non-empty mapping")
    hard = {str(k): str(v) for k, v in hard_raw.items()}
    for key, value in hard.items():
        resource = key.removeprefix("requests.").removeprefix("limits.")
        r.quantity(value, (*path, "hard", key),
                   parse_cpu if resource == CPU else parse_memory if resource == MEMORY
                   else lambda v: int(float(v)))
    return QuotaSeed(name=r.name(data, path), namespace=r.name(data, path, "namespace"),
                     hard=hard)


def _pod_group(r: _Reader, raw: Any, path: Path_) -> PodGroupSeed:
    data = r.mapping(raw, path, {"name", "namespace", "min_member"})
    return PodGroupSeed(name=r.name(data, path), namespace=r.name(data, path, "namespace"),
                        min_member=r.integer(data, path, "min_member", None, low=1))


def _requests(r: _Reader, data: Mapping[str, Any], path: Path_) -> dict[str, int]:
    req_path = (*path, "requests")
    req_raw = data.get("requests")
    if not isinstance(req_raw, Mapping) or not req_raw:
        raise r.fail(req_path, "is required (e.g. {cpu: 4, memory: 16Gi})")
    try:
        return dict(parse_resources({str(k): v for k, v in req_raw.items()}))
    except QuantityError as exc:
        raise r.fail(req_path, str(exc)) from exc


def _inference_service(r: _Reader, raw: Any, path: Path_) -> InferenceServiceSeed:
    data = r.mapping(raw, path, {"name", "namespace", "replicas", "requests", "workload",
                                 "managed", "tolerate_reclaimable"})
    return InferenceServiceSeed(
        name=r.name(data, path), namespace=r.name(data, path, "namespace"),
        requests=_requests(r, data, path),
        replicas=r.integer(data, path, "replicas", 1, low=0) or 0,
        workload=r.string(data, path, "workload"),
        managed=r.boolean(data, path, "managed", False),
        tolerate_reclaimable=r.boolean(data, path, "tolerate_reclaimable", False))


def _deployment(r: _Reader, raw: Any, path: Path_) -> DeploymentSeed:
    data = r.mapping(raw, path, {"name", "namespace", "replicas", "requests", "workload",
                                 "managed", "tolerate_reclaimable", "pdb", *POD_FIELDS})
    req_path = (*path, "requests")
    req_raw = data.get("requests")
    if not isinstance(req_raw, Mapping) or not req_raw:
        raise r.fail(req_path, "is required (e.g. {cpu: 4, memory: 16Gi})")
    try:
        requests = parse_resources({str(k): v for k, v in req_raw.items()})
    except QuantityError as exc:
        raise r.fail(req_path, str(exc)) from exc
    workload = r.string(data, path, "workload")
    return DeploymentSeed(
        name=r.name(data, path), namespace=r.name(data, path, "namespace"),
        replicas=r.integer(data, path, "replicas", 1, low=0) or 0,
        requests=requests, workload=workload,
        managed=r.boolean(data, path, "managed", False),
        tolerate_reclaimable=r.boolean(data, path, "tolerate_reclaimable", False),
        pdb=_pdb(r, data.get("pdb"), (*path, "pdb")),
        labels=_pod_labels(r, data.get("labels"), (*path, "labels")),
        annotations=_string_map(r, data.get("annotations"), (*path, "annotations")),
        node_selector=_string_map(r, data.get("node_selector"), (*path, "node_selector")),
        affinity=_api_object(r, data.get("affinity"), (*path, "affinity"),
                             {"nodeAffinity", "podAffinity", "podAntiAffinity"}),
        tolerations=tuple(
            _api_object(r, t, (*path, "tolerations", i),
                        {"key", "operator", "value", "effect", "tolerationSeconds"})
            for i, t in enumerate(r.seq(data.get("tolerations"), (*path, "tolerations")))),
        topology_spread_constraints=tuple(
            _spread(r, c, (*path, "topology_spread_constraints", i))
            for i, c in enumerate(r.seq(data.get("topology_spread_constraints"),
                                        (*path, "topology_spread_constraints")))),
    )


POD_FIELDS = ("labels", "annotations", "node_selector", "affinity", "tolerations",
              "topology_spread_constraints")
SPREAD_FIELDS = {"maxSkew", "topologyKey", "whenUnsatisfiable", "labelSelector", "minDomains",
                 "matchLabelKeys", "nodeAffinityPolicy", "nodeTaintsPolicy"}


def _string_map(r: _Reader, raw: Any, path: Path_) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise r.fail(path, "must be a mapping of strings")
    out = {}
    for key, value in raw.items():
        if isinstance(value, Mapping | list) or value is None:
            raise r.fail((*path, str(key)), "must be a string")
        out[str(key)] = str(value).lower() if isinstance(value, bool) else str(value)
    return out


def _pod_labels(r: _Reader, raw: Any, path: Path_) -> dict[str, str]:
    labels = _string_map(r, raw, path)
    for key in ("app", "pod-template-hash", "sco/workload"):
        if key in labels:
            raise r.fail((*path, key), "is set by the Deployment itself (its selector, its "
                         "ReplicaSet, `workload:`)")
    return labels


def _api_object(r: _Reader, raw: Any, path: Path_, allowed: set[str]) -> dict[str, Any]:
    """A Kubernetes API object given as the API spells it (camelCase), its top-level fields
    checked; what is inside is the scheduler's to judge."""
    data = r.mapping(raw, path, allowed)
    return {k: _plain(v) for k, v in data.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _spread(r: _Reader, raw: Any, path: Path_) -> dict[str, Any]:
    data = _api_object(r, raw, path, SPREAD_FIELDS)
    for key in ("maxSkew", "topologyKey", "whenUnsatisfiable"):
        if key not in data:
            raise r.fail((*path, key), "is required")
    r.integer(data, path, "maxSkew", None, low=1)
    if data["whenUnsatisfiable"] not in ("DoNotSchedule", "ScheduleAnyway"):
        raise r.fail((*path, "whenUnsatisfiable"), "must be DoNotSchedule or ScheduleAnyway")
    return data


def _pdb(r: _Reader, raw: Any, path: Path_) -> dict[str, int | str]:
    """``pdb: {max_unavailable: 1}`` or ``{min_available: 50%}``: a PodDisruptionBudget over
    the Deployment's pods."""
    if raw is None:
        return {}
    data = r.mapping(raw, path, {"max_unavailable", "min_available"})
    if len(data) != 1:
        raise r.fail(path, "give max_unavailable or min_available (one of them)")
    [(key, value)] = data.items()
    text = str(value)
    if isinstance(value, bool) or not (text.isdigit() or (text.endswith("%")
                                                         and text[:-1].isdigit())):
        raise r.fail((*path, key), "must be a count (1) or a percentage (25%)")
    api_key = "maxUnavailable" if key == "max_unavailable" else "minAvailable"
    return {api_key: int(text) if text.isdigit() else text}


# --- what the emulators and the agent start with (pure) ----------------------------------------


def stable_id(kind: str, name: str) -> str:
    """A UUID that depends only on (kind, name)."""
    return str(uuid.uuid5(_NS, f"{kind}/{name}"))


def availability_zones(config: Config) -> list[str]:
    """The AZs the config's pools live in (sorted)."""
    return sorted({p.az for p in config.pools}) or ["nova"]


def nova_seed(scenario: Scenario, config: Config) -> dict[str, Any]:
    """The Nova emulator's seed: the config's flavors, AZs, images and networks, the quota."""
    flavors = [
        {"id": stable_id("flavor", f.name), "name": f.name, "vcpus": f.vcpus,
         "ram": f.ram // MIB, "disk": 40,
         "extra_specs": {f"resources:{k}": str(v) for k, v in sorted(f.accelerators.items())
                         if v}}
        for f in config.flavors.values()
    ]
    launches = [config.launch_settings(r) for r in config.regions]
    images = sorted({launch.image for launch in launches} | set(scenario.images))
    networks = sorted({n for launch in launches for n in launch.networks})
    groups = sorted({g for launch in launches for g in launch.security_groups} | {"default"})
    keys = sorted({launch.key_name for launch in launches if launch.key_name})
    seed: dict[str, Any] = {
        "flavors": flavors,
        "availability_zones": availability_zones(config),
        "images": [{"id": stable_id("image", n), "name": n} for n in images],
        "networks": [{"id": stable_id("network", n), "name": n} for n in networks],
        "security_groups": groups,
        "keypairs": keys,
        "quota": dict(scenario.quota),
        "capacity": None if scenario.capacity is None else dict(scenario.capacity),
        "az_capacity": {az: dict(cap) for az, cap in scenario.az_capacity.items()},
    }
    if scenario.timing:
        seed["timing"] = dict(scenario.timing)
    return seed


def _quantity_text(name: str, amount: int) -> str:
    if name == CPU:
        return format_cpu(amount)
    if name == MEMORY:
        for suffix, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if amount % size == 0:
                return f"{amount // size}{suffix}"
        return str(amount)
    return str(amount)


def resource_strings(values: Mapping[str, int]) -> dict[str, str]:
    """Canonical resources as the Kubernetes API writes quantities."""
    return {k: _quantity_text(k, v) for k, v in sorted(values.items()) if v}


def node_shapes(config: Config) -> dict[str, dict[str, dict[str, str]]]:
    """Per flavor name: the Node `capacity` and `allocatable` an instance of it registers with."""
    return {
        name: {"capacity": resource_strings(f.capacity),
               "allocatable": resource_strings(f.allocatable or f.capacity)}
        for name, f in config.flavors.items()
    }


def kubernetes_objects(scenario: Scenario, stamp: str,
                       shared: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """The Kubernetes emulator's seed, in creation order (owners before what they own);
    `stamp` (RFC 3339) dates the status conditions. `shared`: the workloads whose units
    carry no workload taint (`isolation: shared`): their pods get neither the toleration nor
    the node selector the platform gives an exclusive workload's (`isolation_of`)."""
    from scoctl.sim import k8s_emulator as k8s

    objects: list[dict[str, Any]] = []
    namespaces = sorted({q.namespace for q in scenario.quotas}
                        | {d.namespace for d in scenario.deployments}
                        | {g.namespace for g in scenario.pod_groups}
                        | {i.namespace for i in scenario.inference_services})
    objects += [k8s.make_namespace(ns) for ns in namespaces]
    for node in scenario.nodes:
        obj = k8s.make_node(node.name, cpu=format_cpu(node.cpu),
                            memory=_quantity_text(MEMORY, node.memory),
                            labels=dict(node.labels),
                            taints=[_taint_obj(t) for t in node.taints])
        objects.append(obj)
    node_count = max(1, len(scenario.nodes))
    pending_by_ns: dict[str, list[Mapping[str, int]]] = {}
    for dep in scenario.deployments:
        objects += _deployment_objects(dep, node_count, stamp, shared)
        pending_by_ns.setdefault(dep.namespace, []).extend([dep.requests] * dep.replicas)
    for quota in scenario.quotas:
        used = _quota_used(quota.hard, pending_by_ns.get(quota.namespace, []))
        objects.append(k8s.make_resource_quota(quota.name, quota.namespace, quota.hard, used))
    objects += [k8s.make_pod_group(g.name, g.namespace, min_member=g.min_member)
                for g in scenario.pod_groups]
    objects += [_inference_service_object(i, shared) for i in scenario.inference_services]
    return objects


def _inference_service_object(seed: InferenceServiceSeed,
                              shared: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The InferenceService as a user applies it; its predictor is the region's to make. A
    managed one of an exclusive workload carries the workload's toleration and node selector
    on its predictor, as the platform puts them on a managed Deployment's pods."""
    labels = {**({"sco/workload": seed.workload} if seed.workload else {}),
              **({"sco/managed": "true"} if seed.managed else {})}
    requests = resource_strings(seed.requests)
    # extended resources (GPUs) need a limit equal to the request (core validation)
    limits = {k: v for k, v in requests.items() if k not in (CPU, MEMORY)}
    predictor: dict[str, Any] = {"minReplicas": seed.replicas, "model": {
        "modelFormat": {"name": "huggingface"}, "storageUri": f"pvc://models/{seed.name}",
        "resources": {"requests": requests, **({"limits": limits} if limits else {})}}}
    tolerations: list[dict[str, str]] = []
    if seed.workload and seed.managed and seed.workload not in shared:
        tolerations.append({"key": WORKLOAD_KEY, "operator": "Equal", "value": seed.workload,
                            "effect": "NoSchedule"})
        predictor["nodeSelector"] = {WORKLOAD_KEY: seed.workload}
    if seed.tolerate_reclaimable:
        tolerations.append({"key": "reclaimable", "operator": "Equal", "value": "true",
                            "effect": "NoSchedule"})
    if tolerations:
        predictor["tolerations"] = tolerations
    return {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": seed.name, "namespace": seed.namespace, "labels": labels,
                         "annotations": {"serving.kserve.io/deploymentMode": "RawDeployment"},
                         "uid": stable_id("inferenceservice", f"{seed.namespace}/{seed.name}")},
            "spec": {"predictor": predictor}, "status": {}}


def kubernetes_crds(scenario: Scenario) -> list[str]:
    """The CustomResourceDefinitions the Kubernetes emulator installs beyond its defaults: the
    PodGroup CRD when the scenario has PodGroups (a cluster without it serves none)."""
    from scoctl.sim import k8s_emulator as k8s

    return [k8s.PODGROUP_CRD] if scenario.pod_groups else []


def _taint_obj(text: str) -> dict[str, str]:
    key_value, _, effect = text.partition(":")
    key, _, value = key_value.partition("=")
    out = {"key": key, "effect": effect}
    if value:
        out["value"] = value
    return out


def _quota_used(hard: Mapping[str, str], pods: Sequence[Mapping[str, int]]) -> dict[str, str]:
    used: dict[str, str] = {}
    for key in hard:
        if key == "pods":
            used[key] = str(len(pods))
            continue
        resource = key.removeprefix("requests.")
        if key.startswith("limits."):
            used[key] = "0"
            continue
        used[key] = _quantity_text(resource, sum(p.get(resource, 0) for p in pods))
    return used


def isolation_of(dep: DeploymentSeed, shared: frozenset[str] = frozenset()
                 ) -> tuple[list[dict[str, str]], dict[str, str]]:
    """The toleration and node selector the platform puts on the pods of a managed Deployment
    of an exclusive workload, as it puts the reclaimable toleration (none for another
    tenant's Deployment, one not `managed`, or a shared workload's)."""
    if not dep.workload or not dep.managed or dep.workload in shared:
        return [], {}
    return ([{"key": WORKLOAD_KEY, "operator": "Equal", "value": dep.workload,
              "effect": "NoSchedule"}], {WORKLOAD_KEY: dep.workload})


def _deployment_objects(dep: DeploymentSeed, node_count: int, stamp: str,
                        shared: frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    from scoctl.sim import k8s_emulator as k8s

    pod_labels = {**dep.labels, **({"sco/workload": dep.workload} if dep.workload else {})}
    own, selector = isolation_of(dep, shared)
    tolerations = [dict(t) for t in dep.tolerations] + own
    if dep.tolerate_reclaimable:
        tolerations.append({"key": "reclaimable", "operator": "Equal", "value": "true",
                            "effect": "NoSchedule"})
    deployment = k8s.make_deployment(
        dep.name, dep.namespace, replicas=dep.replicas, pod_labels=pod_labels,
        managed=dep.managed, pod_annotations=dep.annotations, tolerations=tolerations,
        node_selector={**selector, **dep.node_selector}, affinity=dep.affinity,
        topology_spread_constraints=dep.topology_spread_constraints)
    spec = deployment["spec"]["template"]["spec"]
    spec["containers"][0]["resources"] = {"requests": resource_strings(dep.requests)}
    deployment["metadata"]["uid"] = stable_id("deployment", f"{dep.namespace}/{dep.name}")
    replicaset = k8s.make_replicaset(deployment)
    replicaset["metadata"]["uid"] = stable_id("replicaset", f"{dep.namespace}/{dep.name}")
    message = UNSCHEDULABLE_MESSAGE.format(n=node_count)
    pods = k8s.pods_for(replicaset, dep.replicas, unschedulable=message)
    for pod in pods:
        pod["metadata"]["uid"] = stable_id("pod", f"{dep.namespace}/{pod['metadata']['name']}")
    from scoctl.sim.agent import deployment_status, replicaset_status

    deployment["status"] = deployment_status(deployment, pods, previous={}, stamp=stamp)
    replicaset["status"] = replicaset_status(replicaset, pods)
    budget = []
    if dep.pdb:
        budget = [k8s.make_pdb(dep.name, dep.namespace,
                               match_labels=deployment["spec"]["selector"]["matchLabels"],
                               max_unavailable=dep.pdb.get("maxUnavailable"),
                               min_available=dep.pdb.get("minAvailable"))]
    return [deployment, replicaset, *pods, *budget]


# the simulated region's node-monitor grace period and PodGC quarantine (upstream: 40 s each)
SIM_NODE_MONITOR_GRACE_S = 4.0
SIM_PODGC_QUARANTINE_S = 2.0


def agent_settings(scenario: Scenario, config: Config, *, k8s_url: str, nova_url: str,
                   k8s_token: str) -> dict[str, Any]:
    """The node agent's settings file."""
    return {
        "k8s_url": k8s_url,
        "k8s_token": k8s_token,
        "nova_url": nova_url,
        "nova_token": f"admin:{scenario.project}",
        "poll_interval": scenario.poll_interval,
        "ready_after": scenario.ready_after,
        "reclaim_rate_per_hour": scenario.reclaim_rate_per_hour,
        "reclaim_mode": scenario.reclaim_mode,
        "seed": scenario.seed,
        "node_suffix": scenario.node_suffix,
        "unregistered_images": [stable_id("image", n) for n in scenario.unregistered_images],
        "flavors": node_shapes(config),
        # upstream's 40 s each, scaled as the region scales grace periods
        "node_monitor_grace": SIM_NODE_MONITOR_GRACE_S,
        "podgc_quarantine": SIM_PODGC_QUARANTINE_S,
    }
