"""Prometheus metrics in the text exposition format, for node_exporter's textfile collector.

`scoctl run` writes them to the config's ``metrics.textfile`` after every pass, atomically
(a temporary file in the same directory, then ``rename``), so the collector never reads half a
file. Counters that must survive between runs (cloud calls, tokens spent, the last success)
are kept in the state (`Store.metric_counters`); everything else is a gauge read at the end of
the pass.

    scoctl_claim_pods                        pods (Slurm: nodes) in claims, pending or placed
    scoctl_pending{source}                   provisionable pods / pending jobs at the last watch
    scoctl_claims                            claims with demand
    scoctl_plan_duration_seconds             the last plan stage's decision time
    scoctl_cloud_calls_total{region,outcome} Nova calls (ok, quota, temporary, permanent, error)
    scoctl_budget_tokens_available{region}   mutating-call tokens free right now
    scoctl_budget_tokens_spent_total{region} tokens this host's scoctl spent (all runs)
    scoctl_instances{state}                  instances by lifecycle state
    scoctl_workloads{status}                 workloads (newest row per slug) by status
    scoctl_workloads_misplaced{workload,token}  1 per workload queued by POD_NOT_ISOLATED /
                                             PODS_UNPLACED (placement truth)
    scoctl_stage_duration_seconds{stage}     the last pass's time per stage
    scoctl_stage_success{stage}              1 when the stage's last pass succeeded
    scoctl_last_success_timestamp_seconds    when a whole pass last succeeded (Unix time)
    scoctl_leader{region}                    1 when this runner leads the region (design: Runners)
    scoctl_controller_pass_timestamp_seconds when `run --follow` last finished a pass
    scoctl_config_last_reload_successful     `run --follow`: 0 while its last SIGHUP was refused
    scoctl_config_last_reload_success_timestamp_seconds  when it last loaded its config
    scoctl_orphans{region}                   sco:managed servers with no known launch or workload
    scoctl_placement_decision_seconds        histogram: first sight of pending demand → plan
    scoctl_pending_to_ready_seconds          histogram: first sight of pending demand → Ready
    scoctl_reclaim_notices_total, scoctl_reclaim_lead_seconds,
    scoctl_reclaim_replacement_ready_seconds     the reclaim notices (`core.notice`)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, TypeVar

from scoctl.core import pause as pauses
from scoctl.core.latency import cumulative
from scoctl.core.model import Histogram, MetricCounters
from scoctl.core.model.latency import DECISION, READY
from scoctl.core.model.vocabulary import InstanceStatus, PauseScope, WorkloadStatus
from scoctl.core.notice import LEAD_BUCKETS, READY_BUCKETS, histogram, reclaim_figures
from scoctl.core.tokens import PLACEMENT_TOKENS

if TYPE_CHECKING:
    from scoctl.config.schema import Config
    from scoctl.core.reconcile import Decision
    from scoctl.state import Store

K = TypeVar("K")
INSTANCE_STATES = tuple(InstanceStatus)


@dataclass(frozen=True)
class StageSample:
    name: str
    seconds: float
    ok: bool


@dataclass(frozen=True)
class RunSample:
    """What one `scoctl run` pass measured, for `collect`."""

    stages: Sequence[StageSample] = ()
    plan_seconds: float | None = None
    calls: Mapping[tuple[str, str], int] = field(default_factory=dict)
    tokens_available: Mapping[str, int] = field(default_factory=dict)
    tokens_spent: Mapping[str, int] = field(default_factory=dict)
    succeeded_at: float | None = None  # Unix time when the whole pass succeeded
    pending: Mapping[str, int] = field(default_factory=dict)  # waiting pods / jobs by source
    leader: Mapping[str, bool] = field(default_factory=dict)  # region → this runner leads it
    controller_at: float | None = None  # Unix time of a `run --follow` pass
    now: datetime | None = None  # when the pass ended (which pauses hold)
    # this pass's voluntary disruptions: started by (workload, reason, decision: delete |
    # replace), and the candidates by (workload, reason) — started, blocked or paused
    disruptions: Mapping[tuple[str, str, str], int] = field(default_factory=dict)
    eligible: Mapping[tuple[str, str], int] = field(default_factory=dict)
    # gauges of the day-2 machinery the config knows of (`day2_gauges`)
    day2: Sequence[Gauge] = ()
    # showback (`showback`): what each workload's units cost since the last write, up to
    # `cost_at` (Unix time), and each (workload, resource)'s efficiency over the last hour
    cost: Mapping[str, float] = field(default_factory=dict)
    cost_at: float | None = None
    efficiency: Mapping[tuple[str, str], float] = field(default_factory=dict)
    # `run --follow`: whether its last config (re)load succeeded, and when one last did
    config_loaded: tuple[bool, float] | None = None


@dataclass(frozen=True)
class Gauge:
    """One gauge series set, as `_Text.metric` takes it."""

    name: str
    help_text: str
    samples: Sequence[tuple[Mapping[str, str], float]]


def disruption_sample(decisions: Iterable[Decision],
                      ) -> tuple[dict[tuple[str, str, str], int], dict[tuple[str, str], int]]:
    """What reconcile decisions started (by workload, reason, delete or replace) and how many
    candidates each (workload, reason) had: started, held by a budget, or by a pause."""
    started: dict[tuple[str, str, str], int] = {}
    eligible: dict[tuple[str, str], int] = {}
    for d in decisions:
        for x in d.started:
            key = (x.workload, x.reason.value, "replace" if x.replace_first else "delete")
            started[key] = started.get(key, 0) + 1
        for x in (*d.started, *(b.disruption for b in d.blocked), *d.paused):
            eligible[(x.workload, x.reason.value)] = eligible.get(
                (x.workload, x.reason.value), 0) + 1
    return started, eligible


def showback(config: Config, store: Store, now: datetime, last: float | None,
             ) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    """What each workload's units cost between `last` (Unix time; None: nothing yet) and
    `now`, and each (workload, resource)'s efficiency over the last hour."""
    from datetime import UTC, timedelta

    from scoctl.core.cost import Prices, costs, lifetimes
    from scoctl.core.timefmt import rfc3339

    prices = Prices(
        flavors={n: f.price for n, f in config.flavors.items() if f.price is not None},
        pools={p.name: p.price for p in config.pools if p.price is not None},
        tier_factor={t: s.price_factor for t, s in config.tiers.items()})
    pools = {p.name: p for p in config.pools}
    lives = lifetimes(store.instances(include_deleted=True))
    spent = {} if last is None else {
        x.key: x.cost for x in costs(lives, pools=pools, flavors=config.flavors, prices=prices,
                                     since=datetime.fromtimestamp(last, UTC), now=now)
        if x.cost}
    hour = now - timedelta(hours=1)
    used = {(x.key, r): v for x in costs(lives, pools=pools, flavors=config.flavors,
                                         prices=prices, since=hour, now=now,
                                         claims=store.claim_history(rfc3339(hour)),
                                         reserve=config.node_reserve)
            for r, v in x.efficiency.items() if v is not None}
    return spent, used


