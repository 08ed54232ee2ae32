"""The acquire stage (placement steps 9-12): the latest plan into Nova instances.

read: the latest plan, live and in-flight units (`fleet.units_of`), Slurm node names still
waiting for a server, Nova's quota headroom · decide: `core.diff.launches_needed`, then
`clamp_to_headroom` (pure) · act: one multi-create per (workload, pool) batch, or one create per
Slurm CLOUD node, each preceded by its launch intent in its own committed transaction · record:
the servers as instances and the launch as `recorded`.

Then the new servers are watched for a short, bounded time (polled by their `sco:launch` tag):
a server in ERROR is read by id for its fault. A capacity fault (NoValidHost, any non-quota
fault) puts the pool on the negative cache, deletes the ERROR servers (through the token budget)
and re-plans the workload without the pool in the same run, then launches the fallback. A quota
fault (Nova's asynchronous recheck, 413) or a 403 is recorded as `QUOTA_EXCEEDED`; the pool
stays eligible and the ERROR servers are deleted.

A Slurm CLOUD node whose launch failed for sure (a 403 quota answer, a refused call, servers
failing the quota recheck) goes back to powered-down (``scontrol update
State=POWER_DOWN_FORCE``, never DOWN) and leaves its claim, so Slurm requeues its job and can
resume the node again later (DESIGN §11). A capacity fault does not: the same-run fallback
launches the node in another pool.

Nothing is launched twice: a launch intent still in flight counts as units, and the next acquire
adopts the servers carrying its `sco:launch` tag (reconcile does the same, or fails the intent
after the launch timeout). When the plan needs nothing, no cloud call is made at all.

Test hook: the environment variable ``SCOCTL_CRASH_AT`` set to ``after-intent`` (the intent is
committed, the call not made) or ``after-call`` (the call returned, nothing recorded) makes the
process kill itself with SIGKILL at that point, so the crash-safety tests can kill a real
``scoctl acquire`` exactly there. Never set it in production.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from importlib import resources
from typing import TYPE_CHECKING, Protocol

from scoctl.adapters.cloud import Cloud, check_tags
from scoctl.clock import Clock, rfc3339
from scoctl.config.schema import Config, LaunchSettings, Region
from scoctl.core.diff import LaunchPlan, Shortfall, clamp_to_headroom, launches_needed
from scoctl.core.fleet import IN_FLIGHT_LAUNCHES, LIVE_STATUSES, units_of
from scoctl.core.model import (
    InstanceRecord,
    LaunchRecord,
    LaunchRequest,
    Networks,
    Pool,
    ServerInfo,
)
from scoctl.core.userdata import BootContract, redacted, render_user_data
from scoctl.errors import (
    ApiError,
    ConfigError,
    InsufficientCapacity,
    PermanentError,
    QuotaExceeded,
    TemporaryError,
)
from scoctl.host.budget import TokenBudget
from scoctl.stages.join_tokens import JoinTokens
from scoctl.state import Store

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler

log = logging.getLogger(__name__)

CRASH_ENV = "SCOCTL_CRASH_AT"
DEFAULT_WATCH_S = 15.0
DEFAULT_POLL_S = 1.0
MAX_ROUNDS = 3  # the first launch and at most two same-run fallbacks
TAG_CHUNK = 25  # launch tags per `tags-any` poll query (keeps the URL short)

NOVA_STATUS = {"BUILD": "building", "ACTIVE": "active", "ERROR": "error", "DELETED": "deleted"}

CloudFactory = Callable[[Config, Region, TokenBudget], Cloud]


def default_connect(config: Config, region: Region, budget: TokenBudget) -> Cloud:
    """The Nova adapter of `region`, spending `budget` on every mutating call attempt."""
    from scoctl.adapters.factory import cloud_for

    return cloud_for(config, region, budget=budget)


def default_budget(config: Config, region: Region) -> TokenBudget:
    """The host-wide token budget of `region`."""
    from scoctl.host.budget import budget_for

    return budget_for(config, region)


class Observer(Protocol):
    """Told about progress (the CLI draws a progress bar from it)."""

    def round_started(self, round_no: int, instances: int) -> None:
        """A round of launches for `instances` instances begins (round 0: the plan)."""
        ...

    def launched(self, outcome: LaunchOutcome) -> None:
        """One launch call finished (recorded, failed or left in flight)."""
        ...

    def round_done(self) -> None:
        """The round's launches are all made."""
        ...


