"""The scoctl config file (design: Schemas): load, validate with file/line/field errors, summarise.

Relative paths in the config (state, spool, bootstrap files, metrics) are relative to the
current working directory, as the example config's ``configs/user-data.yaml`` shows.
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields, replace
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from scoctl.config.fields import (
    OUTSIDE,
    Spec,
    default_of,
    in_file,
    keys_of,
    keys_under,
    read_as,
    sections_under,
    setting,
    spec_of,
)
from scoctl.config.ranking import score_problem
from scoctl.config.yamlsrc import Located, load_located, read_text
from scoctl.core.cron import Cron, CronError, parse_cron
from scoctl.core.model import (
    ISOLATIONS,
    KINDS,
    OLDEST_REST_API,
    SOURCES,
    TIERS,
    Contract,
    Flavor,
    Isolation,
    Limits,
    Pool,
    Source,
    flavor_allocatable,
    is_slug,
    rest_api_version,
)
from scoctl.core.model.buffers import BUFFER_TIERS, Buffer
from scoctl.core.model.disruption import (
    Budget,
    DisruptionSettings,
    Drift,
    Rate,
    Rebalance,
    Units,
)
from scoctl.core.model.gangs import DEFAULT_GANG_POLICY, PLACEMENTS, GangPolicy
from scoctl.core.model.pools import DEFAULT_DEPTH_PREMIUM
from scoctl.core.model.vocabulary import DisruptionReason
from scoctl.core.quantity import (
    QuantityError,
    parse_count,
    parse_memory,
    parse_resources,
)
from scoctl.core.retention import EVENTS_FLOOR
from scoctl.core.userdata import JOIN_PLACEHOLDERS, placeholders
from scoctl.errors import ConfigError, UsageError

DEFAULT_CONFIG = Path("/etc/scoctl/config.yaml")
DEFAULT_CONTRACT = "T1"  # the contract of a workload that names none, and of a config with none
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
    """A region's `launch:`: what every server it launches gets (image, networks, security
    groups, key, server group)."""

    image: str = field(metadata=read_as("string"))
    networks: tuple[str, ...] = setting((), "names")
    security_groups: tuple[str, ...] = setting((), "names")
    key_name: str | None = setting(None, "string")
    server_group: str | None = setting(None, "string")


@dataclass(frozen=True)
class Region:
    """One `regions:` entry: its cloud in `clouds.yaml`, its rate of mutating calls and how it
    launches."""

    name: str = field(metadata=read_as("string"))
    cloud: str  # the file's default is the region's name
    mutating_calls_per_second: int = setting(10, "integer", low=1)
    launch: LaunchSettings | None = None  # None: a what-if config (gate, watch, plan only)
    # else openstacksdk's search (OS_CLIENT_CONFIG_FILE, ...)
    clouds_yaml: Path | None = setting(None, "path")


@dataclass(frozen=True)
class RankingSource:
    """`ranking:`: the pool scores inline, from a file or from a URL, and how old they may
    be."""

    id: str | None = setting(None, "string")
    scores: Mapping[str, float] | None = None
    file: Path | None = setting(None, "path")
    url: str | None = setting(None, "string")
    max_age: float = setting(3600.0, "duration")


@dataclass(frozen=True)
class WorkloadSpec:
    """One `workloads:` entry: the contract and source of a named workload, and what selects
    its demand."""

    name: str = field(metadata=read_as("string"))
    contract: str = setting(DEFAULT_CONTRACT, "string")
    source: str = setting("k8s", "string")
    kind: str = "deployment"  # the file's default for a Slurm workload is job
    namespace: str | None = setting(None, "string")
    # Slurm: jobs of this account are this workload's demand
    account: str | None = setting(None, "string")
    # Slurm: jobs in this partition are this workload's demand
    partition: str | None = setting(None, "string")
    tolerates_reclaimable: bool = setting(True, "boolean")
    # labels the workload's units' Nodes carry beyond scoctl's own (design: Constraints)
    node_labels: Mapping[str, str] = field(default_factory=dict, metadata=read_as("labels"))
    # exclusive: its units' Nodes carry the taint sco/workload=<name>:NoSchedule, so only its
    # own pods (which tolerate it) land there; shared: no workload taint
    isolation: Isolation = setting("exclusive", "string")
    # at most this much for the workload (cpu, memory, accelerators, units); read by _workload
    limits: Limits = field(default_factory=Limits)
    # `disruption` given for this workload, merged over the top-level block (None: not given)
    disruption: DisruptionSettings | None = None


@dataclass(frozen=True)
class KubernetesSettings:
    """`kubernetes:`: how to reach the cluster and the labels and resources scoctl reads."""

    kubeconfig: Path | None = setting(None, "path")
    context: str | None = setting(None, "string")
    workload_label: str = setting("sco/workload", "string")
    contract_label: str = setting("sco/contract", "string")
    gpu_resource: str = setting("nvidia.com/gpu", "string")
    namespaces: tuple[str, ...] = setting((), "names")


@dataclass(frozen=True)
class SlurmSettings:
    """`slurm:`: its commands (or slurmrestd), partitions, GRES names and timeouts."""

    rest_url: str | None = setting(None, "string")
    rest_user: str = setting("root", "string")
    rest_token_file: Path | None = setting(None, "path")
    # e.g. v0.0.40; None: the newest slurmrestd offers
    rest_api_version: str | None = setting(None, "string")
    gpu_partition: str = setting("ml", "string")
    default_partition: str | None = setting(None, "string")
    gres_map: Mapping[str, str] = field(default_factory=lambda: {"gpu": "nvidia.com/gpu"},
                                        metadata=read_as("labels"))
    sinfo: str = setting("sinfo", "string")
    squeue: str = setting("squeue", "string")
    scontrol: str = setting("scontrol", "string")
    sbatch: str = setting("sbatch", "string")
    sacct: str = setting("sacct", "string")
    timeout: float = setting(10.0, "duration")
    cloud_partitions: tuple[str, ...] = setting((), "names")
    poll: float = setting(5.0, "duration")  # how often `run --follow` polls squeue / slurmrestd


@dataclass(frozen=True)
class Bootstrap:
    """`bootstrap:`: how a new node joins (join secret or per-launch token, API endpoint, CA
    hash) and the user-data template."""

    join_secret_file: Path | None = setting(None, "path")  # static fallback; never logged or stored
    user_data_template: Path | None = setting(None, "path")
    api_endpoint: str | None = setting(None, "string")  # the Kubernetes API nodes join (host:port)
    # sha256:<hex> of the cluster CA (kubeadm discovery)
    ca_cert_hash: str | None = setting(None, "string")
    # a short-lived bootstrap token per Kubernetes launch
    join_tokens: bool = setting(True, "boolean")


@dataclass(frozen=True)
class Timeouts:
    """The `timeouts` section in seconds; these defaults are the only ones (the reconciler's
    `Policy` and the parser take them from here)."""

    launch: float = setting(300.0, "duration")
    registration: float = setting(900.0, "duration")
    idle: float = setting(600.0, "duration")
    negative_cache: float = setting(180.0, "duration")
    orphan_grace: float = setting(1800.0, "duration")
    lock_wait: float = setting(0.0, "duration")
    # an in-flight launch intent no server carries the tag of this long after its call ended
    # (or, after a crash before the call, after it was written) is failed and relaunched
    launch_settle: float = setting(30.0, "duration")
    # connect and read timeout of every call to Nova and Kubernetes
    api: float = setting(30.0, "duration")
    # managed pods still pending this long after the units that should hold them are Ready
    # are unplaced (PODS_UNPLACED)
    unplaced: float = setting(30.0, "duration")
    # a pass stops cleanly after this long (exit 1), within `api`
    run: float = setting(600.0, "duration")
    # seconds of retry waits per region and pass, all calls together
    retry_budget: float = setting(60.0, "duration")
    # `run --follow`: reconcile at least this often
    reconcile_interval: float = setting(15.0, "duration")
    # `run --follow`, while reclaimable capacity is held: reconcile (whose server listing shows
    # a `sco:reclaim-at` notice) at least this often; 0: only every reconcile_interval
    notice_poll: float = setting(5.0, "duration")
    # before a reclaim deadline: evictions give way to deletions
    drain_margin: float = setting(15.0, "duration")
    # a scale-down's drain waits at most this long for its evicted pods to terminate (their
    # grace periods bound it too); pods still there: the server is not deleted this pass
    drain: float = setting(120.0, "duration")


@dataclass(frozen=True)
class Retention:
    """The `retention` section in seconds: how long the state keeps events, ended instances
    and settled launches (`core.retention`); these defaults are the only ones."""

    events: float = setting(30 * 86400.0, "duration", most=MAX_RETENTION)
    instances: float = setting(7 * 86400.0, "duration", most=MAX_RETENTION)
    launches: float = setting(7 * 86400.0, "duration", most=MAX_RETENTION)



@dataclass(frozen=True)
class GateSettings:
    """`gate:`: how long the gate waits for a capacity read."""

    # each capacity read of the gate; then `skipped` with a warning
    timeout: float = setting(10.0, "duration")


@dataclass(frozen=True)
class Lease:
    """The leader lease of each region when several runners share a PostgreSQL state."""

    ttl: float = setting(15.0, "duration")


STATE_SCHEMES = ("postgresql", "postgres")


def is_url(state: Path | str) -> bool:
    """The config's `state` names a database (``postgresql://…``), not a SQLite file."""
    return isinstance(state, str) and "://" in state