def day2_gauges(config: Config, store: Store, now: datetime) -> list[Gauge]:
    """Drift rollouts, gangs and capacity buffers as gauges, for dashboards."""
    from scoctl.services.buffers import buffers_now
    from scoctl.services.drift import progress

    rollouts = progress(config, store, now)
    gangs = store.gangs()
    buffers = buffers_now(config, store.claims(), store.instances(), now)
    return [
        Gauge("scoctl_drift_units", "Units of a drift rollout: on an old spec (drifted), "
              "being replaced (in_flight), replaced.",
              [({"workload": str(r["workload"]), "state": s}, float(r[s]))  # type: ignore[arg-type]
               for r in rollouts for s in ("drifted", "in_flight", "replaced")]),
        Gauge("scoctl_drift_rollout_halted", "1 while a workload's drift rollout is halted "
              "(DRIFT_ROLLOUT_HALTED; scoctl drift resume).",
              [({"workload": str(r["workload"])}, 1.0 if r["halted"] else 0.0)
               for r in rollouts]),
        Gauge("scoctl_gang_members", "Members a gang claim needs.",
              [({"workload": g.workload}, float(g.size)) for g in gangs.values()]),
        Gauge("scoctl_gang_provisioned", "1 once every member of the gang is Ready.",
              [({"workload": g.workload}, 1.0 if g.provisioned_at else 0.0)
               for g in gangs.values()]),
        Gauge("scoctl_gang_failures", "Failed launches of the gang in a row (GANG_FAILED).",
              [({"workload": g.workload}, float(g.failures)) for g in gangs.values()]),
        Gauge("scoctl_buffer_chunks", "A capacity buffer's chunks: desired now, and held.",
              [({"workload": b.workload, "kind": kind}, float(n)) for b in buffers
               for kind, n in (("desired", b.desired), ("held", b.held))]),
    ]


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


class _Text:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def metric(self, name: str, kind: str, help_text: str,
               samples: Iterable[tuple[Mapping[str, str], float]]) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            text = ",".join(f'{k}="{_label(v)}"' for k, v in sorted(labels.items()))
            number = repr(float(value)) if isinstance(value, float) else str(value)
            self.lines.append(f"{name}{{{text}}} {number}" if text else f"{name} {number}")

    def histogram(self, name: str, help_text: str,
                  buckets: Sequence[tuple[str, int]], total: float) -> None:
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} histogram")
        for le, n in buckets:
            self.lines.append(f'{name}_bucket{{le="{le}"}} {n}')
        self.lines.append(f"{name}_sum {round(total, 6)!r}")
        self.lines.append(f"{name}_count {buckets[-1][1] if buckets else 0}")

    def render(self) -> str:
        return "\n".join(self.lines) + "\n"


