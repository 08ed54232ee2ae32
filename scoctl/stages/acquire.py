"""The acquire stage (placement steps 9-12): the latest plan into Nova instances.

Per region: snapshot (the latest plan rows, live and in-flight units, the Slurm node names
claims ask for) → decide (`core.acquire.decide_launches`, then `core.diff.clamp_to_headroom`
against Nova's quota headroom, both pure) → launch (one multi-create per workload and pool, one
create per Slurm CLOUD node, each preceded by its launch intent in its own committed
transaction, then the servers recorded as instances) → follow-up (the new servers are polled
by their `sco:launch` tag for a short, bounded time; a server in ERROR is read by id for its
fault and judged by `core.faults.judge_fault`).

A name the region lacks (the launch image: before any call; a flavor, network, security group
or zone: Nova's answer to the create) fails only the launches that use it: ``LAUNCH_FAILED``
names it (once per workload and pool within the negative-cache time), the workloads come back
in `held`, and the problem is a ``config`` one — no Nova outage, no back-off.

A capacity fault (NoValidHost, any non-quota fault) puts the pool on the negative cache and
deletes the ERROR servers (through the token budget); the stage returns the workload in `lost`.
A quota fault (Nova's asynchronous recheck, 413) or a 403 is recorded as ``QUOTA_EXCEEDED``; the
pool stays eligible and the ERROR servers are deleted. A Slurm CLOUD node whose launch failed
for sure (a 403 quota answer, a refused call, servers failing the quota recheck) is returned in
`release`. The stage calls no other stage: the composer (`scoctl.runner.compose`) re-plans `lost`
and launches the fallback in the same run, and hands `release` to the Slurm power stage.

Nothing is launched twice: a launch intent still in flight counts as units, and the next acquire
adopts the servers carrying its `sco:launch` tag (reconcile does the same). An intent no server
carries the tag of after `timeouts.launch_settle` (a crash before the call, an ambiguous call
that created nothing) is failed and its units launched again; a call Nova turned away before
any work (`Refused`: 429 to the last attempt) is failed at once. When the plan needs nothing, no
cloud call is made at all.

Test hook: the environment variable ``SCOCTL_CRASH_AT`` set to ``after-intent`` (the intent is
committed, the call not made) or ``after-call`` (the call returned, nothing recorded) makes the
process kill itself with SIGKILL at that point, so the crash-safety tests can kill a real
``scoctl acquire`` exactly there; ``SCOCTL_PAUSE_AT`` naming a point makes it stop itself there
once (SIGSTOP, as a VM pause would: every thread, its lease renewals too) until the test sends
SIGCONT. Never set them in production.
"""

from __future__ import annotations

import logging
import os
import secrets
import signal
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Protocol

from scoctl.adapters.cloud import Cloud, check_tags
from scoctl.clock import Clock, rfc3339
from scoctl.config.schema import Config, LaunchSettings, Region
from scoctl.core import pause
from scoctl.core.acquire import LaunchSnapshot, decide_launches, region_targets
from scoctl.core.constraints import workload_taint
from scoctl.core.diff import LaunchPlan, Shortfall, clamp_to_headroom
from scoctl.core.drift import label_keys
from scoctl.core.faults import fault_text, is_quota_fault, judge_fault, merge_exclusions
from scoctl.core.fleet import IN_FLIGHT_LAUNCHES
from scoctl.core.gang import (
    Member,
    gang_launch_count,
    gang_launched,
    gang_pass,
    may_launch_gang,
    members_of,
)
from scoctl.core.model import (
    KEEP,
    ExclusionRecord,
    GangRecord,
    InstanceRecord,
    InstanceUpdate,
    LaunchRecord,
    LaunchRequest,
    Networks,
    NewEvent,
    NodeRelease,
    Pool,
    ServerInfo,
)
from scoctl.core.model.problems import Problem
from scoctl.core.model.vocabulary import (
    TAG_GENERATION,
    TAG_LAUNCH,
    TAG_MANAGED,
    TAG_POOL,
    TAG_SPEC,
    TAG_WORKLOAD,
    InstanceStatus,
    LaunchStatus,
    PauseScope,
    ServerStatus,
    tag,
)
from scoctl.core.reconcile import intent_lapsed, lapsed_intent
from scoctl.core.spec import LaunchSpec, hash_of, pool_spec, stored
from scoctl.core.userdata import BootContract, redacted, render_user_data
from scoctl.errors import ConfigError, PermanentError, QuotaExceeded, Refused, TemporaryError
from scoctl.host.budget import Budget
from scoctl.secrets import remember
from scoctl.services import controls
from scoctl.services.gangs import GangClaim, gang_claims, record_gang, record_of
from scoctl.services.join_tokens import JoinTokens
from scoctl.state import Store
from scoctl.state.coordination import check_fence, intents_held

log = logging.getLogger(__name__)

CRASH_ENV = "SCOCTL_CRASH_AT"
PAUSE_ENV = "SCOCTL_PAUSE_AT"
DEFAULT_WATCH_S = 15.0
DEFAULT_POLL_S = 1.0
TAG_CHUNK = 25  # launch tags per `tags-any` poll query (keeps the URL short)

# a server's status as its new instance row first records it (anything else: active)
NOVA_STATUS = {ServerStatus.BUILD: InstanceStatus.BUILDING,
               ServerStatus.ACTIVE: InstanceStatus.ACTIVE,
               ServerStatus.ERROR: InstanceStatus.ERROR,
               ServerStatus.DELETED: InstanceStatus.DELETED}

CloudFactory = Callable[[Config, Region, Budget], Cloud]
BudgetFactory = Callable[[Config, Region], Budget]


