"""The scoctl config file (DESIGN §12): load, validate with file/line/field errors, summarise.

Relative paths in the config (state, spool, bootstrap files, metrics) are relative to the
current working directory, as the example config's ``configs/user-data.yaml`` shows.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from scoctl.config.yamlsrc import Located, load_located, read_text
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
_DURATION = re.compile(r"^\s*(\d{1,15}(?:\.\d{1,9})?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
MAX_DURATION = 100 * 365.25 * 86400.0  # a century: longer is a typo, and overflows datetimes
MAX_INTEGER = 2**53  # whole numbers in the config stay exact as JSON numbers


def parse_duration(value: object, *, most: float = MAX_DURATION) -> float:
    """``"90s"``, ``"5m"``, ``"1h"``, ``250ms`` or a number of seconds, to seconds.

    Raises ValueError for anything else: negative, not finite, or longer than a century (or
    than `most`, a field's own limit, named in days).
    """
    if isinstance(value, bool):
        raise ValueError(f"not a duration: {value!r}")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError(f"not a finite duration: {value!r}")
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValueError(f"not a duration: {value!r} (use e.g. 30s, 5m, 1h)")
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    if seconds < 0:
        raise ValueError(f"negative duration: {value!r}")
    if seconds > most:
        if most < MAX_DURATION:
            raise ValueError(f"must be at most {most / 86400:g}d")
        raise ValueError(f"duration too long: {value!r} (at most 100 years)")
    return seconds


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
    poll: float = 5.0  # how often `run --follow` polls squeue / slurmrestd


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
    api: float = 30.0  # connect and read timeout of every call to Nova and Kubernetes
    run: float = 600.0  # a pass stops cleanly after this long (exit 1), within `api`
    retry_budget: float = 60.0  # seconds of retry waits per region and pass, all calls together
    reconcile_interval: float = 15.0  # `run --follow`: reconcile at least this often
    # `run --follow`, while reclaimable capacity is held: reconcile (whose server listing shows
    # a `sco:reclaim-at` notice) at least this often; 0: only every reconcile_interval
    notice_poll: float = 5.0
    drain_margin: float = 15.0  # before a reclaim deadline: evictions give way to deletions


@dataclass(frozen=True)
class Retention:
    """The `retention` section in seconds: how long the state keeps events, ended instances
    and settled launches (`core.retention`); these defaults are the only ones."""

    events: float = 30 * 86400.0
    instances: float = 7 * 86400.0
    launches: float = 7 * 86400.0



@dataclass(frozen=True)
class GateSettings:
    timeout: float = 10.0  # each capacity read of the gate; then `skipped` with a warning


@dataclass(frozen=True)
class Lease:
    """The leader lease of each region when several runners share a PostgreSQL state."""

    ttl: float = 15.0


STATE_SCHEMES = ("postgresql", "postgres")


def is_url(state: Path | str) -> bool:
    """The config's `state` names a database (``postgresql://…``), not a SQLite file."""
    return isinstance(state, str) and "://" in state


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
    state: Path | str  # a SQLite file, or a ``postgresql://USER@HOST:PORT/DB`` URL
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
    gate: GateSettings = field(default_factory=GateSettings)
    lease: Lease = field(default_factory=Lease)
    state_password_file: Path | None = None
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
        line = None
        with contextlib.suppress(ConfigError):  # the region's line: the file is read again
            if self.path is not None:
                doc = load_located(read_text(self.path, "config"), str(self.path))
                line = doc.line(("regions", index, "launch"))
        raise ConfigError("is required to launch instances (scoctl acquire): image, networks, "
                          "security_groups, ...", file=self.source_name, line=line,
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


TOP_LEVEL = frozenset({
    "state", "regions", "flavors", "node_reserve", "pools", "contracts", "planner", "ranking",
    "workloads", "kubernetes", "slurm", "bootstrap", "spool", "budget_dir", "metrics", "timeouts",
    "intake", "quota_block", "gc_orphans", "disruption_budget", "elastic", "retention", "gate",
    "lease", "state_password_file",
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
                           "sbatch", "sacct", "timeout", "cloud_partitions", "poll"}),
    ("bootstrap",): frozenset({"join_secret_file", "user_data_template", "api_endpoint",
                               "ca_cert_hash", "join_tokens"}),
    ("timeouts",): frozenset({"launch", "registration", "idle", "negative_cache",
                              "orphan_grace", "lock_wait", "launch_settle", "api", "run",
                              "retry_budget", "reconcile_interval", "notice_poll",
                              "drain_margin"}),
    ("retention",): frozenset({"events", "instances", "launches"}),
    ("gate",): frozenset({"timeout"}),
    ("intake",): frozenset({"batch_idle", "batch_max"}),
    ("lease",): frozenset({"ttl"}),
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
        if (not isinstance(value, str | int | float) or isinstance(value, bool) or value == ""
                or (isinstance(value, float) and not math.isfinite(value))):
            raise self.fail((*path, key), f"must be a non-empty string, not {value!r}")
        return str(value)

    def req_string(self, data: Mapping[str, Any], path: Path_, key: str) -> str:
        value = self.string(data, path, key, required=True)
        assert value is not None
        return value

    def number(self, data: Mapping[str, Any], path: Path_, key: str, default: float, *,
               low: float | None = None, high: float | None = None) -> float:
        value = data.get(key, default)
        if not _finite_number(value):
            raise self.fail((*path, key), f"must be a finite number, not {value!r}")
        if (low is not None and value < low) or (high is not None and value > high):
            raise self.fail((*path, key), f"must be between {low} and {high}, not {value!r}")
        return float(value)

    def integer(self, data: Mapping[str, Any], path: Path_, key: str, default: int | None, *,
                low: int = 0) -> int:
        value = data.get(key, default)
        if value is None:
            raise self.fail((*path, key), "is required")
        if (isinstance(value, bool) or not isinstance(value, int) or value < low
                or value > MAX_INTEGER):
            raise self.fail((*path, key),
                            f"must be a whole number from {low} to {MAX_INTEGER}, not {value!r}")
        return value

    def boolean(self, data: Mapping[str, Any], path: Path_, key: str, default: bool) -> bool:
        value = data.get(key, default)
        if not isinstance(value, bool):
            raise self.fail((*path, key), f"must be true or false, not {value!r}")
        return value

    def duration(self, data: Mapping[str, Any], path: Path_, key: str, default: float, *,
                 most: float = MAX_DURATION) -> float:
        value = data.get(key, default)
        try:
            return parse_duration(value, most=most)
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


def _finite_number(value: object) -> bool:
    """An int or a float that is neither NaN nor infinite (bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) if isinstance(value, float) else abs(value) <= MAX_INTEGER


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
    networks = _names(r, launch, path, "networks")
    groups = _names(r, launch, path, "security_groups")
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
    # every field's own type first, so a bad value is named before the one-of rule
    rid = r.string(data, path, "id")
    file = r.path_value(data, path, "file")
    url = r.string(data, path, "url")
    max_age = r.duration(data, path, "max_age", 3600.0)
    scores = None
    if data.get("scores") is not None:
        scores = {}
        for key, value in r.mapping(data["scores"], (*path, "scores")).items():
            if not _finite_number(value):
                raise r.fail((*path, "scores", str(key)), f"must be a finite number, not {value!r}")
            scores[str(key)] = float(value)
    if sum(x is not None for x in (scores, file, url)) != 1:
        raise r.fail(path, "give exactly one of scores, file or url")
    if scores is not None and not rid:
        raise r.fail((*path, "id"), "is required with inline scores")
    if url and not url.startswith(("http://", "https://")):
        raise r.fail((*path, "url"), "must be an http:// or https:// URL")
    return RankingSource(id=rid, scores=scores, file=file, url=url, max_age=max_age)


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


def _section(r: _Reader, root: Mapping[str, Any], name: str) -> dict[str, Any]:
    """The top-level mapping `name` (empty when absent), refusing keys FIELDS does not name."""
    return r.mapping(root.get(name), (name,), allowed=FIELDS[(name,)])


def _regions(r: _Reader, root: Mapping[str, Any]) -> tuple[Region, ...]:
    regions = tuple(_region(r, raw, ("regions", i))
                    for i, raw in enumerate(r.seq(root.get("regions"), ("regions",))))
    if not regions:
        raise r.fail(("regions",), "at least one region is required")
    _unique(r, [x.name for x in regions], "regions")
    return regions


def _flavors(r: _Reader, root: Mapping[str, Any],
             reserve: Mapping[str, int]) -> dict[str, Flavor]:
    flavor_list = [_flavor(r, raw, ("flavors", i), reserve)
                   for i, raw in enumerate(r.seq(root.get("flavors"), ("flavors",)))]
    _unique(r, [f.name for f in flavor_list], "flavors")
    return {f.name: f for f in flavor_list}


def _contracts(r: _Reader, root: Mapping[str, Any]) -> dict[str, Contract]:
    raw_contracts = r.mapping(root.get("contracts"), ("contracts",))
    contracts = {str(name): _contract(r, str(name), raw, ("contracts", str(name)))
                 for name, raw in raw_contracts.items()}
    return contracts or {"T1": Contract(name="T1")}


def _pool(r: _Reader, raw: Any, path: Path_, regions: tuple[Region, ...],
          flavors: Mapping[str, Flavor]) -> Pool:
    data = r.mapping(raw, path, allowed=FIELDS[("pools", "[]")])
    region = r.string(data, path, "region", default=regions[0].name) or regions[0].name
    if region not in {x.name for x in regions}:
        raise r.fail((*path, "region"), f"unknown region {region!r}")
    flavor = r.req_string(data, path, "flavor")
    if flavor not in flavors:
        raise r.fail((*path, "flavor"), f"unknown flavor {flavor!r}")
    tier = r.req_string(data, path, "tier")
    if tier not in TIERS:
        raise r.fail((*path, "tier"), f"must be one of {', '.join(TIERS)}, not {tier!r}")
    name = r.req_string(data, path, "name")
    if len(f"sco:pool={name}") > 60 or "/" in name or "," in name:
        raise r.fail((*path, "name"), "must fit a Nova tag (sco:pool=<name> ≤ 60, no / or ,)")
    return Pool(name=name, region=region, az=r.req_string(data, path, "az"), flavor=flavor,
                group=r.req_string(data, path, "group"), tier=tier,
                depth=r.integer(data, path, "depth", 0, low=0))


def _pools(r: _Reader, root: Mapping[str, Any], regions: tuple[Region, ...],
           flavors: Mapping[str, Flavor]) -> tuple[Pool, ...]:
    pools = tuple(_pool(r, raw, ("pools", i), regions, flavors)
                  for i, raw in enumerate(r.seq(root.get("pools"), ("pools",))))
    _unique(r, [x.name for x in pools], "pools")
    return pools


def _ranking_section(r: _Reader, root: Mapping[str, Any]) -> RankingSource:
    if root.get("ranking") is None:
        raise r.fail(("ranking",), "is required (scores, file or url)")
    return _ranking(r, root["ranking"], ("ranking",))


def _workloads(r: _Reader, root: Mapping[str, Any],
               contracts: Mapping[str, Contract]) -> tuple[WorkloadSpec, ...]:
    workloads = tuple(_workload(r, raw, ("workloads", i), contracts)
                      for i, raw in enumerate(r.seq(root.get("workloads"), ("workloads",))))
    _unique(r, [w.name for w in workloads], "workloads")
    return workloads


def _names(r: _Reader, data: Mapping[str, Any], path: Path_, key: str) -> tuple[str, ...]:
    """A list of names (namespaces, partitions, networks ...) as strings."""
    return tuple(str(item) for item in r.seq(data.get(key), (*path, key)))


def _kubernetes(r: _Reader, root: Mapping[str, Any]) -> KubernetesSettings:
    k = _section(r, root, "kubernetes")
    kp: Path_ = ("kubernetes",)
    return KubernetesSettings(
        kubeconfig=r.path_value(k, kp, "kubeconfig"),
        context=r.string(k, kp, "context"),
        workload_label=r.string(k, kp, "workload_label", default="sco/workload") or "sco/workload",
        contract_label=r.string(k, kp, "contract_label", default="sco/contract") or "sco/contract",
        gpu_resource=r.string(k, kp, "gpu_resource", default="nvidia.com/gpu") or "nvidia.com/gpu",
        namespaces=_names(r, k, kp, "namespaces"),
    )


def _slurm(r: _Reader, root: Mapping[str, Any]) -> SlurmSettings:
    s = _section(r, root, "slurm")
    sp: Path_ = ("slurm",)
    gres_map = {str(a): str(b) for a, b in r.mapping(s.get("gres_map"), (*sp, "gres_map")).items()}

    def text(key: str, default: str) -> str:
        return r.string(s, sp, key, default=default) or default

    settings = SlurmSettings(
        rest_url=r.string(s, sp, "rest_url"),
        rest_user=text("rest_user", "root"),
        rest_token_file=r.path_value(s, sp, "rest_token_file"),
        rest_api_version=_rest_api(r, s, sp),
        gpu_partition=text("gpu_partition", "ml"),
        default_partition=r.string(s, sp, "default_partition"),
        gres_map=gres_map or {"gpu": "nvidia.com/gpu"},
        sinfo=text("sinfo", "sinfo"),
        squeue=text("squeue", "squeue"),
        scontrol=text("scontrol", "scontrol"),
        sbatch=text("sbatch", "sbatch"),
        sacct=text("sacct", "sacct"),
        timeout=r.duration(s, sp, "timeout", 10.0),
        cloud_partitions=_names(r, s, sp, "cloud_partitions"),
        poll=r.duration(s, sp, "poll", 5.0),
    )
    if settings.poll <= 0:  # a controller timer of 0 would poll in a busy loop
        raise r.fail(("slurm", "poll"), "must be more than 0s")
    return settings


def _bootstrap(r: _Reader, root: Mapping[str, Any]) -> Bootstrap:
    boot = _section(r, root, "bootstrap")
    return Bootstrap(
        join_secret_file=r.path_value(boot, ("bootstrap",), "join_secret_file"),
        user_data_template=r.path_value(boot, ("bootstrap",), "user_data_template"),
        api_endpoint=r.string(boot, ("bootstrap",), "api_endpoint"),
        ca_cert_hash=_ca_cert_hash(r, boot),
        join_tokens=r.boolean(boot, ("bootstrap",), "join_tokens", True),
    )


def _timeouts(r: _Reader, root: Mapping[str, Any]) -> Timeouts:
    t = _section(r, root, "timeouts")
    defaults = Timeouts()
    timeouts = Timeouts(**{name: r.duration(t, ("timeouts",), name, getattr(defaults, name))
                           for name in Timeouts.__dataclass_fields__})
    for name in ("api", "run"):  # 0 would mean "no time at all", not "no limit"
        if getattr(timeouts, name) <= 0:
            raise r.fail(("timeouts", name), "must be more than 0")
    if timeouts.reconcile_interval <= 0:  # a controller timer of 0 would poll in a busy loop
        raise r.fail(("timeouts", "reconcile_interval"), "must be more than 0s")
    return timeouts


def _gate(r: _Reader, root: Mapping[str, Any]) -> GateSettings:
    timeout = r.duration(_section(r, root, "gate"), ("gate",), "timeout", 10.0)
    if timeout <= 0:
        raise r.fail(("gate", "timeout"), "must be more than 0")
    return GateSettings(timeout=timeout)


def _intake(r: _Reader, root: Mapping[str, Any]) -> Intake:
    it = _section(r, root, "intake")
    intake = Intake(batch_idle=r.duration(it, ("intake",), "batch_idle", 1.0),
                    batch_max=r.duration(it, ("intake",), "batch_max", 5.0))
    if intake.batch_max > 10:
        raise r.fail(("intake", "batch_max"), "must be at most 10s (steps 1-8 stay under 10 s)")
    if intake.batch_idle > intake.batch_max:
        raise r.fail(("intake", "batch_idle"), "must not exceed intake.batch_max")
    return intake


def _quota_block(r: _Reader, root: Mapping[str, Any]) -> Literal["fail", "queue"]:
    quota_block = r.string(root, (), "quota_block", default="fail") or "fail"
    if quota_block == "queue":
        return "queue"
    if quota_block != "fail":
        raise r.fail(("quota_block",), "must be fail or queue")
    return "fail"


def _lease(r: _Reader, root: Mapping[str, Any]) -> Lease:
    lease = Lease(ttl=r.duration(_section(r, root, "lease"), ("lease",), "ttl", 15.0))
    if not 1 <= lease.ttl <= 300:
        raise r.fail(("lease", "ttl"), "must be between 1s and 5m")
    return lease


def parse_config(doc: Located, *, path: Path | None) -> Config:
    """Validate a parsed document into a Config; raises ConfigError naming file, line and field.

    One small reader per section; they run in the order of the fields below, so the first bad
    field (in that order) is the one reported.
    """
    r = _Reader(doc)
    root = r.mapping(doc.data, (), allowed=TOP_LEVEL)
    if not root:
        raise r.fail((), "the config is empty")
    reserve = r.resources(root.get("node_reserve"), ("node_reserve",))
    regions = _regions(r, root)
    flavors = _flavors(r, root, reserve)
    contracts = _contracts(r, root)
    pools = _pools(r, root, regions, flavors)
    planner = _section(r, root, "planner")
    return Config(
        path=path,
        ranking=_ranking_section(r, root),
        workloads=_workloads(r, root, contracts),
        kubernetes=_kubernetes(r, root),
        slurm=_slurm(r, root),
        bootstrap=_bootstrap(r, root),
        timeouts=_timeouts(r, root),
        intake=_intake(r, root),
        gate=_gate(r, root),
        quota_block=_quota_block(r, root),
        metrics_file=r.path_value(_section(r, root, "metrics"), ("metrics",), "textfile"),
        state=_state(r, root),
        state_password_file=r.path_value(root, (), "state_password_file"),
        lease=_lease(r, root),
        regions=regions,
        flavors=flavors,
        pools=pools,
        contracts=contracts,
        depth_premium=r.number(planner, ("planner",), "depth_premium", 0.05, low=0, high=1),
        node_reserve=reserve,
        spool=r.path_value(root, (), "spool") or Path("/var/spool/scoctl"),
        budget_dir=r.path_value(root, (), "budget_dir") or Path("/run/scoctl"),
        retention=_retention(r, root),
        gc_orphans=r.boolean(root, (), "gc_orphans", False),
        disruption_budget=r.number(root, (), "disruption_budget", 0.10, low=0.0001, high=1),
        elastic=r.boolean(root, (), "elastic", True),
    )


def state_location(value: str) -> Path | str:
    """A `state` value (config or ``--state``) as a SQLite path or a checked database URL;
    ValueError naming what is wrong (an unknown scheme, a password in the URL, no database)."""
    if "://" not in value:
        return Path(os.path.expanduser(value))
    if value.lower().startswith("sqlite://"):
        return Path(os.path.expanduser(value[len("sqlite://"):]))
    parts = urlsplit(value)
    if parts.scheme not in STATE_SCHEMES:
        raise ValueError(f"{parts.scheme}:// is not a state backend (a SQLite file path or "
                         "sqlite:// URL, or postgresql://USER@HOST:PORT/DB)")
    if parts.password is not None:
        raise ValueError("the URL carries a password: put it in PGPASSFILE or "
                         "state_password_file, never in the config")
    if not parts.hostname or parts.path.strip("/") == "":
        raise ValueError("a PostgreSQL state is postgresql://USER@HOST:PORT/DB")
    return value


def _state(r: _Reader, root: Mapping[str, Any]) -> Path | str:
    value = r.string(root, (), "state") or "./scoctl.db"
    try:
        return state_location(value)
    except ValueError as exc:
        # never echo the value: it may hold a password
        raise r.fail(("state",), str(exc)) from None


def _retention(r: _Reader, root: Mapping[str, Any]) -> Retention:
    section = r.mapping(root.get("retention"), ("retention",),
                        allowed=FIELDS[("retention",)])
    unset = Retention()
    kept = {name: r.duration(section, ("retention",), name, getattr(unset, name),
                             most=MAX_RETENTION)
            for name in ("events", "instances", "launches")}
    if kept["events"] < EVENTS_FLOOR:
        raise r.fail(("retention", "events"),
                     "must be at least 1d (the state always keeps a day of events)")
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
    from importlib import resources  # only the demo needs it (a few ms the gate does not pay)

    return resources.files("scoctl.data").joinpath(DEMO_CONFIG_NAME).read_text(encoding="utf-8")


def load_config(path: Path | None) -> Config:
    """Load and validate the config at `path`, or the bundled demo config when None."""
    if path is None:
        return parse_config(load_located(demo_config_text(), "<bundled demo.yaml>"), path=None)
    return parse_config(load_located(read_text(path, "config"), str(path)), path=path)


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