@dataclass(frozen=True)
class Gang:
    """The `gang` section (design: Gangs), defaults from `core.model.gangs.DEFAULT_GANG_POLICY`."""

    placement: str = setting(DEFAULT_GANG_POLICY.placement, "string")  # same_group|same_az|any
    max_pools: int = setting(DEFAULT_GANG_POLICY.max_pools, "integer", low=1)
    deadline: float = setting(DEFAULT_GANG_POLICY.deadline, "duration")  # launch to all Ready
    retries: int = setting(DEFAULT_GANG_POLICY.retries, "integer", low=0)
    booking: float = setting(DEFAULT_GANG_POLICY.booking, "duration")  # kept for its job
    backoff: float = setting(DEFAULT_GANG_POLICY.backoff, "duration")  # first retry's wait

    def policy(self) -> GangPolicy:
        placement = next(p for p in PLACEMENTS if p == self.placement)
        return GangPolicy(placement, self.max_pools, self.deadline, self.retries, self.booking,
                          self.backoff)


@dataclass(frozen=True)
class Intake:
    """`intake:`: the batch window (idle, most) that gathers arriving demand into one pass."""

    batch_idle: float = setting(1.0, "duration")
    batch_max: float = setting(5.0, "duration")


@dataclass(frozen=True)
class HostHints:
    """What the host offers beyond the config (`scoctl.host.discovery.host_hints` reads it):
    a kubeconfig ($KUBECONFIG, ~/.kube/config) or an in-cluster service account, and a Slurm
    client (``squeue`` on the PATH and a slurm.conf)."""

    kubeconfig: bool = False
    slurm_client: bool = False


@dataclass(frozen=True)
class TierSettings:
    """`tiers.<tier>`: a unit of that tier costs its flavor's price times `price_factor`
    (`scoctl cost`; a pool's own `price` wins)."""

    price_factor: float = setting(1.0, "number", low=0)