def default_connect(config: Config, region: Region, budget: Budget) -> Cloud:
    """The Nova adapter of `region`, spending `budget` on every mutating call attempt."""
    from scoctl.adapters.factory import cloud_for

    return cloud_for(config, region, budget=budget)


def default_budget(config: Config, region: Region) -> Budget:
    """The token budget of `region` (host-wide file, or the shared database's)."""
    from scoctl.services.leadership import budget_for

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
    """Everything one acquire run did (or, with `dry_run`, would do).

    `lost` are the workloads that lost units to a capacity fault (to re-plan now), `release`
    the Slurm nodes of launches that failed for sure (to hand back to Slurm). The composer
    fills `replanned` and `powered_down` when it acts on them.
    """

    dry_run: bool
    generation: int
    launches: tuple[LaunchOutcome, ...] = ()
    planned: tuple[CallSpec, ...] = ()
    shortfalls: tuple[Shortfall, ...] = ()
    exclusions: tuple[ExclusionRecord, ...] = ()
    quota_faults: tuple[QuotaFault, ...] = ()
    replanned: tuple[str, ...] = ()
    powered_down: tuple[str, ...] = ()  # Slurm nodes handed back after a failed launch
    problems: tuple[Problem, ...] = ()
    calls: int = 0  # mutating call attempts (tokens spent), retries included
    seconds: float = 0.0
    lost: tuple[str, ...] = ()
    release: tuple[NodeRelease, ...] = ()
    held: tuple[str, ...] = ()  # workloads not launched: their region lacks a name they use
    paused: str = ""  # launches are paused (`scoctl pause`): what holds them; nothing created

    @property
    def ok(self) -> bool:
        """False when a call failed for a reason other than quota or capacity."""
        return not self.problems

    @property
    def errors(self) -> tuple[str, ...]:
        """The problems, as a person reads them."""
        return tuple(str(p) for p in self.problems)

    @property
    def launched(self) -> int:
        """The servers this run created (launches that did not fail)."""
        return sum(x.created for x in self.launches if x.status != LaunchStatus.FAILED)

    def then(self, later: AcquireResult) -> AcquireResult:
        """This run followed by `later` (a fallback round) as one result."""
        return replace(
            later, launches=self.launches + later.launches,
            planned=self.planned + later.planned, shortfalls=self.shortfalls + later.shortfalls,
            exclusions=tuple(merge_exclusions([*self.exclusions, *later.exclusions])),
            quota_faults=self.quota_faults + later.quota_faults,
            replanned=self.replanned + later.replanned,
            powered_down=self.powered_down + later.powered_down,
            problems=self.problems + later.problems, calls=self.calls + later.calls,
            seconds=self.seconds + later.seconds, release=self.release + later.release,
            held=tuple(sorted({*self.held, *later.held})))


@dataclass
class _Collected:
    launches: list[LaunchOutcome] = field(default_factory=list)
    planned: list[CallSpec] = field(default_factory=list)
    shortfalls: list[Shortfall] = field(default_factory=list)
    exclusions: list[ExclusionRecord] = field(default_factory=list)
    quota_faults: list[QuotaFault] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    lost: set[str] = field(default_factory=set)
    release: list[NodeRelease] = field(default_factory=list)
    held: set[str] = field(default_factory=set)