@dataclass(frozen=True)
class CallSpec:
    """One create call as a dry-run shows it (user-data with the join secret redacted)."""

    region: str
    workload: str
    pool: str
    name: str
    flavor: str
    image: str
    az: str
    networks: Networks
    min_count: int
    max_count: int
    tags: tuple[str, ...]
    metadata: Mapping[str, str]
    user_data: str
    node_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class LaunchOutcome:
    """What one launch did. `status`: recorded, adopted, failed, or intent (left in flight)."""

    launch_id: str
    region: str
    workload: str
    pool: str
    generation: int
    requested: int
    created: int
    status: str
    reservation_id: str | None = None
    server_ids: tuple[str, ...] = ()
    node_names: tuple[str, ...] = ()
    error: str | None = None
    round_no: int = 0


@dataclass(frozen=True)
class ExclusionOutcome:
    """A pool put on the negative cache by a capacity fault."""

    pool: str
    reason: str
    until: str
    workloads: tuple[str, ...]


@dataclass(frozen=True)
class QuotaFault:
    """A launch Nova refused (403) or whose servers failed its quota recheck (ERROR, 413)."""

    workload: str
    pool: str
    launch_id: str
    servers: int
    message: str
    asynchronous: bool


@dataclass(frozen=True)
class AcquireResult:
    """Everything one acquire run did (or, with `dry_run`, would do)."""

    dry_run: bool
    generation: int
    launches: tuple[LaunchOutcome, ...] = ()
    planned: tuple[CallSpec, ...] = ()
    shortfalls: tuple[Shortfall, ...] = ()
    exclusions: tuple[ExclusionOutcome, ...] = ()
    quota_faults: tuple[QuotaFault, ...] = ()
    replanned: tuple[str, ...] = ()
    powered_down: tuple[str, ...] = ()  # Slurm nodes handed back after a failed launch
    errors: tuple[str, ...] = ()
    calls: int = 0  # mutating call attempts (tokens spent), retries included
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """False when a call failed for a reason other than quota or capacity."""
        return not self.errors


@dataclass
class _Collected:
    launches: list[LaunchOutcome] = field(default_factory=list)
    planned: list[CallSpec] = field(default_factory=list)
    shortfalls: list[Shortfall] = field(default_factory=list)
    exclusions: list[ExclusionOutcome] = field(default_factory=list)
    quota_faults: list[QuotaFault] = field(default_factory=list)
    replanned: list[str] = field(default_factory=list)
    powered_down: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def crash_point(name: str) -> None:
    """Test hook: SIGKILL this process when ``SCOCTL_CRASH_AT`` names this point."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)


def new_launch_id() -> str:
    """A unique launch id, ``l-<12 hex>``."""
    return "l-" + secrets.token_hex(6)


def launch_tags(plan: LaunchPlan, launch_id: str) -> tuple[str, ...]:
    """The tags every scoctl server carries (checked against Nova's rules by the caller)."""
    return ("sco:managed", f"sco:workload={plan.workload}", f"sco:pool={plan.pool}",
            f"sco:gen={plan.generation}", f"sco:launch={launch_id}")


def launch_metadata(plan: LaunchPlan, launch_id: str) -> dict[str, str]:
    """The same facts as metadata (`sco:workload` ...), readable without the tags API."""
    return {"sco:managed": "true", "sco:workload": plan.workload, "sco:pool": plan.pool,
            "sco:gen": str(plan.generation), "sco:launch": launch_id}


def server_name(plan: LaunchPlan, launch_id: str) -> str:
    """``sco-<workload>-<launch>`` (Nova adds ``-<i>``), or the Slurm node's own name."""
    return plan.node_names[0] if plan.node_names else f"sco-{plan.workload}-{launch_id}"


def networks_of(launch: LaunchSettings) -> Networks:
    """A region's networks; none configured, or the single word auto/none, map to Nova's."""
    nets = launch.networks
    if not nets:
        return "none"
    if len(nets) == 1 and nets[0] in ("auto", "none"):
        return "auto" if nets[0] == "auto" else "none"
    return tuple(nets)


def user_data_template(config: Config) -> str:
    """The configured template (bootstrap.user_data_template), else the packaged one."""
    path = config.bootstrap.user_data_template
    if path is None:
        return resources.files("scoctl.data").joinpath("user-data.yaml").read_text("utf-8")
    try:
        return path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the user-data template: {exc.strerror}",
                          file=config.source_name,
                          field="bootstrap.user_data_template") from exc


