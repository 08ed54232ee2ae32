"""The scoctl config file (DESIGN §12): load, validate with file/line/field errors, summarise.

Relative paths in the config (state, spool, bootstrap files, metrics) are relative to the
current working directory, as the example config's ``configs/user-data.yaml`` shows.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal

from scoctl.config.yamlsrc import Located, load_located
from scoctl.core.model import (
    KINDS,
    OLDEST_REST_API,
    SOURCES,
    TIERS,
    Contract,
    Flavor,
    Pool,
    Source,
    flavor_allocatable,
    is_slug,
    rest_api_version,
)
from scoctl.core.quantity import (
    QuantityError,
    parse_count,
    parse_memory,
    parse_resources,
)
from scoctl.core.retention import EVENTS_FLOOR
from scoctl.errors import ConfigError, UsageError

DEFAULT_CONFIG = Path("/etc/scoctl/config.yaml")
DEMO_CONFIG_NAME = "demo.yaml"
Path_ = tuple[str | int, ...]
MAX_RETENTION = 36500 * 86400.0  # a hundred years: further back than any cutoff can reach

_CA_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}


def parse_duration(value: object) -> float:
    """``"90s"``, ``"5m"``, ``"1h"``, ``250ms`` or a number of seconds, to seconds."""
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError(f"negative duration: {value!r}")
        return float(value)
    match = _DURATION.match(str(value))
    if not match:
        raise ValueError(f"not a duration: {value!r} (use e.g. 30s, 5m, 1h)")
    return float(match.group(1)) * _DURATION_UNITS[match.group(2)]


@dataclass(frozen=True)
class LaunchSettings:
    image: str
    networks: tuple[str, ...] = ()
    security_groups: tuple[str, ...] = ()
    key_name: str | None = None
    server_group: str | None = None


@dataclass(frozen=True)
class Region:
    name: str
    cloud: str
    mutating_calls_per_second: int
    launch: LaunchSettings | None  # None: a what-if config (gate, watch, plan only)
    clouds_yaml: Path | None = None  # else openstacksdk's search (OS_CLIENT_CONFIG_FILE, ...)


@dataclass(frozen=True)
class RankingSource:
    id: str | None = None
    scores: Mapping[str, float] | None = None
    file: Path | None = None
    url: str | None = None
    max_age: float = 3600.0


@dataclass(frozen=True)
class WorkloadSpec:
    name: str
    contract: str
    source: str
    kind: str = "deployment"
    namespace: str | None = None
    account: str | None = None  # Slurm: jobs of this account are this workload's demand
    partition: str | None = None  # Slurm: jobs in this partition are this workload's demand
    tolerates_reclaimable: bool = True


@dataclass(frozen=True)
class KubernetesSettings:
    kubeconfig: Path | None = None
    context: str | None = None
    workload_label: str = "sco/workload"
    contract_label: str = "sco/contract"
    gpu_resource: str = "nvidia.com/gpu"
    namespaces: tuple[str, ...] = ()


@dataclass(frozen=True)
class SlurmSettings:
    rest_url: str | None = None
    rest_user: str = "root"
    rest_token_file: Path | None = None
    rest_api_version: str | None = None  # e.g. v0.0.40; None: the newest slurmrestd offers
    gpu_partition: str = "ml"
    default_partition: str | None = None
    gres_map: Mapping[str, str] = field(default_factory=lambda: {"gpu": "nvidia.com/gpu"})
    sinfo: str = "sinfo"
    squeue: str = "squeue"
    scontrol: str = "scontrol"
    sbatch: str = "sbatch"
    sacct: str = "sacct"
    timeout: float = 10.0
    cloud_partitions: tuple[str, ...] = ()


@dataclass(frozen=True)
class Bootstrap:
    join_secret_file: Path | None = None  # static fallback; never logged or stored
    user_data_template: Path | None = None
    api_endpoint: str | None = None  # the Kubernetes API nodes join (host:port)
    ca_cert_hash: str | None = None  # sha256:<hex> of the cluster CA (kubeadm discovery)
    join_tokens: bool = True  # a short-lived bootstrap token per Kubernetes launch


@dataclass(frozen=True)
class Timeouts:
    """The `timeouts` section in seconds; these defaults are the only ones (the reconciler's
    `Policy` and the parser take them from here)."""

    launch: float = 300.0
    registration: float = 900.0
    idle: float = 600.0
    negative_cache: float = 180.0
    orphan_grace: float = 1800.0
    lock_wait: float = 0.0
    # an in-flight launch intent no server carries the tag of this long after its call ended
    # (or, after a crash before the call, after it was written) is failed and relaunched
    launch_settle: float = 30.0
    drain_margin: float = 15.0  # before a reclaim deadline: evictions give way to deletions


@dataclass(frozen=True)
class Retention:
    """The `retention` section in seconds: how long the state keeps events, ended instances
    and settled launches (`core.retention`); these defaults are the only ones."""

    events: float = 30 * 86400.0
    instances: float = 7 * 86400.0
    launches: float = 7 * 86400.0


@dataclass(frozen=True)
class Intake:
    batch_idle: float = 1.0
    batch_max: float = 5.0


@dataclass(frozen=True)
class HostHints:
    """What the host offers beyond the config (`scoctl.host.discovery.host_hints` reads it):
    a kubeconfig ($KUBECONFIG, ~/.kube/config) or an in-cluster service account, and a Slurm
    client (``squeue`` on the PATH and a slurm.conf)."""

    kubeconfig: bool = False
    slurm_client: bool = False


@dataclass(frozen=True)
class Config:
    """A validated config. `path` is where it came from (None for the bundled demo)."""

    path: Path | None
    state: Path
    regions: tuple[Region, ...]
    flavors: Mapping[str, Flavor]
    pools: tuple[Pool, ...]
    contracts: Mapping[str, Contract]
    ranking: RankingSource
    workloads: tuple[WorkloadSpec, ...]
    depth_premium: float = 0.05
    node_reserve: Mapping[str, int] = field(default_factory=dict)
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    bootstrap: Bootstrap = field(default_factory=Bootstrap)
    spool: Path = Path("/var/spool/scoctl")
    budget_dir: Path = Path("/run/scoctl")
    metrics_file: Path | None = None
    timeouts: Timeouts = field(default_factory=Timeouts)
    retention: Retention = field(default_factory=Retention)
    intake: Intake = field(default_factory=Intake)
    quota_block: Literal["fail", "queue"] = "fail"
    gc_orphans: bool = False
    disruption_budget: float = 0.10
    elastic: bool = True

    @property
    def source_name(self) -> str:
        return str(self.path) if self.path else "bundled demo config"

    def region(self, name: str) -> Region:
        """The region `name` (a `--region` option); UsageError (exit 2) naming it if unknown."""
        for region in self.regions:
            if region.name == name:
                return region
        known = ", ".join(r.name for r in self.regions)
        raise UsageError(f"--region {name}: no such region in {self.source_name} "
                         f"(regions: {known})")

    def launch_settings(self, region: Region) -> LaunchSettings:
        """`region`'s launch settings; ConfigError (exit 2) naming ``regions[i].launch`` when
        the config has none (gate, watch and plan run without them, acquire cannot)."""
        if region.launch is not None:
            return region.launch
        index = self.regions.index(region)
        raise ConfigError("is required to launch instances (scoctl acquire): image, networks, "
                          "security_groups, ...", file=self.source_name,
                          field=f"regions[{index}].launch")

    def workload(self, name: str) -> WorkloadSpec | None:
        for spec in self.workloads:
            if spec.name == name:
                return spec
        return None

    def sources(self, host: HostHints | None = None) -> tuple[Source, ...]:
        """The demand sources in use — the one rule that watch ``--source all``, reconcile,
        run and acquire all ask.

        Kubernetes: `kubernetes.kubeconfig` or `kubernetes.context` is set, or the `host` has
        a kubeconfig or an in-cluster service account — a cluster scoctl can reach (pods
        labelled with the workload label are demand even when not in `workloads`, and a
        Kubernetes workload alone does not say where the cluster is). Slurm: a workload comes
        from it, `slurm.rest_url` or `slurm.cloud_partitions` is set, or the `host` is a Slurm
        client. Without `host`, the config alone decides.
        """
        hints = host or HostHints()
        out: list[Source] = []
        if self.kubernetes.kubeconfig or self.kubernetes.context or hints.kubeconfig:
            out.append("k8s")
        if (any(w.source == "slurm" for w in self.workloads) or self.slurm.rest_url
                or self.slurm.cloud_partitions or hints.slurm_client):
            out.append("slurm")
        return tuple(out)

    @property
    def slurm_gpu_resource(self) -> str:
        """The resource name Slurm GPUs count as: what `slurm.gres_map` maps ``gpu`` to, else
        the cluster-wide `kubernetes.gpu_resource` (so claims compare with flavor accelerators)."""
        return self.slurm.gres_map.get("gpu", self.kubernetes.gpu_resource)

    @property
    def uses_slurm(self) -> bool:
        """The config alone makes Slurm a demand source (see `sources`)."""
        return "slurm" in self.sources()

    @property
    def uses_kubernetes(self) -> bool:
        """The config alone makes Kubernetes a demand source (see `sources`)."""
        return "k8s" in self.sources()


TOP_LEVEL = frozenset({
    "state", "regions", "flavors", "node_reserve", "pools", "contracts", "planner", "ranking",
    "workloads", "kubernetes", "slurm", "bootstrap", "spool", "budget_dir", "metrics", "timeouts",
    "intake", "quota_block", "gc_orphans", "disruption_budget", "elastic", "retention",
})

# Every field the config accepts, by section: "[]" is each item of a list, "*" each value of a
# mapping whose keys are names (contracts by tier). The parser rejects any other key, and
# configs/example.yaml documents every one of them (a test walks this table).
FIELDS: Mapping[tuple[str, ...], frozenset[str]] = {
    (): TOP_LEVEL,
    ("regions", "[]"): frozenset({"name", "cloud", "clouds_yaml", "mutating_calls_per_second",
                                  "launch"}),
    ("regions", "[]", "launch"): frozenset({"image", "networks", "security_groups", "key_name",
                                            "server_group"}),
    ("flavors", "[]"): frozenset({"name", "vcpus", "ram", "accelerators", "allocatable"}),
    ("pools", "[]"): frozenset({"name", "region", "az", "flavor", "group", "tier", "depth"}),
    ("contracts", "*"): frozenset({"floor", "pool_cap", "group_cap", "min_pools", "strict"}),
    ("planner",): frozenset({"depth_premium"}),
    ("ranking",): frozenset({"id", "scores", "file", "url", "max_age"}),
    ("workloads", "[]"): frozenset({"name", "contract", "source", "kind", "namespace", "account",
                                    "partition", "tolerates_reclaimable"}),
    ("kubernetes",): frozenset({"kubeconfig", "context", "workload_label", "contract_label",
                                "gpu_resource", "namespaces"}),
    ("slurm",): frozenset({"rest_url", "rest_user", "rest_token_file", "rest_api_version",
                           "gpu_partition",
                           "default_partition", "gres_map", "sinfo", "squeue", "scontrol",
                           "sbatch", "sacct", "timeout", "cloud_partitions"}),
    ("bootstrap",): frozenset({"join_secret_file", "user_data_template", "api_endpoint",
                               "ca_cert_hash", "join_tokens"}),
    ("timeouts",): frozenset({"launch", "registration", "idle", "negative_cache",
                              "orphan_grace", "lock_wait", "launch_settle",
                              "drain_margin"}),
    ("retention",): frozenset({"events", "instances", "launches"}),
    ("intake",): frozenset({"batch_idle", "batch_max"}),
    ("metrics",): frozenset({"textfile"}),
}


class _Reader:
    """Typed access to a Located document with errors that name the line and field."""

    def __init__(self, doc: Located) -> None:
        self.doc = doc

    def fail(self, path: Path_, message: str) -> ConfigError:
        return self.doc.error(path, message)

    def get(self, data: Mapping[str, Any], path: Path_, key: str, default: Any = None) -> Any:
        return data.get(key, default) if isinstance(data, Mapping) else default

    def mapping(self, value: Any, path: Path_, *,
                allowed: frozenset[str] | None = None) -> dict[str, Any]:
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise self.fail(path, f"must be a mapping, not {type(value).__name__}")
        if allowed is not None:
            for key in value:
                if key not in allowed:
                    raise self.fail(
                        (*path, str(key)),
                        f"unknown field (expected one of: {', '.join(sorted(allowed))})",
                    )
        return dict(value)

    def seq(self, value: Any, path: Path_) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(path, f"must be a list, not {type(value).__name__}")
        return value

    def string(self, data: Mapping[str, Any], path: Path_, key: str, *,
               required: bool = False, default: str | None = None) -> str | None:
        value = data.get(key)
        if value is None:
            if required:
                raise self.fail((*path, key), "is required")
            return default
        if not isinstance(value, str | int | float) or isinstance(value, bool) or value == "":
            raise self.fail((*path, key), "must be a non-empty string")
        return str(value)

    def req_string(self, data: Mapping[str, Any], path: Path_, key: str) -> str:
        value = self.string(data, path, key, required=True)
        assert value is not None
        return value

    def number(self, data: Mapping[str, Any], path: Path_, key: str, default: float, *,
               low: float | None = None, high: float | None = None) -> float:
        value = data.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail((*path, key), f"must be a number, not {value!r}")
        if (low is not None and value < low) or (high is not None and value > high):
            raise self.fail((*path, key), f"must be between {low} and {high}, not {value!r}")
        return float(value)

    def integer(self, data: Mapping[str, Any], path: Path_, key: str, default: int | None, *,
                low: int = 0) -> int:
        value = data.get(key, default)
        if value is None:
            raise self.fail((*path, key), "is required")
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise self.fail((*path, key), f"must be a whole number ≥ {low}, not {value!r}")
        return value

    def boolean(self, data: Mapping[str, Any], path: Path_, key: str, default: bool) -> bool:
        value = data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail((*path, key), f"must be true or false, not {value!r}")
        return value

    def duration(self, data: Mapping[str, Any], path: Path_, key: str, default: float) -> float:
        value = data.get(key, default)
        try:
            return parse_duration(value)
        except ValueError as exc:
            raise self.fail((*path, key), str(exc)) from exc

    def quantity(self, value: Any, path: Path_, parse: Callable[[object], int]) -> int:
        try:
            return parse(value)
        except QuantityError as exc:
            raise self.fail(path, str(exc)) from exc

    def resources(self, value: Any, path: Path_) -> dict[str, int]:
        mapping = self.mapping(value, path)
        try:
            return parse_resources(mapping)
        except QuantityError as exc:
            bad = next((k for k in mapping if _bad_quantity(k, mapping[k])), None)
            raise self.fail((*path, str(bad)) if bad else path, str(exc)) from exc

    def path_value(self, data: Mapping[str, Any], path: Path_, key: str) -> Path | None:
        value = self.string(data, path, key)
        return Path(os.path.expanduser(value)) if value else None


def _rest_api(r: _Reader, data: Mapping[str, Any], path: Path_) -> str | None:
    """`slurm.rest_api_version`: a data-parser version scoctl reads (v0.0.38 or later)."""
    text = r.string(data, path, "rest_api_version")
    if text is None:
        return None
    version = rest_api_version(text)
    if version is None or version < OLDEST_REST_API:
        raise r.fail((*path, "rest_api_version"),
                     f"{text!r}: give a slurmrestd data-parser version v0.0.38 or later "
                     "(e.g. v0.0.40), or leave it out to use the newest the server offers")
    return text.strip()


def _ca_cert_hash(r: _Reader, data: Mapping[str, Any]) -> str | None:
    """`bootstrap.ca_cert_hash`: what ``kubeadm token create --print-join-command`` prints."""
    text = r.string(data, ("bootstrap",), "ca_cert_hash")
    if text is not None and not _CA_HASH.match(text):
        raise r.fail(("bootstrap", "ca_cert_hash"),
                     f"{text!r}: give sha256:<64 hex digits> (kubeadm's discovery hash)")
    return text


def _bad_quantity(name: str, value: object) -> bool:
    try:
        parse_resources({name: value})
    except QuantityError:
        return True
    return False


def _region(r: _Reader, raw: Any, path: Path_) -> Region:
    data = r.mapping(raw, path, allowed=FIELDS[("regions", "[]")])
    name = r.req_string(data, path, "name")
    calls = r.integer(data, path, "mutating_calls_per_second", 10, low=1)
    return Region(
        name=name,
        cloud=r.string(data, path, "cloud", default=name) or name,
        mutating_calls_per_second=calls,
        launch=_launch(r, data.get("launch"), (*path, "launch")),
        clouds_yaml=r.path_value(data, path, "clouds_yaml"),
    )


def _launch(r: _Reader, raw: Any, path: Path_) -> LaunchSettings | None:
    """A region's launch settings; absent is fine until something launches (`launch_settings`)."""
    if raw is None:
        return None
    launch = r.mapping(raw, path, allowed=FIELDS[("regions", "[]", "launch")])
    if not launch:
        raise r.fail(path, "is empty: give at least the image (or leave launch out)")
    networks = tuple(str(n) for n in r.seq(launch.get("networks"), (*path, "networks")))
    groups = tuple(str(g) for g in r.seq(launch.get("security_groups"),
                                         (*path, "security_groups")))
    return LaunchSettings(
        image=r.req_string(launch, path, "image"),
        networks=networks,
        security_groups=groups,
        key_name=r.string(launch, path, "key_name"),
        server_group=r.string(launch, path, "server_group"),
    )