@dataclass(frozen=True)
class Config:
    """A validated config. `path` is where it came from (None for the bundled demo)."""

    path: Path | None = field(metadata=OUTSIDE)
    state: Path | str  # a SQLite file, or a ``postgresql://USER@HOST:PORT/DB`` URL
    regions: tuple[Region, ...]
    flavors: Mapping[str, Flavor]
    pools: tuple[Pool, ...]
    contracts: Mapping[str, Contract]
    ranking: RankingSource
    workloads: tuple[WorkloadSpec, ...]
    depth_premium: float = setting(DEFAULT_DEPTH_PREMIUM, "number", low=0, high=1,
                                   under="planner")
    node_reserve: Mapping[str, int] = field(default_factory=dict)
    kubernetes: KubernetesSettings = field(default_factory=KubernetesSettings)
    slurm: SlurmSettings = field(default_factory=SlurmSettings)
    bootstrap: Bootstrap = field(default_factory=Bootstrap)
    spool: Path = setting(Path("/var/spool/scoctl"), "path")
    budget_dir: Path = setting(Path("/run/scoctl"), "path")
    metrics_file: Path | None = setting(None, "path", under="metrics", key="textfile")
    timeouts: Timeouts = field(default_factory=Timeouts)
    retention: Retention = field(default_factory=Retention)
    intake: Intake = field(default_factory=Intake)
    gang: Gang = field(default_factory=Gang)
    gate: GateSettings = field(default_factory=GateSettings)
    lease: Lease = field(default_factory=Lease)
    state_password_file: Path | None = setting(None, "path")
    quota_block: Literal["fail", "queue"] = setting("fail", "string")
    gc_orphans: bool = setting(False, "boolean")
    # design: Disruption; legacy `disruption_budget: 0.5` is read into it as budgets [{units:
    # "50%"}]
    disruption: DisruptionSettings = field(default_factory=DisruptionSettings)
    disruption_budget: float | None = setting(None, "number", low=0.0001, high=1)
    elastic: bool = setting(True, "boolean")
    buffers: tuple[Buffer, ...] = ()  # design: Buffers
    tiers: Mapping[str, TierSettings] = field(default_factory=dict)  # showback: price factors

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

    def exclusive(self, workload: str) -> bool:
        """Whether `workload`'s Kubernetes units carry its taint (``isolation: exclusive``, the
        default, also for a workload the config does not name; a Slurm workload's nodes join
        no Kubernetes cluster)."""
        spec = self.workload(workload)
        return spec is None or (spec.isolation == "exclusive" and spec.source != "slurm")

    def disruption_of(self, workload: str) -> DisruptionSettings:
        """The `disruption` settings of `workload`: its own block merged over the top-level
        one, else the top-level one (also for workloads the config does not name)."""
        spec = self.workload(workload)
        return spec.disruption if spec is not None and spec.disruption else self.disruption

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
    def serves_kubernetes(self) -> bool:
        """The config alone says scoctl launches Kubernetes nodes: it names the cluster
        (`sources()` without host hints has k8s) or a workload has source k8s (the default)."""
        return "k8s" in self.sources() or any(w.source == "k8s" for w in self.workloads)

    def user_data_template(self) -> str:
        """The text of `bootstrap.user_data_template`, else the bundled template; ConfigError
        naming the field when it cannot be read."""
        try:
            return _template_text(self.bootstrap.user_data_template)
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(_unreadable(exc), file=self.source_name,
                              field="bootstrap.user_data_template") from exc

    @property
    def slurm_gpu_resource(self) -> str:
        """The resource name Slurm GPUs count as: what `slurm.gres_map` maps ``gpu`` to, else
        the cluster-wide `kubernetes.gpu_resource` (so claims compare with flavor accelerators)."""
        return self.slurm.gres_map.get("gpu", self.kubernetes.gpu_resource)


# How the file gives each rule of a contract: `Contract` is a core value, so its fields carry
# no metadata; their defaults are still `Contract`'s own.
CONTRACT_SPECS: Mapping[str, Spec] = {
    "floor": Spec("number", low=0, high=1),
    "pool_cap": Spec("number", low=0.0001, high=1),
    "group_cap": Spec("number", low=0.0001, high=1),
    "min_pools": Spec("integer", low=1),
    "strict": Spec("boolean"),
}

# The dataclass each section of the file is: "[]" is each item of a list, "*" each value of a
# mapping whose keys are names (contracts by tier, the key being the contract's name).
SECTIONS: Mapping[tuple[str, ...], type] = {
    (): Config,
    ("regions", "[]"): Region,
    ("regions", "[]", "launch"): LaunchSettings,
    ("flavors", "[]"): Flavor,
    ("pools", "[]"): Pool,
    ("contracts", "*"): Contract,
    ("tiers", "*"): TierSettings,
    ("ranking",): RankingSource,
    ("workloads", "[]"): WorkloadSpec,
    ("disruption",): DisruptionSettings,
    ("disruption", "budgets", "[]"): Budget,
    ("disruption", "budgets", "[]", "rate"): Rate,
    ("disruption", "drift"): Drift,
    ("disruption", "rebalance"): Rebalance,
    ("workloads", "[]", "disruption"): DisruptionSettings,
    ("workloads", "[]", "disruption", "budgets", "[]"): Budget,
    ("workloads", "[]", "disruption", "budgets", "[]", "rate"): Rate,
    ("workloads", "[]", "disruption", "drift"): Drift,
    ("workloads", "[]", "disruption", "rebalance"): Rebalance,
    ("buffers", "[]"): Buffer,
    ("kubernetes",): KubernetesSettings,
    ("slurm",): SlurmSettings,
    ("bootstrap",): Bootstrap,
    ("timeouts",): Timeouts,
    ("retention",): Retention,
    ("gate",): GateSettings,
    ("intake",): Intake,
    ("gang",): Gang,
    ("lease",): Lease,
}


# `limits:` (design: Constraints)
_LIMIT_KEYS = frozenset({"cpu", "memory", "accelerators", "units"})
_CHUNK_KEYS = frozenset({"cpu", "memory", "accelerators"})  # `buffers[].chunk` (design: Buffers)


def _field_table() -> dict[tuple[str, ...], frozenset[str]]:
    table = {section: keys_of(cls) for section, cls in SECTIONS.items()}
    table[("workloads", "[]", "limits")] = table[("pools", "[]", "limits")] = _LIMIT_KEYS
    table[("buffers", "[]", "limits")] = _LIMIT_KEYS
    table[("buffers", "[]", "chunk")] = _CHUNK_KEYS
    table[("contracts", "*")] -= {"name"}  # the contract's key in the mapping
    table.update({(under,): keys_under(Config, under) for under in sections_under(Config)})
    return table