def join_secret(config: Config) -> str | None:
    """The join secret, read at render time; a missing file means none (with a warning)."""
    path = config.bootstrap.join_secret_file
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError as exc:
        log.warning("join secret file %s unreadable (%s): launching without a join secret",
                    path, exc.strerror)
        return None


class _RegionRun:
    """One region's pass: adopt, decide, clamp, launch, watch, fall back."""

    def __init__(self, config: Config, store: Store, clock: Clock, region: Region, *,
                 dry_run: bool, connect: CloudFactory, budget: TokenBudget, watch: float,
                 poll: float, sleep: Callable[[float], None], observer: Observer | None,
                 collected: _Collected, texts: _Texts,
                 scheduler: BatchScheduler | None = None) -> None:
        self.config, self.store, self.clock, self.region = config, store, clock, region
        self.scheduler = scheduler
        self.dry_run, self.connect, self.budget = dry_run, connect, budget
        self.watch_s, self.poll_s, self.sleep, self.observer = watch, poll, sleep, observer
        self.out, self.texts = collected, texts
        self.pools = {p.name: p for p in config.pools if p.region == region.name}
        self.contracts: dict[str, str] = {}
        self._cloud: Cloud | None = None

    @property
    def cloud(self) -> Cloud:
        if self._cloud is None:
            self._cloud = self.connect(self.config, self.region, self.budget)
        return self._cloud

    def now(self) -> str:
        return rfc3339(self.clock.now())

    # ------------------------------------------------------------------ the pass

    def run(self) -> None:
        if not self.dry_run:
            self.adopt_intents()
        scope: set[str] | None = None
        for round_no in range(MAX_ROUNDS):
            wanted = self.decide(scope)
            if not wanted:
                return
            launches = self.clamp(wanted)
            if self.dry_run:
                self.out.planned.extend(self.spec(p, "l-dryrun000000")[1] for p in launches)
                return
            if not launches:
                return
            if self.observer is not None:
                self.observer.round_started(round_no, sum(p.count for p in launches))
            outcomes = []
            for plan in launches:
                outcome = self.launch(plan, round_no)
                outcomes.append(outcome)
                self.out.launches.append(outcome)
                if self.observer is not None:
                    self.observer.launched(outcome)
            if self.observer is not None:
                self.observer.round_done()
            lost = self.watch(outcomes)
            if not lost:
                return
            scope = self.replan(lost)
            if not scope:
                return

    # ------------------------------------------------------------------ read + decide

    def decide(self, scope: set[str] | None) -> list[LaunchPlan]:
        """Launches that bring live + in-flight units up to the plan, in this region."""
        plans = self.store.plans()
        self.contracts = {name: record.contract for name, record in plans.items()}
        targets = {
            name: {u.pool: u.units for u in record.pools if u.pool in self.pools}
            for name, record in plans.items() if scope is None or name in scope
        }
        targets = {name: pools for name, pools in targets.items() if pools}
        if not targets:
            return []
        # One read of the instances and in-flight launches serves both the units and the
        # Slurm node names they hold; the decision itself is `core.diff.launches_needed`.
        instances = self.store.instances()
        in_flight = self.store.launches(status=IN_FLIGHT_LAUNCHES)
        claim_nodes = {}
        for name in targets:
            claim = self.store.claim(name)
            if claim is not None and claim.nodes:
                claim_nodes[name] = list(claim.nodes)
        held: dict[str, set[str]] = {}
        if claim_nodes:
            for inst in instances:
                if inst.workload and inst.node_name and inst.status in LIVE_STATUSES:
                    held.setdefault(inst.workload, set()).add(inst.node_name)
            for launch in in_flight:
                held.setdefault(launch.workload, set()).update(launch.node_names)
        return launches_needed(targets, units_of(instances, in_flight), self.pools,
                               {name: plans[name].generation for name in targets},
                               claim_nodes=claim_nodes, held_nodes=held)

    def clamp(self, launches: list[LaunchPlan]) -> list[LaunchPlan]:
        """Fit the launches into Nova's quota headroom; record each shortfall."""
        kept, short = clamp_to_headroom(launches, self.config.flavors, self.cloud.headroom())
        self.out.shortfalls.extend(short)
        if short and not self.dry_run:
            with self.store.transaction():
                for s in short:
                    self.store.append_event(s.workload, "QUOTA_SHORTFALL", "warning", None, {
                        "pool": s.pool, "wanted": s.wanted, "allowed": s.allowed,
                        "limit": s.limit, "region": self.region.name})
        return kept

    def spec(self, plan: LaunchPlan, launch_id: str) -> tuple[LaunchRequest, CallSpec]:
        """The create request for `plan` and its printable form (secret redacted)."""
        pool: Pool = self.pools[plan.pool]
        contract = BootContract(
            workload=plan.workload, contract=self.contracts.get(plan.workload, ""),
            pool=plan.pool, tier=plan.tier, generation=plan.generation, launch=launch_id,
            region=plan.region, az=plan.az, flavor=plan.flavor,
            slurm_node_name=plan.node_names[0] if plan.node_names else None,
            slurm_features=(pool.name, pool.flavor, pool.tier) if plan.node_names else ())
        secret = None if self.dry_run else self.texts.tokens.credential(
            launch_id, plan.workload, slurm_node=bool(plan.node_names))
        secret = secret or self.texts.secret()
        boot = self.config.bootstrap
        user_data = render_user_data(self.texts.template(), contract, secret,
                                     join_endpoint=boot.api_endpoint,
                                     join_ca_hash=boot.ca_cert_hash)
        tags = launch_tags(plan, launch_id)
        check_tags(tags)
        launch = self.config.launch_settings(self.region)
        request = LaunchRequest(
            name=server_name(plan, launch_id), flavor=plan.flavor, image=launch.image,
            networks=networks_of(launch), az=plan.az or None, min_count=1,
            max_count=plan.count, tags=tags, metadata=launch_metadata(plan, launch_id),
            user_data=user_data, security_groups=launch.security_groups,
            key_name=launch.key_name, server_group=launch.server_group)
        shown = CallSpec(
            region=self.region.name, workload=plan.workload, pool=plan.pool, name=request.name,
            flavor=plan.flavor, image=launch.image, az=plan.az, networks=request.networks,
            min_count=1, max_count=plan.count, tags=tags, metadata=dict(request.metadata),
            user_data=redacted(user_data, secret), node_names=plan.node_names)
        return request, shown

    # ------------------------------------------------------------------ act + record

    def launch(self, plan: LaunchPlan, round_no: int) -> LaunchOutcome:
        """Intent (committed), call, record. Quota and call failures become outcomes."""
        launch_id = new_launch_id()
        request, _ = self.spec(plan, launch_id)
        now = self.now()
        self.store.add_launch(LaunchRecord(
            launch_id=launch_id, region=self.region.name, workload=plan.workload,
            pool=plan.pool, generation=plan.generation, count=plan.count, status="intent",
            created=now, updated=now, node_names=plan.node_names))
        crash_point("after-intent")
        base = LaunchOutcome(launch_id=launch_id, region=self.region.name,
                             workload=plan.workload, pool=plan.pool,
                             generation=plan.generation, requested=plan.count, created=0,
                             status="failed", node_names=plan.node_names, round_no=round_no)
        try:
            result = self.cloud.launch(request)
        except QuotaExceeded as exc:
            message = str(exc)
            self.texts.tokens.revoke(launch_id)
            with self.store.transaction():
                self.store.update_launch(launch_id, status="failed", error=message)
                self.store.append_event(plan.workload, "QUOTA_EXCEEDED", "warning", None, {
                    "pool": plan.pool, "launch": launch_id, "requested": plan.count,
                    "message": message, "region": self.region.name})
            self.out.quota_faults.append(QuotaFault(plan.workload, plan.pool, launch_id, 0,
                                                    message, asynchronous=False))
            self.release_nodes(plan.node_names, "launch refused: quota exceeded")
            return replace(base, error=message)
        except TemporaryError as exc:
            # The call may have reached Nova (a 500, a timeout): adopt what carries the tag,
            # else leave the intent in flight for reconcile (never launch it again).
            return self.unsure(plan, base, str(exc))
        except (PermanentError, ConfigError) as exc:
            message = str(exc)
            self.texts.tokens.revoke(launch_id)
            with self.store.transaction():
                self.store.update_launch(launch_id, status="failed", error=message)
                self.store.append_event(plan.workload, "LAUNCH_FAILED", "error", None, {
                    "pool": plan.pool, "launch": launch_id, "message": message})
            self.release_nodes(plan.node_names, "launch refused")
            if isinstance(exc, ConfigError):
                raise
            self.out.errors.append(f"{plan.workload}/{plan.pool}: {message}")
            return replace(base, error=message)
        crash_point("after-call")
        return self.record(plan, launch_id, list(result.servers), result.reservation_id,
                           round_no, adopted=result.adopted)

    def unsure(self, plan: LaunchPlan, base: LaunchOutcome, message: str) -> LaunchOutcome:
        try:
            found = self.cloud.servers(tags=[f"sco:launch={base.launch_id}"])
        except TemporaryError:
            found = []
        if found:
            return self.record(plan, base.launch_id, found, found[0].reservation_id,
                               base.round_no, adopted=True)
        self.store.update_launch(base.launch_id, status="intent", error=message)
        self.out.errors.append(f"{plan.workload}/{plan.pool}: {message} (left in flight)")
        return replace(base, status="intent", error=message)

    def record(self, plan: LaunchPlan, launch_id: str, servers: list[ServerInfo],
               reservation_id: str | None, round_no: int, *, adopted: bool) -> LaunchOutcome:
        """Write the servers as instances and the launch as recorded, in one transaction."""
        now = self.now()
        ordered = sorted(servers, key=lambda s: s.name)
        with self.store.transaction():
            for index, server in enumerate(ordered):
                node = plan.node_names[index] if index < len(plan.node_names) else None
                self.store.upsert_instance(InstanceRecord(
                    id=server.id, name=server.name, region=self.region.name,
                    workload=plan.workload, pool=plan.pool, generation=plan.generation,
                    launch_id=launch_id, status=NOVA_STATUS.get(server.status, "active"),
                    created=now, updated=now, node_name=node))
            self.store.update_launch(launch_id, status="recorded",
                                     reservation_id=reservation_id or None)
            self.store.append_event(
                plan.workload, "LAUNCH_ADOPTED" if adopted else "INSTANCES_LAUNCHED", "info",
                None, {"pool": plan.pool, "launch": launch_id, "requested": plan.count,
                       "created": len(ordered), "reservation": reservation_id,
                       "region": self.region.name})
            if len(ordered) < plan.count:
                # Nova shrank max_count to its own quota headroom.
                self.store.append_event(plan.workload, "QUOTA_SHORTFALL", "warning", None, {
                    "pool": plan.pool, "wanted": plan.count, "allowed": len(ordered),
                    "limit": "nova", "launch": launch_id})
                self.out.shortfalls.append(Shortfall(plan.workload, plan.pool, plan.count,
                                                     len(ordered), "nova"))
        return LaunchOutcome(
            launch_id=launch_id, region=self.region.name, workload=plan.workload,
            pool=plan.pool, generation=plan.generation, requested=plan.count,
            created=len(ordered), status="adopted" if adopted else "recorded",
            reservation_id=reservation_id, server_ids=tuple(s.id for s in ordered),
            node_names=plan.node_names, round_no=round_no)

    def adopt_intents(self) -> None:
        """Launches left in flight by a crash: record the servers carrying their tag."""
        intents = [launch for launch in self.store.launches(status=IN_FLIGHT_LAUNCHES)
                   if launch.region == self.region.name]
        for launch in intents:
            found = self.cloud.servers(tags=[f"sco:launch={launch.launch_id}"])
            if not found:
                continue  # not (yet) at Nova: reconcile fails it after the launch timeout
            pool = self.pools.get(launch.pool)
            plan = LaunchPlan(workload=launch.workload, pool=launch.pool,
                              region=launch.region, az=pool.az if pool else "",
                              flavor=pool.flavor if pool else "",
                              tier=pool.tier if pool else "", generation=launch.generation,
                              count=launch.count, node_names=launch.node_names)
            outcome = self.record(plan, launch.launch_id, found, found[0].reservation_id, 0,
                                  adopted=True)
            self.out.launches.append(outcome)

    # ------------------------------------------------------------------ watch

    def watch(self, outcomes: list[LaunchOutcome]) -> set[str]:
        """Poll the new servers until they settle or the watch ends; handle ERROR ones.

        Returns the workloads that lost units to a capacity fault (to re-plan now).
        """
        launches = {o.launch_id: o for o in outcomes if o.server_ids}
        if not launches or self.watch_s <= 0:
            return set()
        try:
            return self._watch(launches)
        except (TemporaryError, PermanentError) as exc:
            # The launches are recorded; reconcile follows these servers from here.
            log.warning("stopped watching the new servers: %s", exc)
            return set()

    def _watch(self, launches: Mapping[str, LaunchOutcome]) -> set[str]:
        deadline = self.clock.monotonic() + self.watch_s
        latest: dict[str, ServerInfo] = {}
        unsettled = list(launches)
        while True:
            # Only launches with a server still in BUILD are polled again: listing servers
            # is the expensive part of the watch on a large fleet.
            seen = self.poll(unsettled)
            self.sync_statuses(seen)
            latest.update(seen)
            unsettled = sorted({_launch_of(s) for s in seen.values() if s.status == "BUILD"})
            if not unsettled or self.clock.monotonic() >= deadline:
                break
            self.sleep(self.poll_s)
        errors = [s for s in latest.values() if s.status == "ERROR"]
        return self.handle_errors(errors, launches) if errors else set()

    def poll(self, launch_ids: list[str]) -> dict[str, ServerInfo]:
        out: dict[str, ServerInfo] = {}
        for start in range(0, len(launch_ids), TAG_CHUNK):
            chunk = launch_ids[start:start + TAG_CHUNK]
            for server in self.cloud.servers(tags=["sco:managed"],
                                             any_tags=[f"sco:launch={i}" for i in chunk]):
                out[server.id] = server
        return out

    def sync_statuses(self, servers: Mapping[str, ServerInfo]) -> None:
        now = self.now()
        with self.store.transaction():
            for server in servers.values():
                known = self.store.instance(server.id)
                status = NOVA_STATUS.get(server.status, "active")
                if known is None or known.status == status or known.status not in (
                        "requested", "building"):
                    continue
                fields: dict[str, object] = {"status": status}
                if status == "active":
                    fields["active_at"] = now
                self.store.update_instance(server.id, **fields)

    def handle_errors(self, errors: list[ServerInfo],
                      launches: Mapping[str, LaunchOutcome]) -> set[str]:
        by_launch: dict[str, list[tuple[ServerInfo, type[Exception]]]] = {}
        for listed in errors:
            server = self.cloud.server(listed.id) or listed  # list views may lack the fault
            kind = server.fault_error() or InsufficientCapacity
            launch_id = _launch_of(listed)
            if launch_id in launches:
                by_launch.setdefault(launch_id, []).append((server, kind))
        lost: set[str] = set()
        excluded: dict[str, ExclusionOutcome] = {}
        for launch_id, failed in by_launch.items():
            outcome = launches[launch_id]
            fault = failed[0][0]
            message = f"{fault.fault_code}: {(fault.fault_message or '').strip()}"
            capacity = any(kind is InsufficientCapacity for _, kind in failed)
            with self.store.transaction():
                for server, _ in failed:
                    self.store.update_instance(server.id, status="error", fault=message)
                if capacity:
                    until = rfc3339(self.clock.now()
                                    + timedelta(seconds=self.config.timeouts.negative_cache))
                    reason = f"capacity fault on launch {launch_id}: {message}"
                    self.store.exclude(outcome.pool, reason, until)
                    self.store.append_event(outcome.workload, "POOL_EXCLUDED", "warning", None, {
                        "pool": outcome.pool, "until": until, "launch": launch_id,
                        "fault": message, "servers": len(failed)})
                    self.store.mark_dirty({outcome.workload}, f"pool {outcome.pool} excluded")
                    previous = excluded.get(outcome.pool)
                    workloads = tuple(sorted({outcome.workload,
                                              *(previous.workloads if previous else ())}))
                    excluded[outcome.pool] = ExclusionOutcome(outcome.pool, reason, until,
                                                              workloads)
                    lost.add(outcome.workload)
                else:
                    self.store.append_event(outcome.workload, "QUOTA_EXCEEDED", "warning", None, {
                        "pool": outcome.pool, "launch": launch_id, "servers": len(failed),
                        "message": message, "asynchronous": True})
                    self.out.quota_faults.append(QuotaFault(
                        outcome.workload, outcome.pool, launch_id, len(failed), message,
                        asynchronous=True))
            for server, _ in failed:
                self.delete(server.id)
            if not capacity:
                self.release_nodes(tuple(n for s, _ in failed if (n := self.node_of(s.id))),
                                   "launch failed: quota exceeded")
        self.out.exclusions.extend(excluded.values())
        return lost

    def node_of(self, server_id: str) -> str | None:
        inst = self.store.instance(server_id)
        return inst.node_name if inst is not None else None

    def release_nodes(self, names: Sequence[str], reason: str) -> None:
        """Slurm CLOUD nodes whose launch failed for sure: back to powered-down
        (POWER_DOWN_FORCE, never DOWN) and out of their claims, so Slurm requeues the job."""
        if not names:
            return
        from scoctl.stages.reconcile import POWER_DOWN, power_release

        for name in names:
            if self.scheduler is None:
                log.warning("Slurm node %s: launch failed (%s); no Slurm to power it down, "
                            "ResumeFailProgram will", name, reason)
                continue
            try:
                self.scheduler.update_node(name, state=POWER_DOWN, reason=f"scoctl: {reason}")
            except ApiError as exc:
                log.warning("could not power down Slurm node %s: %s", name, exc)
        power_release(self.store, names, reason, suspend=False)
        self.out.powered_down.extend(names)

    def delete(self, server_id: str) -> None:
        try:
            self.cloud.delete(server_id)
        except (TemporaryError, PermanentError) as exc:
            # Left in `error`: reconcile deletes it on its next pass.
            log.warning("could not delete ERROR server %s: %s", server_id, exc)
            return
        self.store.update_instance(server_id, status="deleting")

    def replan(self, workloads: set[str]) -> set[str]:
        """Re-plan the workloads that lost a pool, now (those with a claim in the state)."""
        from scoctl.stages.plan import run_plan

        planable = sorted(w for w in workloads
                          if (claim := self.store.claim(w)) is not None and claim.requests)
        if not planable:
            return set()
        result = run_plan(self.config, self.store, self.clock, only=planable)
        self.out.replanned.extend(result.changed)
        return set(result.changed)