def _flavor(r: _Reader, raw: Any, path: Path_, reserve: Mapping[str, int]) -> Flavor:
    data = r.mapping(raw, path, allowed=FIELDS[("flavors", "[]")])
    name = r.req_string(data, path, "name")
    vcpus = r.integer(data, path, "vcpus", None, low=1)
    if "ram" not in data:
        raise r.fail((*path, "ram"), "is required (e.g. 64Gi)")
    ram = r.quantity(data["ram"], (*path, "ram"), parse_memory)
    accelerators = {}
    acc_path = (*path, "accelerators")
    for key, value in r.mapping(data.get("accelerators"), acc_path).items():
        accelerators[str(key)] = r.quantity(value, (*acc_path, str(key)), parse_count)
    bare = Flavor(name=name, vcpus=vcpus, ram=ram, accelerators=accelerators)
    if "allocatable" not in data:
        return replace(bare, allocatable=flavor_allocatable(bare, reserve))
    allocatable = r.resources(data["allocatable"], (*path, "allocatable"))
    for res, amount in allocatable.items():
        if amount > bare.capacity.get(res, 0):
            raise r.fail((*path, "allocatable", res), "is larger than the flavor's capacity")
    return replace(bare, allocatable=allocatable)


def _contract(r: _Reader, name: str, raw: Any, path: Path_) -> Contract:
    data = r.mapping(raw, path, allowed=FIELDS[("contracts", "*")])
    return Contract(
        name=name,
        floor=r.number(data, path, "floor", 0.30, low=0, high=1),
        pool_cap=r.number(data, path, "pool_cap", 0.15, low=0.0001, high=1),
        group_cap=r.number(data, path, "group_cap", 0.30, low=0.0001, high=1),
        min_pools=r.integer(data, path, "min_pools", 8, low=1),
        strict=r.boolean(data, path, "strict", False),
    )