# Every field the config accepts, by section, read off the dataclasses above. The parser
# rejects any other key, and configs/example.yaml documents every one of them (a test walks
# this table).
FIELDS: Mapping[tuple[str, ...], frozenset[str]] = _field_table()
TOP_LEVEL = FIELDS[()]


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

    def names(self, data: Mapping[str, Any], path: Path_, key: str) -> tuple[str, ...]:
        """A list of names (namespaces, partitions, networks ...) as strings."""
        return tuple(str(item) for item in self.seq(data.get(key), (*path, key)))

    def value(self, data: Mapping[str, Any], path: Path_, key: str, spec: Spec,
              default: Any) -> Any:
        """The value at `key` read as `spec` says, `default` when absent; with no default
        (`MISSING`) the key is required."""
        if default is MISSING:
            if data.get(key) is None:
                raise self.fail((*path, key), "is required")
            default = None
        match spec.kind:
            case "string":
                return self.string(data, path, key, default=default)
            case "path":
                given = self.path_value(data, path, key)
                return default if given is None else given
            case "boolean":
                return self.boolean(data, path, key, default)
            case "number":
                if default is None and data.get(key) is None:  # optional: not given
                    return None
                return self.number(data, path, key, default, low=spec.low, high=spec.high)
            case "integer":
                return self.integer(data, path, key, default, low=int(spec.low or 0))
            case "duration":
                return self.duration(data, path, key, default, most=spec.most or MAX_DURATION)
            case "names":
                return self.names(data, path, key) or default
            case "labels":
                labels = self.mapping(data.get(key), (*path, key))
                return {str(a): str(b) for a, b in labels.items()} or default

    def settings(self, data: Mapping[str, Any], path: Path_, cls: type,
                 specs: Mapping[str, Spec] | None = None) -> dict[str, Any]:
        """Every field of dataclass `cls` that has a `Spec` (its metadata's, or the one in
        `specs`), read in declaration order with the dataclass's default. A field written
        `under` another mapping (``planner.depth_premium``) is read from that mapping."""
        out: dict[str, Any] = {}
        for attribute in in_file(cls):
            spec = (specs or {}).get(attribute.name) or spec_of(attribute)
            if spec is None:
                continue
            where, at = data, path
            if spec.under:
                at = (*path, spec.under)
                where = self.mapping(data.get(spec.under), at, allowed=keys_under(cls, spec.under))
            out[attribute.name] = self.value(where, at, spec.key_of(attribute.name), spec,
                                             default_of(attribute))
        return out


def _finite_number(value: object) -> bool:
    """An int or a float that is neither NaN nor infinite (bool is not a number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return math.isfinite(value) if isinstance(value, float) else abs(value) <= MAX_INTEGER


def _rest_api(r: _Reader, text: str | None) -> str | None:
    """`slurm.rest_api_version`: a data-parser version scoctl reads (v0.0.38 or later)."""
    if text is None:
        return None
    version = rest_api_version(text)
    if version is None or version < OLDEST_REST_API:
        raise r.fail(("slurm", "rest_api_version"),
                     f"{text!r}: give a slurmrestd data-parser version v0.0.38 or later "
                     "(e.g. v0.0.40), or leave it out to use the newest the server offers")
    return text.strip()


def _check_ca_cert_hash(r: _Reader, text: str | None) -> None:
    """`bootstrap.ca_cert_hash`: what ``kubeadm token create --print-join-command`` prints."""
    if text is not None and not _CA_HASH.match(text):
        raise r.fail(("bootstrap", "ca_cert_hash"),
                     f"{text!r}: give sha256:<64 hex digits> (kubeadm's discovery hash)")


def _bad_quantity(name: str, value: object) -> bool:
    try:
        parse_resources({name: value})
    except QuantityError:
        return True
    return False


def _region(r: _Reader, raw: Any, path: Path_) -> Region:
    data = r.mapping(raw, path, allowed=FIELDS[("regions", "[]")])
    settings = r.settings(data, path, Region)
    return Region(
        cloud=r.string(data, path, "cloud", default=settings["name"]) or settings["name"],
        launch=_launch(r, data.get("launch"), (*path, "launch")),
        **settings,
    )


def _launch(r: _Reader, raw: Any, path: Path_) -> LaunchSettings | None:
    """A region's launch settings; absent is fine until something launches (`launch_settings`)."""
    if raw is None:
        return None
    launch = r.mapping(raw, path, allowed=FIELDS[("regions", "[]", "launch")])
    if not launch:
        raise r.fail(path, "is empty: give at least the image (or leave launch out)")
    return LaunchSettings(**r.settings(launch, path, LaunchSettings))


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
    bare = Flavor(name=name, vcpus=vcpus, ram=ram, accelerators=accelerators,
                  price=_price(r, data, path))
    if "allocatable" not in data:
        return replace(bare, allocatable=flavor_allocatable(bare, reserve))
    allocatable = r.resources(data["allocatable"], (*path, "allocatable"))
    for res, amount in allocatable.items():
        if amount > bare.capacity.get(res, 0):
            raise r.fail((*path, "allocatable", res), "is larger than the flavor's capacity")
    return replace(bare, allocatable=allocatable)


def _price(r: _Reader, data: Mapping[str, Any], path: Path_) -> float | None:
    """A `price` per unit-hour (any currency; not negative), None when absent."""
    if data.get("price") is None:
        return None
    return r.number(data, path, "price", 0.0, low=0.0)


def _tiers(r: _Reader, root: Mapping[str, Any]) -> dict[str, TierSettings]:
    """``tiers: {reclaimable: {price_factor: 0.3}}``: per tier, its factor on flavor prices."""
    raw = r.mapping(root.get("tiers"), ("tiers",))
    out = {}
    for name, value in raw.items():
        if name not in TIERS:
            raise r.fail(("tiers", str(name)), f"must be one of {', '.join(TIERS)}")
        data = r.mapping(value, ("tiers", str(name)), allowed=FIELDS[("tiers", "*")])
        out[str(name)] = TierSettings(**r.settings(data, ("tiers", str(name)), TierSettings))
    return out


def _contract(r: _Reader, name: str, raw: Any, path: Path_) -> Contract:
    data = r.mapping(raw, path, allowed=FIELDS[("contracts", "*")])
    return Contract(name=name, **r.settings(data, path, Contract, CONTRACT_SPECS))