def crash_point(name: str) -> None:
    """Test hook: SIGKILL this process when ``SCOCTL_CRASH_AT`` names this point; SIGSTOP it,
    the first time only, when ``SCOCTL_PAUSE_AT`` does."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(PAUSE_ENV) == name:
        del os.environ[PAUSE_ENV]
        os.kill(os.getpid(), signal.SIGSTOP)


def new_launch_id() -> str:
    """A unique launch id, ``l-<12 hex>``."""
    return "l-" + secrets.token_hex(6)


def launch_tags(plan: LaunchPlan, launch_id: str) -> tuple[str, ...]:
    """The tags every scoctl server carries (checked against Nova's rules by the caller)."""
    return (TAG_MANAGED, tag(TAG_WORKLOAD, plan.workload), tag(TAG_POOL, plan.pool),
            tag(TAG_GENERATION, plan.generation), tag(TAG_LAUNCH, launch_id))


def launch_metadata(plan: LaunchPlan, launch_id: str) -> dict[str, str]:
    """The same facts as metadata (`sco:workload` ...), readable without the tags API."""
    return {TAG_MANAGED: "true", TAG_WORKLOAD: plan.workload, TAG_POOL: plan.pool,
            TAG_GENERATION: str(plan.generation), TAG_LAUNCH: launch_id}


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


def join_secret(config: Config) -> str | None:
    """The join secret, read at render time; a missing file means none (with a warning)."""
    path = config.bootstrap.join_secret_file
    if path is None:
        return None
    try:
        secret = path.read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("join secret file %s unreadable (%s): launching without a join secret",
                    path, getattr(exc, "strerror", None) or "not UTF-8")
        return None
    remember(secret)  # scoctl.secrets: never printed, logged or stored, whatever echoes it
    return secret


class BootFiles:
    """What a node boots with: the user-data template and the static join secret (read once per
    run and only when a launch needs them), and the per-launch bootstrap tokens
    (`services.join_tokens`) that take the secret's place for Kubernetes launches."""

    def __init__(self, config: Config, tokens: JoinTokens) -> None:
        self.config = config
        self.tokens = tokens
        self._template: str | None = None
        self._secret: tuple[str | None] | None = None

    def template(self) -> str:
        if self._template is None:
            self._template = self.config.user_data_template()
        return self._template

    def secret(self) -> str | None:
        if self._secret is None:
            self._secret = (join_secret(self.config),)
        return self._secret[0]


@dataclass
class _Run:
    """What one acquire run shares across its regions."""

    config: Config
    store: Store
    clock: Clock
    dry_run: bool
    round_no: int
    watch_s: float
    poll_s: float
    observer: Observer | None
    boot: BootFiles
    out: _Collected = field(default_factory=_Collected)

    def now(self) -> str:
        return rfc3339(self.clock.now())


class _Region:
    """One region of the run: its pools and its cloud, connected on first use."""

    def __init__(self, run: _Run, region: Region, connect: CloudFactory,
                 budget: Budget) -> None:
        self.run, self.region, self.budget = run, region, budget
        self.store = run.store
        self.pools: dict[str, Pool] = {p.name: p for p in run.config.pools
                                       if p.region == region.name}
        self.contracts: dict[str, str] = {}
        self.gangs: dict[str, GangClaim] = {}  # this pass's gang workloads (design: Gangs)
        self._connect = connect
        self._cloud: Cloud | None = None
        self._image: str | None = None

    @property
    def cloud(self) -> Cloud:
        if self._cloud is None:
            from scoctl.services.leadership import FencedCloud  # deletes fenced (design: Runners)

            self._cloud = FencedCloud(self._connect(self.run.config, self.region, self.budget),
                                      self.region.name, self.store)
        return self._cloud

    @property
    def name(self) -> str:
        return self.region.name

    def image_id(self) -> str:
        """The id the region's launch image resolves to now, asked once per pass: what each
        launch boots and its spec hash names (design: Drift). Raises as `Cloud.image_id`."""
        if self._image is None:
            self._image = self.cloud.image_id(self.run.config.launch_settings(self.region).image)
        return self._image


@contextmanager
def _fenced(reg: _Region) -> Iterator[None]:
    """One transaction that writes only while this runner still leads the region (NotLeader
    otherwise, nothing written): every record after a call is fenced, as the intent before it
    (design: Runners), so a deposed leader never overwrites what the new one decided."""
    with reg.store.transaction():
        check_fence(reg.store, reg.name)
        yield


# --------------------------------------------------------------------------- snapshot + decide


def _snapshot(reg: _Region, scope: Collection[str] | None) -> LaunchSnapshot | None:
    """What the decision needs; None when the plan wants nothing in this region (then
    nothing more is read)."""
    store = reg.store
    plans = store.plans()
    reg.contracts = {name: record.contract for name, record in plans.items()}
    wanted = region_targets(plans, reg.pools, scope)
    if not wanted:
        return None
    claim_nodes: dict[str, tuple[str, ...]] = {}
    for name in wanted:
        claim = store.claim(name)
        if claim is not None and (claim.nodes or claim.source == "slurm"):
            claim_nodes[name] = claim.nodes  # a Slurm claim launches only for node names
    return LaunchSnapshot(plans=plans, instances=tuple(store.instances()),
                          in_flight=tuple(store.launches(status=IN_FLIGHT_LAUNCHES)),
                          claim_nodes=claim_nodes, pools=reg.pools)


def _fit(reg: _Region, launches: list[LaunchPlan]) -> list[LaunchPlan]:
    """Fit the launches into Nova's quota headroom; record each shortfall."""
    kept, short = clamp_to_headroom(launches, reg.run.config.flavors, reg.cloud.headroom())
    reg.run.out.shortfalls.extend(short)
    if short and not reg.run.dry_run:
        with _fenced(reg):
            for s in short:
                reg.store.append_event(NewEvent(s.workload, "QUOTA_SHORTFALL", "warning", {
                    "pool": s.pool, "wanted": s.wanted, "allowed": s.allowed,
                    "limit": s.limit, "region": reg.name}))
    return kept


def _node_labels(reg: _Region, workload: str) -> dict[str, str]:
    """The configured workload's ``node_labels`` (none for a workload the config does not
    name)."""
    for spec in reg.run.config.workloads:
        if spec.name == workload:
            return dict(spec.node_labels)
    return {}


def _call_spec(reg: _Region, plan: LaunchPlan, launch_id: str) -> tuple[LaunchRequest, CallSpec]:
    """The create request for `plan` and its printable form (secret redacted)."""
    pool = reg.pools[plan.pool]
    contract = BootContract(
        workload=plan.workload, contract=reg.contracts.get(plan.workload, ""),
        pool=plan.pool, tier=plan.tier, generation=plan.generation, launch=launch_id,
        region=plan.region, az=plan.az, flavor=plan.flavor,
        slurm_node_name=plan.node_names[0] if plan.node_names else None,
        slurm_features=(pool.name, pool.flavor, pool.tier) if plan.node_names else (),
        group=pool.group, extra_labels={**pool.labels, **_node_labels(reg, plan.workload)},
        exclusive=reg.run.config.exclusive(plan.workload))
    files, settings = reg.run.boot, reg.run.config.bootstrap
    slurm_node = bool(plan.node_names)
    secret = None if reg.run.dry_run else files.tokens.credential(
        launch_id, plan.workload, slurm_node=slurm_node)
    # each node gets only what it uses: slurmd joins by its node name, so a Slurm CLOUD node
    # carries no Kubernetes join secret, endpoint or CA hash
    secret = None if slurm_node else secret or files.secret()
    user_data = render_user_data(files.template(), contract, secret,
                                 join_endpoint=None if slurm_node else settings.api_endpoint,
                                 join_ca_hash=None if slurm_node else settings.ca_cert_hash)
    tags = (*launch_tags(plan, launch_id), tag(TAG_SPEC, spec_of(reg, plan)))
    check_tags(tags)
    launch = reg.run.config.launch_settings(reg.region)
    least = plan.count if plan.workload in reg.gangs else 1  # a gang's members: all or none
    request = LaunchRequest(
        name=server_name(plan, launch_id), flavor=plan.flavor, image=reg.image_id(),
        networks=networks_of(launch), az=plan.az or None, min_count=least,
        max_count=plan.count, tags=tags, metadata=launch_metadata(plan, launch_id),
        user_data=user_data, security_groups=launch.security_groups,
        key_name=launch.key_name, server_group=launch.server_group)
    shown = CallSpec(
        region=reg.name, workload=plan.workload, pool=plan.pool, name=request.name,
        flavor=plan.flavor, image=launch.image, az=plan.az, networks=request.networks,
        min_count=least, max_count=plan.count, tags=tags, metadata=dict(request.metadata),
        user_data=redacted(user_data, secret), node_names=plan.node_names)
    return request, shown


# --------------------------------------------------------------------------- launch + record


def spec_of(reg: _Region, plan: LaunchPlan) -> str:
    """The launch spec hash of `plan`'s units (design: Drift, `core.spec.pool_spec`), the image
    by the id it resolves to now."""
    return hash_of(launch_spec(reg, plan))


def launch_spec(reg: _Region, plan: LaunchPlan) -> LaunchSpec:
    """The launch spec of `plan`'s units."""
    launch = reg.run.config.launch_settings(reg.region)
    return pool_spec(flavor=plan.flavor, az=plan.az, tier=plan.tier, image=launch.image,
                     networks=launch.networks, security_groups=launch.security_groups,
                     key_name=launch.key_name, server_group=launch.server_group,
                     user_data_template=reg.run.boot.template(), image_id=reg.image_id(),
                     workload_taints=_workload_taints(reg, plan))


def _workload_taints(reg: _Region, plan: LaunchPlan) -> tuple[str, ...]:
    """The isolation taint of `plan`'s units (none for Slurm CLOUD nodes or a shared
    workload)."""
    exclusive = reg.run.config.exclusive(plan.workload) and not plan.node_names
    return (workload_taint(plan.workload),) if exclusive else ()


def _launch(reg: _Region, plan: LaunchPlan) -> LaunchOutcome:
    """Intent (committed), call, record. Quota and call failures become outcomes."""
    run, store = reg.run, reg.store
    launch_id = new_launch_id()
    request, _ = _call_spec(reg, plan, launch_id)
    now = run.now()
    store.add_launch(LaunchRecord(
        launch_id=launch_id, region=reg.name, workload=plan.workload, pool=plan.pool,
        generation=plan.generation, count=plan.count, status=LaunchStatus.INTENT, created=now,
        updated=now, node_names=plan.node_names))
    crash_point("after-intent")
    base = LaunchOutcome(launch_id=launch_id, region=reg.name, workload=plan.workload,
                         pool=plan.pool, generation=plan.generation, requested=plan.count,
                         created=0, status=LaunchStatus.FAILED, node_names=plan.node_names,
                         round_no=run.round_no)
    try:
        result = reg.cloud.launch(request)
    except QuotaExceeded as exc:
        return _refused_on_quota(reg, plan, base, str(exc))
    except Refused as exc:
        # turned away before any work (429 to the last attempt): nothing to wait for
        run.out.problems.append(Problem.of(exc, api="nova", region=reg.region.name,
                                           what=f"{plan.workload}/{plan.pool}"))
        return _refused_for_now(reg, plan, base, str(exc))
    except TemporaryError as exc:
        # The call may have reached Nova (a 500, a timeout): adopt what carries the tag,
        # else leave the intent in flight for reconcile (never launch it again).
        return _unsure(reg, plan, base, str(exc))
    except ConfigError as exc:
        # the region lacks a name this launch uses (flavor, network, security group, zone):
        # this launch fails, named as that; no outage, the other launches go on
        reg.run.boot.tokens.revoke(launch_id)
        with _fenced(reg):
            reg.store.update_launch(launch_id, status=LaunchStatus.FAILED, error=str(exc))
        _held_back(reg, [plan], str(exc))
        _release(reg, plan.node_names, "launch refused")
        return replace(base, error=str(exc))
    except PermanentError as exc:
        outcome = _refused(reg, plan, base, str(exc))
        run.out.problems.append(Problem.of(exc, api="nova", region=reg.region.name,
                                           what=f"{plan.workload}/{plan.pool}"))
        return outcome
    crash_point("after-call")
    return _record(reg, plan, launch_id, list(result.servers), result.reservation_id,
                   adopted=result.adopted)


def _held_back(reg: _Region, plans: Sequence[LaunchPlan], missing: str,
               **detail: str) -> None:
    """Launches the region cannot make because it lacks a name the config gives (`missing`
    says which): a ``config`` problem (no outage, no back-off), the workloads `held`, and one
    ``LAUNCH_FAILED`` per workload and pool naming it — again only after the negative-cache
    time, however often the controller tries (it tries again at once after a reload)."""
    run = reg.run
    workloads = sorted({p.workload for p in plans})
    run.out.problems.append(Problem("config", reg.name, "launch of " + ", ".join(workloads),
                                    missing))
    run.out.held.update(workloads)
    if run.dry_run:
        return
    since = rfc3339(run.clock.now() - timedelta(seconds=run.config.timeouts.negative_cache))
    with _fenced(reg):
        for workload in workloads:
            told = {str(e.detail.get("pool")) for e in reg.store.events(workload=workload,
                                                                        since=since)
                    if e.token == "LAUNCH_FAILED" and e.detail.get("missing") == missing}
            for pool in sorted({p.pool for p in plans if p.workload == workload} - told):
                reg.store.append_event(NewEvent(workload, "LAUNCH_FAILED", "error", {
                    "pool": pool, "region": reg.name, "missing": missing, **detail,
                    "retry": "at once after a reload; else after timeouts.negative_cache"}))


def _refused_on_quota(reg: _Region, plan: LaunchPlan, base: LaunchOutcome,
                      message: str) -> LaunchOutcome:
    """Nova answered 403 (quota): the launch failed, the pool stays eligible."""
    reg.run.boot.tokens.revoke(base.launch_id)
    verdict = judge_fault(workload=plan.workload, pool=plan.pool, region=reg.name,
                          fault=message, quota=True, launch=base.launch_id, servers=0,
                          now=reg.run.clock.now(),
                          negative_cache=reg.run.config.timeouts.negative_cache)
    with _fenced(reg):
        reg.store.update_launch(base.launch_id, status=LaunchStatus.FAILED, error=message)
        reg.store.append_event(NewEvent(plan.workload, verdict.token, "warning",
                                        dict(verdict.detail)))
    reg.run.out.quota_faults.append(QuotaFault(plan.workload, plan.pool, base.launch_id, 0,
                                               message, asynchronous=False))
    _release(reg, plan.node_names, "launch refused: quota exceeded")
    return replace(base, error=message)


def _refused(reg: _Region, plan: LaunchPlan, base: LaunchOutcome,
             message: str) -> LaunchOutcome:
    """Nova refused the call for good (a 400, a bad image): the launch failed."""
    reg.run.boot.tokens.revoke(base.launch_id)
    with _fenced(reg):
        reg.store.update_launch(base.launch_id, status=LaunchStatus.FAILED, error=message)
        reg.store.append_event(NewEvent(plan.workload, "LAUNCH_FAILED", "error", {
            "pool": plan.pool, "launch": base.launch_id, "message": message}))
    _release(reg, plan.node_names, "launch refused")
    return replace(base, error=message)


def _refused_for_now(reg: _Region, plan: LaunchPlan, base: LaunchOutcome,
                     message: str) -> LaunchOutcome:
    """Nova turned the call away before doing anything (`Refused`): the launch failed at once,
    so its units are free for the next acquire. A Slurm node stays in its claim: the next
    acquire launches it again."""
    reg.run.boot.tokens.revoke(base.launch_id)
    with _fenced(reg):
        reg.store.update_launch(base.launch_id, status=LaunchStatus.FAILED, error=message)
        reg.store.append_event(NewEvent(plan.workload, "LAUNCH_REFUSED", "warning", {
            "pool": plan.pool, "launch": base.launch_id, "message": message,
            "region": reg.name}))
    return replace(base, error=message)


def _unsure(reg: _Region, plan: LaunchPlan, base: LaunchOutcome,
            message: str) -> LaunchOutcome:
    try:
        found = reg.cloud.servers(tags=[tag(TAG_LAUNCH, base.launch_id)])
    except TemporaryError:
        found = []
    if found:
        return _record(reg, plan, base.launch_id, found, found[0].reservation_id, adopted=True)
    with _fenced(reg):
        reg.store.update_launch(base.launch_id, status=LaunchStatus.INTENT, error=message)
    reg.run.out.problems.append(Problem("nova", reg.region.name, f"{plan.workload}/{plan.pool}",
                                        f"{message} (left in flight)"))
    return replace(base, status=LaunchStatus.INTENT, error=message)


def _release(reg: _Region, names: Sequence[str], reason: str) -> None:
    """Slurm CLOUD nodes whose launch failed for sure: handed back by the composer."""
    reg.run.out.release.extend(NodeRelease(name, reason) for name in names)


def _record(reg: _Region, plan: LaunchPlan, launch_id: str, servers: list[ServerInfo],
            reservation_id: str | None, *, adopted: bool) -> LaunchOutcome:
    """Write the servers as instances and the launch as recorded, in one transaction."""
    store, now = reg.store, reg.run.now()
    ordered = sorted(servers, key=lambda s: s.name)
    launched = launch_spec(reg, plan)
    spec = hash_of(launched)
    with _fenced(reg):
        store.save_launch_specs({spec: stored(launched)})
        for index, server in enumerate(ordered):
            node = plan.node_names[index] if index < len(plan.node_names) else None
            store.upsert_instance(InstanceRecord(
                id=server.id, name=server.name, region=reg.name, workload=plan.workload,
                pool=plan.pool, generation=plan.generation, launch_id=launch_id,
                status=NOVA_STATUS.get(server.status, InstanceStatus.ACTIVE), created=now,
                updated=now, node_name=node, spec_hash=spec,
                labels=label_keys({**reg.pools[plan.pool].labels,
                                   **_node_labels(reg, plan.workload)})))
        store.update_launch(launch_id, status=LaunchStatus.RECORDED,
                            reservation_id=reservation_id or None)
        store.append_event(NewEvent(
            plan.workload, "LAUNCH_ADOPTED" if adopted else "INSTANCES_LAUNCHED", "info",
            {"pool": plan.pool, "launch": launch_id, "requested": plan.count,
             "created": len(ordered), "reservation": reservation_id, "region": reg.name}))
        if len(ordered) < plan.count:
            # Nova shrank max_count to its own quota headroom.
            store.append_event(NewEvent(plan.workload, "QUOTA_SHORTFALL", "warning", {
                "pool": plan.pool, "wanted": plan.count, "allowed": len(ordered),
                "limit": "nova", "launch": launch_id}))
            reg.run.out.shortfalls.append(Shortfall(plan.workload, plan.pool, plan.count,
                                                    len(ordered), "nova"))
    return LaunchOutcome(
        launch_id=launch_id, region=reg.name, workload=plan.workload, pool=plan.pool,
        generation=plan.generation, requested=plan.count, created=len(ordered),
        status="adopted" if adopted else LaunchStatus.RECORDED, reservation_id=reservation_id,
        server_ids=tuple(s.id for s in ordered), node_names=plan.node_names,
        round_no=reg.run.round_no)


def _adopt_intents(reg: _Region) -> None:
    """Launches left in flight (a crash, an ambiguous call): record the servers carrying their
    tag; an intent with none after the settle window (`core.reconcile.intent_lapsed`) fails,
    so this pass launches its units again."""
    intents = [launch for launch in reg.store.launches(status=IN_FLIGHT_LAUNCHES)
               if launch.region == reg.name]
    settle = reg.run.config.timeouts.launch_settle
    # another runner's call may still be in flight: fail none yet (design: Runners)
    held = intents_held(reg.store, reg.name, reg.run.clock.monotonic())
    for launch in intents:
        found = reg.cloud.servers(tags=[tag(TAG_LAUNCH, launch.launch_id)])
        if not found:
            if not held and intent_lapsed(launch, reg.run.clock.now(), settle):
                _fail_lapsed(reg, launch, settle)
            continue
        pool = reg.pools.get(launch.pool)
        plan = LaunchPlan(workload=launch.workload, pool=launch.pool, region=launch.region,
                          az=pool.az if pool else "", flavor=pool.flavor if pool else "",
                          tier=pool.tier if pool else "", generation=launch.generation,
                          count=launch.count, node_names=launch.node_names)
        reg.run.out.launches.append(_record(reg, plan, launch.launch_id, found,
                                            found[0].reservation_id, adopted=True))


def _fail_lapsed(reg: _Region, launch: LaunchRecord, settle: float) -> None:
    """Record a lapsed intent as failed (`core.reconcile.lapsed_intent`)."""
    update, event = lapsed_intent(launch, settle)
    with _fenced(reg):
        reg.store.update_launch(update.launch_id, status=update.status, error=update.error)
        reg.store.append_event(NewEvent(event.workload, event.token, event.level,
                                        dict(event.detail)))


def _launch_all(reg: _Region, launches: list[LaunchPlan]) -> list[LaunchOutcome]:
    observer = reg.run.observer
    if observer is not None:
        observer.round_started(reg.run.round_no, sum(p.count for p in launches))
    outcomes = []
    for plan in launches:
        outcome = _launch(reg, plan)
        outcomes.append(outcome)
        reg.run.out.launches.append(outcome)
        if observer is not None:
            observer.launched(outcome)
    if observer is not None:
        observer.round_done()
    return outcomes


# --------------------------------------------------------------------------- follow-up


def _follow_up(reg: _Region, outcomes: list[LaunchOutcome]) -> None:
    """Poll the new servers until they settle or the watch ends; handle ERROR ones."""
    launches = {o.launch_id: o for o in outcomes if o.server_ids}
    if not launches or reg.run.watch_s <= 0:
        return
    try:
        settled = _poll_until_settled(reg, list(launches))
    except (TemporaryError, PermanentError) as exc:
        # The launches are recorded; reconcile follows these servers from here.
        log.warning("stopped watching the new servers: %s", exc)
        return
    errors = [s for s in settled.values() if s.status == ServerStatus.ERROR]
    if errors:
        _handle_faults(reg, errors, launches)


def _poll_until_settled(reg: _Region, launch_ids: list[str]) -> dict[str, ServerInfo]:
    run = reg.run
    deadline = run.clock.monotonic() + run.watch_s
    latest: dict[str, ServerInfo] = {}
    unsettled = launch_ids
    while True:
        # Only launches with a server still in BUILD are polled again: listing servers
        # is the expensive part of the watch on a large fleet.
        seen = _poll(reg, unsettled)
        _sync_statuses(reg, seen)
        latest.update(seen)
        unsettled = sorted({_launch_of(s) for s in seen.values() if s.status == ServerStatus.BUILD})
        if not unsettled or run.clock.monotonic() >= deadline:
            return latest
        run.clock.sleep(run.poll_s)


def _poll(reg: _Region, launch_ids: list[str]) -> dict[str, ServerInfo]:
    out: dict[str, ServerInfo] = {}
    for start in range(0, len(launch_ids), TAG_CHUNK):
        chunk = launch_ids[start:start + TAG_CHUNK]
        for server in reg.cloud.servers(tags=[TAG_MANAGED],
                                        any_tags=[tag(TAG_LAUNCH, i) for i in chunk]):
            out[server.id] = server
    return out


def _sync_statuses(reg: _Region, servers: Mapping[str, ServerInfo]) -> None:
    now = reg.run.now()
    with _fenced(reg):
        for server in servers.values():
            known = reg.store.instance(server.id)
            status = NOVA_STATUS.get(server.status, InstanceStatus.ACTIVE)
            if known is None or known.status == status or known.status not in (
                    InstanceStatus.REQUESTED, InstanceStatus.BUILDING):
                continue
            reg.store.update_instance(InstanceUpdate(
                server.id, status=status,
                active_at=now if status == InstanceStatus.ACTIVE else KEEP))


def _handle_faults(reg: _Region, errors: list[ServerInfo],
                   launches: Mapping[str, LaunchOutcome]) -> None:
    """Judge each failed launch (`core.faults`), record it, delete its ERROR servers."""
    by_launch: dict[str, list[ServerInfo]] = {}
    for listed in errors:
        server = reg.cloud.server(listed.id) or listed  # list views may lack the fault
        launch_id = _launch_of(listed)
        if launch_id in launches:
            by_launch.setdefault(launch_id, []).append(server)
    excluded: list[ExclusionRecord] = []
    gangs: dict[str, list[Member]] = {}
    for launch_id, failed in by_launch.items():
        outcome = launches[launch_id]
        # one capacity fault among the launch's servers makes it a capacity fault
        first = next((s for s in failed if not is_quota_fault(s)), failed[0])
        verdict = judge_fault(
            workload=outcome.workload, pool=outcome.pool, region=reg.name,
            fault=fault_text(first), quota=is_quota_fault(first), launch=launch_id,
            servers=len(failed), now=reg.run.clock.now(),
            negative_cache=reg.run.config.timeouts.negative_cache)
        with _fenced(reg):
            for server in failed:
                reg.store.update_instance(InstanceUpdate(server.id, status=InstanceStatus.ERROR,
                                                         fault=verdict.fault))
            if verdict.exclusion is not None:
                ex = verdict.exclusion
                reg.store.exclude(ex.pool, ex.reason, ex.until)
                excluded.append(ex)
            reg.store.append_event(NewEvent(outcome.workload, verdict.token, "warning",
                                            dict(verdict.detail)))
            reg.store.mark_dirty({outcome.workload}, verdict.replan)
        nodes = [n for s in failed if (n := _node_of(reg, s.id))]
        for server in failed:
            _delete(reg, server.id)
        if verdict.quota:
            reg.run.out.quota_faults.append(QuotaFault(
                outcome.workload, outcome.pool, launch_id, len(failed), verdict.fault,
                asynchronous=True))
            _release(reg, nodes, "launch failed: quota exceeded")
        else:
            reg.run.out.lost.add(outcome.workload)
        if outcome.workload in reg.gangs:
            gangs.setdefault(outcome.workload, []).extend(
                Member(s.id, outcome.pool, InstanceStatus.ERROR, verdict.fault or "ERROR")
                for s in failed)
    for name, members in sorted(gangs.items()):  # a gang fails once, all its members
        _fail_gang(reg, name, members)
    reg.run.out.exclusions.extend(merge_exclusions(excluded))


def _node_of(reg: _Region, server_id: str) -> str | None:
    inst = reg.store.instance(server_id)
    return inst.node_name if inst is not None else None


def _delete(reg: _Region, server_id: str) -> None:
    try:
        reg.cloud.delete(server_id)
    except (TemporaryError, PermanentError) as exc:
        # Left in `error`: reconcile deletes it on its next pass.
        log.warning("could not delete ERROR server %s: %s", server_id, exc)
        return
    with _fenced(reg):
        reg.store.update_instance(InstanceUpdate(server_id, status=InstanceStatus.DELETING))


def _launch_of(server: ServerInfo) -> str:
    """The launch id in a server's `sco:launch=` tag ("" when it has none)."""
    prefix = tag(TAG_LAUNCH, "")
    return next((t.split("=", 1)[1] for t in server.tags if t.startswith(prefix)), "")


# --------------------------------------------------------------------------- gangs


def _gang_gate(reg: _Region, snapshot: LaunchSnapshot,
               wanted: list[LaunchPlan]) -> list[LaunchPlan]:
    """Gang workloads (design: Gangs) launch whole or not at all (`core.gang.may_launch_gang`):
    not while a launch of theirs is in flight, not during the back-off after a failure, never
    after they were found unsatisfiable, never part of a gang."""
    reg.gangs = gang_claims(reg.store, {p.workload for p in wanted})
    if not reg.gangs:
        return wanted
    records = reg.store.gangs()
    policy = reg.run.config.gang.policy()
    now = reg.run.clock.now().timestamp()
    flying = {launch.workload for launch in snapshot.in_flight}
    allowed = set()
    for name, claim in reg.gangs.items():
        record = record_of(records, claim)
        members = members_of(snapshot.instances, name)
        missing = sum(p.count for p in wanted if p.workload == name)
        decision = gang_pass(record, members, policy, now)
        if name not in flying and may_launch_gang(decision, decision.record, members, missing,
                                                  claim.size):
            allowed.add(name)
    return [p for p in wanted if p.workload not in reg.gangs or p.workload in allowed]


def _whole_gangs(reg: _Region, wanted: Sequence[LaunchPlan],
                 fitted: list[LaunchPlan]) -> list[LaunchPlan]:
    """A gang the quota headroom cannot take whole is not launched this pass
    (`core.gang.gang_launch_count`): its shortfall is recorded, no member is created."""
    out = []
    for plan in fitted:
        if plan.workload in reg.gangs:
            missing = sum(p.count for p in wanted if p.workload == plan.workload)
            room = sum(p.count for p in fitted if p.workload == plan.workload)
            if gang_launch_count(0, missing, room) == 0:
                continue
        out.append(plan)
    return out


def _gangs_launched(reg: _Region, outcomes: Sequence[LaunchOutcome]) -> None:
    """Start each launched gang's deadline; a gang one of whose creates failed is failed
    whole at once (every member deleted, `GANG_FAILED`)."""
    now = reg.run.clock.now().timestamp()
    records = reg.store.gangs()
    for name in sorted({o.workload for o in outcomes if o.workload in reg.gangs}):
        mine = [o for o in outcomes if o.workload == name]
        record = gang_launched(record_of(records, reg.gangs[name]), now)
        failed = [Member(o.launch_id, o.pool, InstanceStatus.ERROR, o.error or "create failed",
                         created=False)
                  for o in mine if o.status == LaunchStatus.FAILED]
        if failed:
            _fail_gang(reg, name, failed, record)
            continue
        with _fenced(reg):
            reg.store.save_gangs([name], [record])


def _fail_gang(reg: _Region, workload: str, failed: Sequence[Member],
               record: GangRecord | None = None) -> None:
    """A gang with failed members (`failed`): `core.gang.gang_pass` over them and its live
    members; record, then delete every member not being deleted already."""
    now = reg.run.clock.now().timestamp()
    if record is None:
        record = record_of(reg.store.gangs(), reg.gangs[workload])
    gone = {m.server for m in failed}
    instances = reg.store.instances()  # once: the members and those being deleted already
    members = [*(m for m in members_of(instances, workload) if m.server not in gone), *failed]
    decision = gang_pass(record, members, reg.run.config.gang.policy(), now)
    with _fenced(reg):
        record_gang(reg.store, decision, now=now,
                    negative_cache=reg.run.config.timeouts.negative_cache,
                    pools=reg.run.config.pools, flavors=reg.run.config.flavors)
    deleting = {i.id for i in instances
                if i.status in (InstanceStatus.DELETING, InstanceStatus.DELETED)}
    for server in decision.delete:
        if server not in deleting:
            _delete(reg, server)


# --------------------------------------------------------------------------- the stage


def _region_pass(reg: _Region, scope: Collection[str] | None) -> None:
    """snapshot → decide → launch → follow-up, for one region."""
    run = reg.run
    if not run.dry_run and run.round_no == 0:
        _adopt_intents(reg)
    snapshot = _snapshot(reg, scope)
    wanted = decide_launches(snapshot, scope) if snapshot is not None else []
    if snapshot is not None and wanted:
        wanted = _gang_gate(reg, snapshot, wanted)
    if not wanted:
        return
    launches = _whole_gangs(reg, wanted, _fit(reg, wanted))
    if launches:
        try:
            reg.image_id()  # once, before the launches: an outage here fails as headroom's
        except ConfigError as exc:  # the region lacks the image: no launch here can be made
            image = run.config.launch_settings(reg.region).image
            _held_back(reg, launches, str(exc), image=image)
            _release(reg, [n for p in launches for n in p.node_names], "launch refused")
            return
    if run.dry_run:
        run.out.planned.extend(_call_spec(reg, p, "l-dryrun000000")[1] for p in launches)
        return
    if launches:
        outcomes = _launch_all(reg, launches)
        _gangs_launched(reg, outcomes)
        _follow_up(reg, outcomes)


def run_acquire(
    config: Config,
    store: Store,
    clock: Clock,
    *,
    region: str | None = None,
    dry_run: bool = False,
    connect: CloudFactory = default_connect,
    budget: BudgetFactory = default_budget,
    watch: float = DEFAULT_WATCH_S,
    poll: float = DEFAULT_POLL_S,
    observer: Observer | None = None,
    scope: Collection[str] | None = None,
    round_no: int = 0,
    boot: BootFiles | None = None,
    join_tokens: JoinTokens | None = None,
    leads: Callable[[str], bool] | None = None,
) -> AcquireResult:
    """Launch what the latest plan needs beyond live and in-flight units (design: Acquirer).

    The caller holds the run lock. `watch` bounds how long new servers are polled for ERROR
    (0 disables it). `scope` limits the launches to those workloads and `round_no` numbers a
    fallback round (round 0 also adopts the servers of crashed launches). `boot` (or
    `join_tokens`, else tokens from the config's cluster) gives the nodes' join credentials.
    Raises ConfigError (no launch settings, template, tags: fix the config),
    TemporaryError/PermanentError when quota headroom cannot be read; call failures of
    single launches are reported in the result (`errors`) instead, and a launch of a name the
    region lacks (image, flavor, network, security group, zone) fails alone, named in a
    ``LAUNCH_FAILED`` event, its workload in `held` (a ``config`` problem, not an outage).
    Capacity faults come back in
    `lost`, the Slurm nodes of failed launches in `release`: the caller acts on them
    (`scoctl.runner.compose.acquire_with_fallback`). With `leads`, regions this runner does not
    lead are left to their leader (design: Runners).
    """
    started = clock.monotonic()
    regions = [config.region(region)] if region else list(config.regions)
    for reg in regions:  # a what-if config has none: exit 2 before any call
        config.launch_settings(reg)
    paused_by = (None if dry_run
                 else controls.lapse(store, clock.now()).get(PauseScope.LAUNCHES))
    if paused_by is not None:  # an operator's pause: what would launch is worked out, not made
        log.warning("acquire: %s: no server is created", pause.describe(paused_by))
        dry_run = True
    regions = [r for r in regions if leads is None or dry_run or leads(r.name)]
    files = boot or BootFiles(config, join_tokens or JoinTokens(config, clock))
    run = _Run(config, store, clock, dry_run=dry_run, round_no=round_no, watch_s=watch,
               poll_s=poll, observer=observer, boot=files)
    spent = 0
    for reg in regions:
        tokens = budget(config, reg)
        before = tokens.spent
        _region_pass(_Region(run, reg, connect, tokens), scope)
        spent += tokens.spent - before
    latest = store.latest_generation()
    out = run.out
    return AcquireResult(
        dry_run=dry_run, generation=latest.generation if latest else 0,
        launches=tuple(out.launches), planned=tuple(out.planned),
        shortfalls=tuple(out.shortfalls), exclusions=tuple(merge_exclusions(out.exclusions)),
        quota_faults=tuple(out.quota_faults), problems=tuple(out.problems), calls=spent,
        seconds=clock.monotonic() - started, lost=tuple(sorted(out.lost)),
        release=tuple(out.release), held=tuple(sorted(out.held)),
        paused=pause.describe(paused_by) if paused_by else "")