def _ranking(r: _Reader, raw: Any, path: Path_) -> RankingSource:
    data = r.mapping(raw, path, allowed=FIELDS[("ranking",)])
    sources = [k for k in ("scores", "file", "url") if data.get(k) is not None]
    if len(sources) != 1:
        raise r.fail(path, "give exactly one of scores, file or url")
    scores = None
    if data.get("scores") is not None:
        scores = {}
        for key, value in r.mapping(data["scores"], (*path, "scores")).items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise r.fail((*path, "scores", str(key)), f"must be a number, not {value!r}")
            scores[str(key)] = float(value)
        if not data.get("id"):
            raise r.fail((*path, "id"), "is required with inline scores")
    url = r.string(data, path, "url")
    if url and not url.startswith(("http://", "https://")):
        raise r.fail((*path, "url"), "must be an http:// or https:// URL")
    return RankingSource(
        id=r.string(data, path, "id"),
        scores=scores,
        file=r.path_value(data, path, "file"),
        url=url,
        max_age=r.duration(data, path, "max_age", 3600.0),
    )


def _workload(r: _Reader, raw: Any, path: Path_, contracts: Mapping[str, Contract]) -> WorkloadSpec:
    data = r.mapping(raw, path, allowed=FIELDS[("workloads", "[]")])
    name = r.req_string(data, path, "name")
    if not is_slug(name):
        raise r.fail((*path, "name"), f"{name!r} is not a slug ([a-z0-9][a-z0-9.-]{{0,46}})")
    contract = r.string(data, path, "contract", default="T1") or "T1"
    if contract not in contracts:
        raise r.fail((*path, "contract"), f"unknown contract {contract!r}")
    source = r.string(data, path, "source", default="k8s") or "k8s"
    if source not in SOURCES:
        raise r.fail((*path, "source"), f"must be one of {', '.join(SOURCES)}")
    default_kind = "job" if source == "slurm" else "deployment"
    kind = r.string(data, path, "kind", default=default_kind) or default_kind
    if kind not in KINDS:
        raise r.fail((*path, "kind"), f"must be one of {', '.join(KINDS)}")
    return WorkloadSpec(
        name=name, contract=contract, source=source, kind=kind,
        namespace=r.string(data, path, "namespace"),
        account=r.string(data, path, "account"),
        partition=r.string(data, path, "partition"),
        tolerates_reclaimable=r.boolean(data, path, "tolerates_reclaimable", True),
    )