def _ranking(r: _Reader, raw: Any, path: Path_) -> RankingSource:
    data = r.mapping(raw, path, allowed=FIELDS[("ranking",)])
    # every field's own type first, so a bad value is named before the one-of rule
    settings = r.settings(data, path, RankingSource)
    rid, file, url = settings["id"], settings["file"], settings["url"]
    scores = None
    if data.get("scores") is not None:
        scores = {}
        for key, value in r.mapping(data["scores"], (*path, "scores")).items():
            wrong = score_problem(value)
            if wrong is not None:
                raise r.fail((*path, "scores", str(key)), wrong)
            scores[str(key)] = float(value)
    if sum(x is not None for x in (scores, file, url)) != 1:
        raise r.fail(path, "give exactly one of scores, file or url")
    if scores is not None and not rid:
        raise r.fail((*path, "id"), "is required with inline scores")
    if url and not url.startswith(("http://", "https://")):
        raise r.fail((*path, "url"), "must be an http:// or https:// URL")
    return RankingSource(scores=scores, **settings)


def _workload(r: _Reader, raw: Any, path: Path_, contracts: Mapping[str, Contract],
              disruption: DisruptionSettings) -> WorkloadSpec:
    data = r.mapping(raw, path, allowed=FIELDS[("workloads", "[]")])
    settings = r.settings(data, path, WorkloadSpec)
    name, contract, source = settings["name"], settings["contract"], settings["source"]
    if not is_slug(name):
        raise r.fail((*path, "name"), f"{name!r} is not a slug ([a-z0-9][a-z0-9.-]{{0,46}})")
    if contract not in contracts:
        raise r.fail((*path, "contract"), f"unknown contract {contract!r}")
    if source not in SOURCES:
        raise r.fail((*path, "source"), f"must be one of {', '.join(SOURCES)}")
    default_kind = "job" if source == "slurm" else WorkloadSpec.kind
    kind = r.string(data, path, "kind", default=default_kind) or default_kind
    if kind not in KINDS:
        raise r.fail((*path, "kind"), f"must be one of {', '.join(KINDS)}")
    if settings["isolation"] not in ISOLATIONS:
        raise r.fail((*path, "isolation"), f"must be one of {', '.join(ISOLATIONS)}")
    own = None
    if data.get("disruption") is not None:
        own = _disruption(r, data["disruption"], (*path, "disruption"), disruption)
    limits = _limits(r, data.get("limits"), (*path, "limits"))
    return WorkloadSpec(kind=kind, disruption=own, limits=limits, **settings)


def _limits(r: _Reader, raw: Any, path: Path_) -> Limits:
    """``limits: {cpu, memory, accelerators: {name: count}, units}`` (design: Constraints)."""
    data = r.mapping(raw, path, allowed=_LIMIT_KEYS)
    amounts = {k: data[k] for k in ("cpu", "memory") if data.get(k) is not None}
    resources = r.resources(amounts, path)
    acc_path = (*path, "accelerators")
    for key, value in r.mapping(data.get("accelerators"), acc_path).items():
        resources[str(key)] = r.quantity(value, (*acc_path, str(key)), parse_count)
    units = r.integer(data, path, "units", None) if data.get("units") is not None else None
    return Limits(resources=resources, units=units)


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
    return contracts or {DEFAULT_CONTRACT: Contract(name=DEFAULT_CONTRACT)}


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
    labels = r.mapping(data.get("labels"), (*path, "labels"))
    return Pool(name=name, region=region, az=r.req_string(data, path, "az"), flavor=flavor,
                group=r.req_string(data, path, "group"), tier=tier,
                depth=r.integer(data, path, "depth", 0, low=0),
                labels={str(k): str(v) for k, v in labels.items()},
                limits=_limits(r, data.get("limits"), (*path, "limits")),
                price=_price(r, data, path))


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


def _workloads(r: _Reader, root: Mapping[str, Any], contracts: Mapping[str, Contract],
               disruption: DisruptionSettings) -> tuple[WorkloadSpec, ...]:
    workloads = tuple(_workload(r, raw, ("workloads", i), contracts, disruption)
                      for i, raw in enumerate(r.seq(root.get("workloads"), ("workloads",))))
    _unique(r, [w.name for w in workloads], "workloads")
    return workloads


def _kubernetes(r: _Reader, root: Mapping[str, Any]) -> KubernetesSettings:
    section = _section(r, root, "kubernetes")
    return KubernetesSettings(**r.settings(section, ("kubernetes",), KubernetesSettings))


def _slurm(r: _Reader, root: Mapping[str, Any]) -> SlurmSettings:
    settings = r.settings(_section(r, root, "slurm"), ("slurm",), SlurmSettings)
    settings["rest_api_version"] = _rest_api(r, settings["rest_api_version"])
    slurm = SlurmSettings(**settings)
    if slurm.poll <= 0:  # a controller timer of 0 would poll in a busy loop
        raise r.fail(("slurm", "poll"), "must be more than 0s")
    return slurm


def _bootstrap(r: _Reader, root: Mapping[str, Any]) -> Bootstrap:
    section = _section(r, root, "bootstrap")
    bootstrap = Bootstrap(**r.settings(section, ("bootstrap",), Bootstrap))
    _check_ca_cert_hash(r, bootstrap.ca_cert_hash)
    return bootstrap


def _template_text(path: Path | None) -> str:
    if path is None:
        from importlib import resources  # only a launch or a config lacking join fields

        return resources.files("scoctl.data").joinpath("user-data.yaml").read_text("utf-8")
    return path.read_text(encoding="utf-8")


def _unreadable(exc: OSError | UnicodeDecodeError) -> str:
    return ("cannot read the user-data template: "
            f"{getattr(exc, 'strerror', None) or 'not UTF-8'}")


JOIN_FIELD_HINTS = {
    "api_endpoint": "the host:port of the Kubernetes API the nodes join",
    "ca_cert_hash": "the sha256:<hex> of the cluster CA that "
                    "`kubeadm token create --print-join-command` prints",
}