def _added(total: Mapping[K, int], more: Mapping[K, int]) -> dict[K, int]:
    out = dict(total)
    for key, n in more.items():
        out[key] = out.get(key, 0) + n
    return out


def fold(counters: MetricCounters, sample: RunSample) -> MetricCounters:
    """The counters after this pass: calls and tokens added, the last success moved on."""
    return MetricCounters(
        cloud_calls=_added(counters.cloud_calls, sample.calls),
        tokens_spent=_added(counters.tokens_spent, sample.tokens_spent),
        last_success=(sample.succeeded_at if sample.succeeded_at is not None
                      else counters.last_success),
        disruptions=_added(counters.disruptions, sample.disruptions),
        cost={w: round(counters.cost.get(w, 0.0) + sample.cost.get(w, 0.0), 9)
              for w in {*counters.cost, *sample.cost}},
        cost_at=sample.cost_at if sample.cost_at is not None else counters.cost_at)


def collect(store: Store, sample: RunSample) -> str:
    """Fold this pass into the persistent counters (in the state) and render every metric."""
    with store.transaction():
        counters = fold(store.metric_counters(), sample)
        store.save_metric_counters(counters)
    calls, spent = counters.cloud_calls, counters.tokens_spent
    last_success = counters.last_success
    claims = [c for c in store.claims() if c.requests]
    states = dict.fromkeys(INSTANCE_STATES, 0)
    started: dict[str, int] = {}
    flying: dict[str, int] = {}
    for inst in store.instances(include_deleted=True):
        states[inst.status] = states.get(inst.status, 0) + 1
        if inst.disruption and inst.disruption_at:  # design: Disruption
            started[inst.disruption] = started.get(inst.disruption, 0) + 1
            if inst.status != InstanceStatus.DELETED:
                flying[inst.disruption] = flying.get(inst.disruption, 0) + 1
    statuses: dict[str, int] = {}
    misplaced: list[tuple[dict[str, str], int]] = []
    for row in store.workloads():
        statuses[row.status] = statuses.get(row.status, 0) + 1
        if row.status == WorkloadStatus.QUEUED and row.last_token in PLACEMENT_TOKENS:
            misplaced.append(({"workload": row.slug, "token": str(row.last_token)}, 1))

    t = _Text()
    t.metric("scoctl_claim_pods", "gauge",
             "Pods (Slurm: nodes) in claims: pending or on scoctl nodes.",
             [({}, sum(c.pods for c in claims))])
    t.metric("scoctl_claims", "gauge", "Claims with demand.", [({}, len(claims))])
    if sample.pending:
        t.metric("scoctl_pending", "gauge",
                 "Demand still waiting at the last watch: provisionable pods (k8s) or pending "
                 "jobs (slurm).",
                 [({"source": source}, n) for source, n in sorted(sample.pending.items())])
    if sample.plan_seconds is not None:
        t.metric("scoctl_plan_duration_seconds", "gauge", "Duration of the last plan stage.",
                 [({}, round(sample.plan_seconds, 6))])
    t.metric("scoctl_cloud_calls_total", "counter", "Nova API calls by region and outcome.",
             [({"region": r, "outcome": o}, n) for (r, o), n in sorted(calls.items())])
    t.metric("scoctl_budget_tokens_available", "gauge",
             "Mutating-call tokens free now in the host-wide budget.",
             [({"region": r}, n) for r, n in sorted(sample.tokens_available.items())])
    t.metric("scoctl_budget_tokens_spent_total", "counter",
             "Mutating-call tokens spent by scoctl runs.",
             [({"region": r}, n) for r, n in sorted(spent.items())])
    t.metric("scoctl_instances", "gauge", "Instances by lifecycle state.",
             [({"state": s}, n) for s, n in sorted(states.items())])
    t.metric("scoctl_disruptions_started", "gauge",
             "Disruptions started, by reason, of the instances the state still holds "
             "(retention prunes ended ones).",
             [({"reason": r}, n) for r, n in sorted(started.items())])
    t.metric("scoctl_disruptions_in_flight", "gauge",
             "Disruptions in flight (started, the server not gone yet), by reason.",
             [({"reason": r}, n) for r, n in sorted(flying.items())])
    t.metric("scoctl_workloads", "gauge", "Workloads by status (newest row per slug).",
             [({"status": s}, n) for s, n in sorted(statuses.items())])
    t.metric("scoctl_workloads_misplaced", "gauge",
             "1 per workload queued because its pods cannot reach its units (POD_NOT_ISOLATED) "
             "or its units have no room for them (PODS_UNPLACED).", sorted(
                 misplaced, key=lambda m: (m[0]["workload"], m[0]["token"])))
    t.metric("scoctl_stage_duration_seconds", "gauge", "Duration of each stage in the last pass.",
             [({"stage": s.name}, round(s.seconds, 6)) for s in sample.stages])
    t.metric("scoctl_stage_success", "gauge", "1 when the stage's last pass succeeded.",
             [({"stage": s.name}, 1 if s.ok else 0) for s in sample.stages])
    if sample.leader:
        t.metric("scoctl_leader", "gauge",
                 "1 when this runner leads the region (makes its mutating Nova calls).",
                 [({"region": r}, 1 if leads else 0) for r, leads in sorted(sample.leader.items())])
    if last_success is not None:
        t.metric("scoctl_last_success_timestamp_seconds", "gauge",
                 "Unix time of the last fully successful pass.", [({}, float(last_success))])
    if sample.controller_at is not None:
        t.metric("scoctl_controller_pass_timestamp_seconds", "gauge",
                 "Unix time of the controller's (run --follow) last pass.",
                 [({}, float(sample.controller_at))])
    t.metric("scoctl_voluntary_disruption_decisions_total", "counter",
             "Voluntary disruptions started, by workload, reason and decision (delete: its "
             "pods move; replace: a replacement first), as Karpenter's "
             "karpenter_voluntary_disruption_decisions_total.",
             [({"workload": w, "reason": r, "decision": d}, n)
              for (w, r, d), n in sorted(counters.disruptions.items())])
    t.metric("scoctl_voluntary_disruption_eligible_units", "gauge",
             "Units that were candidates for a voluntary disruption at the last reconcile "
             "(started, held by a budget or by a pause), by workload and reason.",
             [({"workload": w, "reason": r}, n) for (w, r), n in sorted(sample.eligible.items())])
    t.metric("scoctl_workload_cost_total", "counter",
             "What each workload's units have cost (flavors[].price, pools[].price, "
             "tiers.<tier>.price_factor; per hour of each unit's life) since metrics began.",
             [({"workload": w}, c) for w, c in sorted(counters.cost.items())])
    t.metric("scoctl_workload_efficiency_ratio", "gauge",
             "Requested over provisioned (allocatable) resource-hours of each workload over "
             "the last hour, per resource (cpu, memory).",
             [({"workload": w, "resource": r}, round(v, 6))
              for (w, r), v in sorted(sample.efficiency.items())])
    for gauge in sample.day2:
        t.metric(gauge.name, "gauge", gauge.help_text, gauge.samples)
    held = pauses.active(store.pauses(), sample.now) if sample.now else {}
    t.metric("scoctl_paused", "gauge",
             "1 while an operator's pause (scoctl pause) holds launches or disruptions.",
             [({"scope": s.value}, 1 if s in held else 0) for s in PauseScope])
    if sample.config_loaded is not None:
        loaded, loaded_at = sample.config_loaded
        t.metric("scoctl_config_last_reload_successful", "gauge",
                 "1 unless the controller's last config reload (SIGHUP) was refused.",
                 [({}, 1 if loaded else 0)])
        t.metric("scoctl_config_last_reload_success_timestamp_seconds", "gauge",
                 "Unix time the controller last loaded its config (start or SIGHUP).",
                 [({}, float(loaded_at))])
    t.metric("scoctl_orphans", "gauge",
             "Servers tagged sco:managed with no known launch or workload, by region.",
             [({"region": r}, n) for r, n in sorted(store.orphan_counts().items())])
    histograms = store.histograms()
    for metric, help_text in ((DECISION, "From the first sight of pending demand (a pod or a "
                               "job) to its committed plan."),
                              (READY, "From the first sight of pending demand to every planned "
                               "node Ready.")):
        h = histograms.get(metric, Histogram())  # empty: dashboards still see the series
        t.histogram(f"scoctl_{metric}_seconds", help_text, cumulative(h), h.total)
    reclaims = reclaim_figures(store.noticed(every=True))
    t.metric("scoctl_reclaim_notices_total", "counter",
             "Reclaim notices scoctl acted on, per noticed instance.", [({}, reclaims.notices)])
    for name, help_text, values, buckets in (
            ("scoctl_reclaim_lead_seconds", "Lead time of reclaim notices: the "
             "notice's own time (scoctl's first sight for a metadata key) to the deadline.",
             reclaims.lead_seconds, LEAD_BUCKETS),
            ("scoctl_reclaim_replacement_ready_seconds", "From a reclaim notice to its "
             "replacement's node Ready.", reclaims.replacement_ready_seconds, READY_BUCKETS)):
        t.histogram(name, help_text, histogram(values, buckets), sum(values))
    return t.render()