def _launch_of(server: ServerInfo) -> str:
    """The launch id in a server's `sco:launch=` tag ("" when it has none)."""
    return next((t.split("=", 1)[1] for t in server.tags if t.startswith("sco:launch=")), "")


class _Texts:
    """The user-data template and join secret, read once per run and only when needed."""

    def __init__(self, config: Config, tokens: JoinTokens) -> None:
        self.config = config
        self.tokens = tokens  # per-launch bootstrap tokens (`stages.join_tokens`)
        self._template: str | None = None
        self._secret: tuple[str | None] | None = None

    def template(self) -> str:
        if self._template is None:
            self._template = user_data_template(self.config)
        return self._template

    def secret(self) -> str | None:
        if self._secret is None:
            self._secret = (join_secret(self.config),)
        return self._secret[0]


def run_acquire(
    config: Config,
    store: Store,
    clock: Clock,
    *,
    region: str | None = None,
    dry_run: bool = False,
    connect: CloudFactory = default_connect,
    budget: Callable[[Config, Region], TokenBudget] = default_budget,
    watch: float = DEFAULT_WATCH_S,
    poll: float = DEFAULT_POLL_S,
    sleep: Callable[[float], None] = time.sleep,
    observer: Observer | None = None,
    scheduler: BatchScheduler | None = None,
    join_tokens: JoinTokens | None = None,
) -> AcquireResult:
    """Launch what the latest plan needs beyond live and in-flight units (DESIGN §6).

    The caller holds the run lock. `watch` bounds how long new servers are polled for ERROR
    (0 disables it). `scheduler` (Slurm) puts the CLOUD nodes of failed launches back to
    powered-down; without it they only leave their claims. `join_tokens` makes each
    Kubernetes launch's bootstrap token (from the config's cluster when not given). Raises
    ConfigError (template, tags, unknown image/flavor: fix the config),
    TemporaryError/PermanentError when quota headroom
    cannot be read; call failures of single launches are reported in the result (`errors`)
    instead.
    """
    started = time.perf_counter()
    regions = [config.region(region)] if region else list(config.regions)
    for reg in regions:  # a what-if config has none: exit 2 before any call
        config.launch_settings(reg)
    collected = _Collected()
    texts = _Texts(config, join_tokens or JoinTokens(config, clock))
    spent = 0
    for reg in regions:
        tokens = budget(config, reg)
        before = tokens.spent
        _RegionRun(config, store, clock, reg, dry_run=dry_run, connect=connect, budget=tokens,
                   watch=watch, poll=poll, sleep=sleep, observer=observer,
                   collected=collected, texts=texts, scheduler=scheduler).run()
        spent += tokens.spent - before
    latest = store.latest_generation()
    return AcquireResult(
        dry_run=dry_run, generation=latest.generation if latest else 0,
        launches=tuple(collected.launches), planned=tuple(collected.planned),
        shortfalls=tuple(collected.shortfalls), exclusions=tuple(collected.exclusions),
        quota_faults=tuple(collected.quota_faults), replanned=tuple(collected.replanned),
        powered_down=tuple(collected.powered_down), errors=tuple(collected.errors),
        calls=spent, seconds=time.perf_counter() - started)