def _joinable(r: _Reader, config: Config) -> None:
    """A config that serves Kubernetes (`Config.serves_kubernetes`) gives each field its
    user-data template hands the node's ``kubeadm join`` (`JOIN_PLACEHOLDERS`), else every
    Kubernetes node it launches fails to join; the template is read only when one is missing."""
    if not config.serves_kubernetes:
        return
    missing = [(name, placeholder) for name, placeholder in JOIN_PLACEHOLDERS.items()
               if getattr(config.bootstrap, name) is None]
    if not missing:
        return
    try:
        used = placeholders(_template_text(config.bootstrap.user_data_template))
    except (OSError, UnicodeDecodeError) as exc:
        raise r.fail(("bootstrap", "user_data_template"), _unreadable(exc)) from exc
    for name, placeholder in missing:
        if placeholder in used:
            raise r.fail(("bootstrap", name), (
                "is required: the config serves Kubernetes (kubernetes.kubeconfig or "
                "kubernetes.context is set, or a workload has source k8s) and the user-data "
                f"template hands ${placeholder} to the node's kubeadm join; give "
                f"{JOIN_FIELD_HINTS[name]} (or a user_data_template without ${placeholder})"))


def _timeouts(r: _Reader, root: Mapping[str, Any]) -> Timeouts:
    timeouts = Timeouts(**r.settings(_section(r, root, "timeouts"), ("timeouts",), Timeouts))
    for name in ("api", "run"):  # 0 would mean "no time at all", not "no limit"
        if getattr(timeouts, name) <= 0:
            raise r.fail(("timeouts", name), "must be more than 0")
    if timeouts.reconcile_interval <= 0:  # a controller timer of 0 would poll in a busy loop
        raise r.fail(("timeouts", "reconcile_interval"), "must be more than 0s")
    return timeouts


def _gate(r: _Reader, root: Mapping[str, Any]) -> GateSettings:
    gate = GateSettings(**r.settings(_section(r, root, "gate"), ("gate",), GateSettings))
    if gate.timeout <= 0:
        raise r.fail(("gate", "timeout"), "must be more than 0")
    return gate


def _intake(r: _Reader, root: Mapping[str, Any]) -> Intake:
    intake = Intake(**r.settings(_section(r, root, "intake"), ("intake",), Intake))
    if intake.batch_max > 10:
        raise r.fail(("intake", "batch_max"), "must be at most 10s (steps 1-8 stay under 10 s)")
    if intake.batch_idle > intake.batch_max:
        raise r.fail(("intake", "batch_idle"), "must not exceed intake.batch_max")
    return intake


def _gang(r: _Reader, root: Mapping[str, Any]) -> Gang:
    gang = Gang(**r.settings(_section(r, root, "gang"), ("gang",), Gang))
    if gang.placement not in PLACEMENTS:
        raise r.fail(("gang", "placement"), f"must be one of {', '.join(PLACEMENTS)}")
    if gang.deadline <= 0:
        raise r.fail(("gang", "deadline"), "must be more than 0s")
    if gang.backoff <= 0:
        raise r.fail(("gang", "backoff"), "must be more than 0s")
    return gang


def _quota_block(r: _Reader, quota_block: str) -> Literal["fail", "queue"]:
    if quota_block == "queue":
        return "queue"
    if quota_block != "fail":
        raise r.fail(("quota_block",), "must be fail or queue")
    return "fail"


def _lease(r: _Reader, root: Mapping[str, Any]) -> Lease:
    lease = Lease(**r.settings(_section(r, root, "lease"), ("lease",), Lease))
    if not 1 <= lease.ttl <= 300:
        raise r.fail(("lease", "ttl"), "must be between 1s and 5m")
    return lease


# How the file gives the plain knobs of `disruption` (core values, as `CONTRACT_SPECS`)
DISRUPTION_SPECS: Mapping[str, Spec] = {"repair_after": Spec("duration")}
DRIFT_SPECS: Mapping[str, Spec] = {"soak": Spec("duration"), "halt_after": Spec("integer", low=1)}
REBALANCE_SPECS: Mapping[str, Spec] = {
    "stabilize": Spec("duration"), "min_age": Spec("duration"),
    "min_gain": Spec("number", low=0, high=1e9),
}
_PERCENT = re.compile(r"^\s*(\d{1,3}(?:\.\d{1,6})?)\s*%\s*$")
_NEVER_HELD = DisruptionReason.NOTICED  # never held back (design: Notices): no budget names it


def _disruption_section(r: _Reader, root: Mapping[str, Any]) -> DisruptionSettings:
    """The top-level `disruption` block; legacy `disruption_budget: 0.5` is its budgets
    ``[{units: "50%"}]`` (both at once: exit 2 naming both)."""
    legacy = next(f for f in fields(Config) if f.name == "disruption_budget")
    spec = spec_of(legacy)
    assert spec is not None
    share = r.value(root, (), legacy.name, spec, None)
    settings = _disruption(r, root.get("disruption"), ("disruption",), DisruptionSettings())
    if share is None:
        return settings
    given = r.mapping(root.get("disruption"), ("disruption",))
    if given.get("budgets") is not None:
        raise r.fail(("disruption_budget",), (
            "and disruption.budgets are both given: keep disruption.budgets (disruption_budget: "
            f"{share:g} is disruption.budgets [{{units: \"{share * 100:g}%\"}}])"))
    return replace(settings, budgets=(Budget(Units.share(Decimal(repr(share)) * 100)),))