def parse_config(doc: Located, *, path: Path | None) -> Config:
    """Validate a parsed document into a Config; raises ConfigError naming file, line and field."""
    r = _Reader(doc)
    root = r.mapping(doc.data, (), allowed=TOP_LEVEL)
    if not root:
        raise r.fail((), "the config is empty")

    reserve_path: Path_ = ("node_reserve",)
    reserve = r.resources(root.get("node_reserve"), reserve_path)

    regions = tuple(_region(r, raw, ("regions", i))
                    for i, raw in enumerate(r.seq(root.get("regions"), ("regions",))))
    if not regions:
        raise r.fail(("regions",), "at least one region is required")
    _unique(r, [x.name for x in regions], "regions")

    flavor_list = [_flavor(r, raw, ("flavors", i), reserve)
                   for i, raw in enumerate(r.seq(root.get("flavors"), ("flavors",)))]
    _unique(r, [f.name for f in flavor_list], "flavors")
    flavors = {f.name: f for f in flavor_list}

    contracts_raw = r.mapping(root.get("contracts"), ("contracts",))
    contracts = {str(name): _contract(r, str(name), raw, ("contracts", str(name)))
                 for name, raw in contracts_raw.items()}
    if not contracts:
        contracts = {"T1": Contract(name="T1")}

    region_names = {x.name for x in regions}
    pools = []
    for i, raw in enumerate(r.seq(root.get("pools"), ("pools",))):
        p = ("pools", i)
        data = r.mapping(raw, p, allowed=FIELDS[("pools", "[]")])
        region = r.string(data, p, "region", default=regions[0].name) or regions[0].name
        if region not in region_names:
            raise r.fail((*p, "region"), f"unknown region {region!r}")
        flavor = r.req_string(data, p, "flavor")
        if flavor not in flavors:
            raise r.fail((*p, "flavor"), f"unknown flavor {flavor!r}")
        tier = r.req_string(data, p, "tier")
        if tier not in TIERS:
            raise r.fail((*p, "tier"), f"must be one of {', '.join(TIERS)}, not {tier!r}")
        name = r.req_string(data, p, "name")
        if len(f"sco:pool={name}") > 60 or "/" in name or "," in name:
            raise r.fail((*p, "name"), "must fit a Nova tag (sco:pool=<name> ≤ 60, no / or ,)")
        pools.append(Pool(
            name=name, region=region, az=r.req_string(data, p, "az"), flavor=flavor,
            group=r.req_string(data, p, "group"), tier=tier,
            depth=r.integer(data, p, "depth", 0, low=0),
        ))
    _unique(r, [x.name for x in pools], "pools")

    planner = r.mapping(root.get("planner"), ("planner",), allowed=FIELDS[("planner",)])
    ranking_raw = root.get("ranking")
    if ranking_raw is None:
        raise r.fail(("ranking",), "is required (scores, file or url)")
    ranking = _ranking(r, ranking_raw, ("ranking",))

    workloads = tuple(_workload(r, raw, ("workloads", i), contracts)
                      for i, raw in enumerate(r.seq(root.get("workloads"), ("workloads",))))
    _unique(r, [w.name for w in workloads], "workloads")

    k = r.mapping(root.get("kubernetes"), ("kubernetes",),
                  allowed=FIELDS[("kubernetes",)])
    kp: Path_ = ("kubernetes",)
    kubernetes = KubernetesSettings(
        kubeconfig=r.path_value(k, kp, "kubeconfig"),
        context=r.string(k, kp, "context"),
        workload_label=r.string(k, kp, "workload_label", default="sco/workload") or "sco/workload",
        contract_label=r.string(k, kp, "contract_label", default="sco/contract") or "sco/contract",
        gpu_resource=r.string(k, kp, "gpu_resource", default="nvidia.com/gpu") or "nvidia.com/gpu",
        namespaces=tuple(str(n) for n in r.seq(k.get("namespaces"), (*kp, "namespaces"))),
    )

    s = r.mapping(root.get("slurm"), ("slurm",),
                  allowed=FIELDS[("slurm",)])
    sp: Path_ = ("slurm",)
    gres_map = {str(a): str(b) for a, b in r.mapping(s.get("gres_map"), (*sp, "gres_map")).items()}
    slurm = SlurmSettings(
        rest_url=r.string(s, sp, "rest_url"),
        rest_user=r.string(s, sp, "rest_user", default="root") or "root",
        rest_token_file=r.path_value(s, sp, "rest_token_file"),
        rest_api_version=_rest_api(r, s, sp),
        gpu_partition=r.string(s, sp, "gpu_partition", default="ml") or "ml",
        default_partition=r.string(s, sp, "default_partition"),
        gres_map=gres_map or {"gpu": "nvidia.com/gpu"},
        sinfo=r.string(s, sp, "sinfo", default="sinfo") or "sinfo",
        squeue=r.string(s, sp, "squeue", default="squeue") or "squeue",
        scontrol=r.string(s, sp, "scontrol", default="scontrol") or "scontrol",
        sbatch=r.string(s, sp, "sbatch", default="sbatch") or "sbatch",
        sacct=r.string(s, sp, "sacct", default="sacct") or "sacct",
        timeout=r.duration(s, sp, "timeout", 10.0),
        cloud_partitions=tuple(str(x) for x in r.seq(s.get("cloud_partitions"),
                                                     (*sp, "cloud_partitions"))),
    )

    b = r.mapping(root.get("bootstrap"), ("bootstrap",),
                  allowed=FIELDS[("bootstrap",)])
    bootstrap = Bootstrap(
        join_secret_file=r.path_value(b, ("bootstrap",), "join_secret_file"),
        user_data_template=r.path_value(b, ("bootstrap",), "user_data_template"),
        api_endpoint=r.string(b, ("bootstrap",), "api_endpoint"),
        ca_cert_hash=_ca_cert_hash(r, b),
        join_tokens=r.boolean(b, ("bootstrap",), "join_tokens", True),
    )

    t = r.mapping(root.get("timeouts"), ("timeouts",),
                  allowed=FIELDS[("timeouts",)])
    tp: Path_ = ("timeouts",)
    unset = Timeouts()  # the one place the timeout defaults are written
    timeouts = Timeouts(
        launch=r.duration(t, tp, "launch", unset.launch),
        registration=r.duration(t, tp, "registration", unset.registration),
        idle=r.duration(t, tp, "idle", unset.idle),
        negative_cache=r.duration(t, tp, "negative_cache", unset.negative_cache),
        orphan_grace=r.duration(t, tp, "orphan_grace", unset.orphan_grace),
        lock_wait=r.duration(t, tp, "lock_wait", unset.lock_wait),
        launch_settle=r.duration(t, tp, "launch_settle", unset.launch_settle),
        drain_margin=r.duration(t, tp, "drain_margin", unset.drain_margin),
    )
    it = r.mapping(root.get("intake"), ("intake",), allowed=FIELDS[("intake",)])
    intake = Intake(batch_idle=r.duration(it, ("intake",), "batch_idle", 1.0),
                    batch_max=r.duration(it, ("intake",), "batch_max", 5.0))
    if intake.batch_max > 10:
        raise r.fail(("intake", "batch_max"), "must be at most 10s (steps 1-8 stay under 10 s)")
    if intake.batch_idle > intake.batch_max:
        raise r.fail(("intake", "batch_idle"), "must not exceed intake.batch_max")

    quota_block = r.string(root, (), "quota_block", default="fail") or "fail"
    if quota_block not in ("fail", "queue"):
        raise r.fail(("quota_block",), "must be fail or queue")
    metrics = r.mapping(root.get("metrics"), ("metrics",), allowed=FIELDS[("metrics",)])

    state = r.path_value(root, (), "state") or Path("./scoctl.db")
    return Config(
        path=path,
        state=state,
        regions=regions,
        flavors=flavors,
        pools=tuple(pools),
        contracts=contracts,
        ranking=ranking,
        workloads=workloads,
        depth_premium=r.number(planner, ("planner",), "depth_premium", 0.05, low=0, high=1),
        node_reserve=reserve,
        kubernetes=kubernetes,
        slurm=slurm,
        bootstrap=bootstrap,
        spool=r.path_value(root, (), "spool") or Path("/var/spool/scoctl"),
        budget_dir=r.path_value(root, (), "budget_dir") or Path("/run/scoctl"),
        metrics_file=r.path_value(metrics, ("metrics",), "textfile"),
        timeouts=timeouts,
        retention=_retention(r, root),
        intake=intake,
        quota_block=quota_block,  # type: ignore[arg-type]
        gc_orphans=r.boolean(root, (), "gc_orphans", False),
        disruption_budget=r.number(root, (), "disruption_budget", 0.10, low=0.0001, high=1),
        elastic=r.boolean(root, (), "elastic", True),
    )