def _disruption(r: _Reader, raw: Any, path: Path_, base: DisruptionSettings) -> DisruptionSettings:
    """A `disruption` block over `base` (the defaults, or for a workload the top level): each
    key it gives replaces base's, `drift` and `rebalance` key by key, `budgets` as a whole."""
    section = ("workloads", "[]", "disruption") if path[0] == "workloads" else ("disruption",)
    data = r.mapping(raw, path, allowed=FIELDS[section])
    out = _override(r, data, path, base, DISRUPTION_SPECS)
    if out["repair_after"] <= 0:
        raise r.fail((*path, "repair_after"), "must be more than 0s")
    if "budgets" in data:
        items = r.seq(data["budgets"], (*path, "budgets"))
        out["budgets"] = tuple(_budget(r, raw_budget, (*path, "budgets", i), (*section, "budgets"))
                               for i, raw_budget in enumerate(items))
    if data.get("expire_after") is not None:
        out["expire_after"] = r.duration(data, path, "expire_after", 0.0)
        if out["expire_after"] <= 0:
            raise r.fail((*path, "expire_after"), "must be more than 0s (or null: never)")
    elif "expire_after" in data:
        out["expire_after"] = None
    if "repair_max_unhealthy" in data:
        out["repair_max_unhealthy"] = _units(r, data["repair_max_unhealthy"],
                                             (*path, "repair_max_unhealthy"))
    for key, specs in (("drift", DRIFT_SPECS), ("rebalance", REBALANCE_SPECS)):
        if data.get(key) is not None:
            inner = r.mapping(data[key], (*path, key), allowed=FIELDS[(*section, key)])
            current = getattr(base, key)
            out[key] = replace(current, **_override(r, inner, (*path, key), current, specs))
    return replace(base, **out)


def _override(r: _Reader, data: Mapping[str, Any], path: Path_, base: object,
              specs: Mapping[str, Spec]) -> dict[str, Any]:
    """The `specs` fields of `data`, each defaulting to `base`'s value."""
    return {key: r.value(data, path, key, spec, getattr(base, key))
            for key, spec in specs.items()}


def _budget(r: _Reader, raw: Any, path: Path_, section: tuple[str, ...]) -> Budget:
    """One budget: `units` (required), `reasons`, `schedule` with `duration` (both or
    neither) and `time_zone`, `rate`."""
    data = r.mapping(raw, path, allowed=FIELDS[(*section, "[]")])
    if data.get("units") is None:
        raise r.fail((*path, "units"), 'is required: a count (2) or a percentage ("10%")')
    units = _units(r, data["units"], (*path, "units"))
    reasons = frozenset(_reason(r, item, (*path, "reasons", i)) for i, item in enumerate(
        r.seq(data.get("reasons"), (*path, "reasons"))))
    schedule, duration, zone = _window(r, data, path)
    rate = None
    if data.get("rate") is not None:
        rate = _rate(r, data["rate"], (*path, "rate"), (*section, "[]", "rate"))
    return Budget(units=units, reasons=reasons, schedule=schedule, duration=duration,
                  time_zone=zone or "UTC", rate=rate)


def _rate(r: _Reader, raw: Any, path: Path_, section: tuple[str, ...]) -> Rate:
    data = r.mapping(raw, path, allowed=FIELDS[section])
    units = None if data.get("units") is None else _units(r, data["units"], (*path, "units"))
    per = None if data.get("per") is None else r.duration(data, path, "per", 0.0)
    if units is None or per is None:
        raise r.fail((*path, "units" if units is None else "per"),
                     "is required in a rate ({units: 3, per: 10m})")
    if per <= 0:
        raise r.fail((*path, "per"), "must be more than 0s")
    return Rate(units=units, per=per)


def _units(r: _Reader, value: Any, path: Path_) -> Units:
    """A count (a whole number, or its digits as text) or a percentage ``"10%"`` (0-100, up
    to 6 decimals)."""
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INTEGER:
        return Units.count(value)
    if isinstance(value, str):
        if value.strip().isdigit() and int(value) <= MAX_INTEGER:
            return Units.count(int(value))
        match = _PERCENT.match(value)
        if match and Decimal(match.group(1)) <= 100:
            return Units.share(Decimal(match.group(1)))
    raise r.fail(path, f'must be a count (2) or a percentage from 0% to 100% ("10%"), '
                       f"not {value!r}")


def _reason(r: _Reader, value: Any, path: Path_) -> DisruptionReason:
    known = [x.value for x in DisruptionReason if x is not _NEVER_HELD]
    if value == _NEVER_HELD.value:
        raise r.fail(path, "noticed is never held back (a reclaim notice); a budget naming no "
                           "reason counts it")
    if not isinstance(value, str) or value not in known:
        raise r.fail(path, f"unknown reason {value!r} (one of: {', '.join(known)})")
    return DisruptionReason(value)


def _buffers(r: _Reader, root: Mapping[str, Any],
             workloads: tuple[WorkloadSpec, ...]) -> tuple[Buffer, ...]:
    """`buffers:` (design: Buffers), each naming a configured workload, at most one per workload."""
    names = {w.name for w in workloads}
    out: list[Buffer] = []
    seen: dict[str, int] = {}
    for i, raw in enumerate(r.seq(root.get("buffers"), ("buffers",))):
        path: Path_ = ("buffers", i)
        buffer = _buffer(r, raw, path)
        if buffer.workload not in names:
            raise r.fail((*path, "workload"), f"unknown workload {buffer.workload!r} (a "
                         "buffer names one of workloads[].name)")
        if buffer.workload in seen:
            raise r.fail((*path, "workload"), f"a second buffer for {buffer.workload!r} "
                         f"(first at buffers[{seen[buffer.workload]}])")
        seen[buffer.workload] = i
        out.append(buffer)
    return tuple(out)


def _buffer(r: _Reader, raw: Any, path: Path_) -> Buffer:
    """One buffer: `workload` (required), `chunk` (null: the largest pod), `replicas`,
    `percentage` (of the workload's pods, 0-100 or "20%"), `limits`, `tier` (any, committed
    or reclaimable: the pools it is planned in), and a window as a disruption budget's:
    `schedule` with `duration` (both or neither), `time_zone`."""
    data = r.mapping(raw, path, allowed=FIELDS[("buffers", "[]")])
    workload = r.req_string(data, path, "workload")
    chunk = None
    if data.get("chunk") is not None:
        chunk_path = (*path, "chunk")
        given = r.mapping(data["chunk"], chunk_path, allowed=_CHUNK_KEYS)
        chunk = r.resources({k: given[k] for k in ("cpu", "memory")
                             if given.get(k) is not None}, chunk_path)
        acc_path = (*chunk_path, "accelerators")
        for key, value in r.mapping(given.get("accelerators"), acc_path).items():
            chunk[str(key)] = r.quantity(value, (*acc_path, str(key)), parse_count)
        chunk = {k: v for k, v in chunk.items() if v}
        if not chunk:
            raise r.fail(chunk_path, "gives no resource: give cpu, memory or accelerators, "
                         "or null for the workload's largest pod")
    replicas = r.integer(data, path, "replicas", 0)
    percentage = _percentage(r, data.get("percentage"), (*path, "percentage"))
    limits = _limits(r, data.get("limits"), (*path, "limits"))
    tier = r.string(data, path, "tier", default="any")
    if tier not in BUFFER_TIERS:
        raise r.fail((*path, "tier"), f"must be one of {', '.join(BUFFER_TIERS)}, not {tier!r}")
    schedule, duration, zone = _window(r, data, path)
    if not replicas and not percentage:
        raise r.fail(path, "wants no chunk: give replicas or percentage")
    return Buffer(workload=workload, chunk=chunk, replicas=replicas, percentage=percentage,
                  limits=limits, tier=tier, schedule=schedule, duration=duration,
                  time_zone=zone or "UTC")


def _percentage(r: _Reader, value: Any, path: Path_) -> float:
    """A percentage: a number 0-100 or its text with ``%`` (``"20%"``)."""
    if value is None:
        return 0.0
    text = value[:-1].strip() if isinstance(value, str) and value.endswith("%") else value
    try:
        share = float(text) if not isinstance(text, bool) else math.nan
    except (TypeError, ValueError):
        share = math.nan
    if not math.isfinite(share) or not 0 <= share <= 100:
        raise r.fail(path, f'must be a percentage from 0 to 100 (20 or "20%"), not {value!r}')
    return share


def _window(r: _Reader, data: Mapping[str, Any],
            path: Path_) -> tuple[Cron | None, float | None, str | None]:
    """A window's `schedule` (5-field cron), `duration` and `time_zone` (IANA; only with a
    schedule): both of the first two or neither (a budget's, a buffer's)."""
    text = r.string(data, path, "schedule")
    schedule = None
    if text is not None:
        try:
            schedule = parse_cron(text)
        except CronError as exc:
            raise r.fail((*path, "schedule"), str(exc)) from exc
    duration = None
    if data.get("duration") is not None:
        duration = r.duration(data, path, "duration", 0.0)
        if duration <= 0:
            raise r.fail((*path, "duration"), "must be more than 0s")
    if schedule is not None and duration is None:
        raise r.fail((*path, "duration"), "is required with schedule (how long each window is)")
    if duration is not None and schedule is None:
        raise r.fail((*path, "schedule"), "is required with duration (when each window starts)")
    zone = r.string(data, path, "time_zone")
    if zone is not None:
        if schedule is None:
            raise r.fail((*path, "time_zone"), "applies only with schedule")
        _check_zone(r, zone, (*path, "time_zone"))
    return schedule, duration, zone


def _check_zone(r: _Reader, zone: str, path: Path_) -> None:
    """An IANA time zone name the tz database on this host knows (``Europe/Berlin``)."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError  # only a config with a window

    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise r.fail(path, f"unknown time zone {zone!r} (an IANA name, e.g. Europe/Berlin)"
                     ) from exc


def parse_config(doc: Located, *, path: Path | None,
                 deferred: list[ConfigError] | None = None) -> Config:
    """Validate a parsed document into a Config; raises ConfigError naming file, line and field.

    One small reader per section, then the top-level fields in `Config`'s order (`_top_level`);
    they run in the order below, so the first bad field (in that order) is the one reported;
    then the checks across sections (`_joinable`). Those only matter to launching: with a
    `deferred` list (a command that only reads the state), their error is added to it
    instead of raised.
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
    ranking = _ranking_section(r, root)
    disruption = _disruption_section(r, root)
    config = Config(
        path=path,
        ranking=ranking,
        disruption=disruption,
        workloads=_workloads(r, root, contracts, disruption),
        kubernetes=_kubernetes(r, root),
        slurm=_slurm(r, root),
        bootstrap=_bootstrap(r, root),
        timeouts=_timeouts(r, root),
        intake=_intake(r, root),
        gang=_gang(r, root),
        gate=_gate(r, root),
        state=_state(r, root),
        lease=_lease(r, root),
        regions=regions,
        flavors=flavors,
        pools=pools,
        contracts=contracts,
        node_reserve=reserve,
        retention=_retention(r, root),
        tiers=_tiers(r, root),
        **_top_level(r, root),
    )
    config = replace(config, buffers=_buffers(r, root, config.workloads))
    try:
        _joinable(r, config)  # across sections: once every field is read
    except ConfigError as exc:
        if deferred is None:
            raise
        deferred.append(exc)
    return config


def _top_level(r: _Reader, root: Mapping[str, Any]) -> dict[str, Any]:
    """The top-level fields `Config` declares a `Spec` for, with those it keeps in a mapping
    of their own (``planner.depth_premium``, ``metrics.textfile``)."""
    settings = r.settings(root, (), Config)
    settings["quota_block"] = _quota_block(r, settings["quota_block"])
    return settings


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
    retention = Retention(**r.settings(_section(r, root, "retention"), ("retention",),
                                       Retention))
    if retention.events < EVENTS_FLOOR:
        raise r.fail(("retention", "events"),
                     "must be at least 1d (the state always keeps a day of events)")
    return retention


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


def load_config(path: Path | None, deferred: list[ConfigError] | None = None) -> Config:
    """Load and validate the config at `path`, or the bundled demo config when None; with
    `deferred`, the checks that only matter to launching add their error there
    (`parse_config`)."""
    if path is None:
        return parse_config(load_located(demo_config_text(), "<bundled demo.yaml>"), path=None,
                            deferred=deferred)
    # the parse is cached per user by the text's hash (the Slurm gate then imports no YAML)
    return parse_config(load_located(read_text(path, "config"), str(path), cache=True),
                        path=path, deferred=deferred)


def resolve_config_path(option: Path | None) -> tuple[Path | None, str | None]:
    """design: CLI order: --config, $SCOCTL_CONFIG, /etc/scoctl/config.yaml, bundled demo.

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