def _retention(r: _Reader, root: Mapping[str, Any]) -> Retention:
    section = r.mapping(root.get("retention"), ("retention",),
                        allowed=FIELDS[("retention",)])
    unset = Retention()
    kept = {name: r.duration(section, ("retention",), name, getattr(unset, name))
            for name in ("events", "instances", "launches")}
    if kept["events"] < EVENTS_FLOOR:
        raise r.fail(("retention", "events"),
                     "must be at least 1d (the state always keeps a day of events)")
    for name, seconds in kept.items():
        if seconds > MAX_RETENTION:
            raise r.fail(("retention", name), "must be at most 36500d")
    return Retention(**kept)


def _unique(r: _Reader, names: list[str], section: str) -> None:
    seen: dict[str, int] = {}
    for index, name in enumerate(names):
        if name in seen:
            raise r.fail((section, index, "name"),
                         f"duplicate name {name!r} (first at {section}[{seen[name]}])")
        seen[name] = index


def demo_config_text() -> str:
    """The bundled demo config, shipped inside the package."""
    return resources.files("scoctl.data").joinpath(DEMO_CONFIG_NAME).read_text(encoding="utf-8")


def load_config(path: Path | None) -> Config:
    """Load and validate the config at `path`, or the bundled demo config when None."""
    if path is None:
        return parse_config(load_located(demo_config_text(), "<bundled demo.yaml>"), path=None)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config: {exc.strerror}", file=str(path)) from exc
    return parse_config(load_located(text, str(path)), path=path)


def resolve_config_path(option: Path | None) -> tuple[Path | None, str | None]:
    """DESIGN §8 order: --config, $SCOCTL_CONFIG, /etc/scoctl/config.yaml, bundled demo.

    Returns the path (None = bundled demo) and a warning to print when falling back to the demo.
    """
    if option is not None:
        return option, None
    env = os.environ.get("SCOCTL_CONFIG")
    if env:
        return Path(env), None
    if DEFAULT_CONFIG.exists():
        return DEFAULT_CONFIG, None
    return None, ("no config given (--config, $SCOCTL_CONFIG or /etc/scoctl/config.yaml): "
                  "using the bundled demo config")
