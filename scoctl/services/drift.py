"""Drift's inputs (design: Drift) read from the config and the state, and `scoctl drift resume`.

`view` builds what `core.reconcile.decide` compares a region's units against
(`core.reconcile.DriftView`): each (workload, pool)'s current launch spec (`core.spec.pool_spec`,
the same rule acquire records), the Node labels the config wants, and — only while some unit
has drifted — what the event log says was recorded already (`UNIT_DRIFTED` per unit,
`DRIFT_ROLLOUT_HALTED` per workload and hashes, the last `DRIFT_RESUMED`), so each is written
once. `UNIT_DRIFTED` names the fields that changed from what the state recorded of the unit's
spec at launch (`launch_specs`); for units launched before specs were recorded, from the specs
this process computed (`_SEEN`, bounded: after a SIGHUP reload). The image is compared by the id
its name resolves to (`image_id`, asked of Nova by reconcile each pass; `status` uses the id
reconcile last recorded, `Store.image_ids`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from scoctl.config.schema import Config, Region
from scoctl.core import drift
from scoctl.core.constraints import workload_taint
from scoctl.core.model import InstanceRecord, NewEvent
from scoctl.core.model.vocabulary import DisruptionReason, InstanceStatus
from scoctl.core.reconcile import DriftView
from scoctl.core.spec import CANONICAL, LaunchSpec, hash_of, pool_spec, stored
from scoctl.core.timefmt import parse_rfc3339
from scoctl.errors import ConfigError
from scoctl.state import Store

_SEEN: dict[str, dict[str, Any]] = {}
_SEEN_MOST = 256

DRIFT_TOKENS = frozenset({"UNIT_DRIFTED", "DRIFT_ROLLOUT_HALTED", "DRIFT_RESUMED"})


def specs_of(config: Config, region: Region, template: str,
             pairs: Iterable[tuple[str, str]],
             image_id: str | None = None,
             slurm: frozenset[tuple[str, str]] = frozenset()) -> dict[tuple[str, str], LaunchSpec]:
    """The current launch spec of each (workload, pool) of `pairs` whose pool is the region's
    (none when the region has no launch settings), the image by `image_id` when known; the
    pairs in `slurm` are Slurm CLOUD nodes (no workload taint)."""
    launch = region.launch
    if launch is None:
        return {}
    pools = {p.name: p for p in config.pools if p.region == region.name}
    out: dict[tuple[str, str], LaunchSpec] = {}
    for workload, name in sorted(set(pairs)):
        pool = pools.get(name)
        if pool is None:
            continue
        out[(workload, name)] = pool_spec(
            flavor=pool.flavor, az=pool.az, tier=pool.tier, image=launch.image,
            networks=launch.networks, security_groups=launch.security_groups,
            key_name=launch.key_name, server_group=launch.server_group,
            user_data_template=template, image_id=image_id,
            workload_taints=(workload_taint(workload),)
            if config.exclusive(workload) and (workload, name) not in slurm else ())
    return out


def labels_of(config: Config, region: Region,
              pairs: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict[str, str]]:
    """The labels each (workload, pool)'s Nodes carry beyond scoctl's own: the pool's
    `labels`, then the workload's `node_labels` (as acquire hands them to user data)."""
    pools = {p.name: p for p in config.pools if p.region == region.name}
    out: dict[tuple[str, str], dict[str, str]] = {}
    for workload, name in sorted(set(pairs)):
        pool = pools.get(name)
        if pool is None:
            continue
        spec = config.workload(workload)
        out[(workload, name)] = {**pool.labels, **(spec.node_labels if spec else {})}
    return out


def _remember(specs: Mapping[tuple[str, str], LaunchSpec]) -> dict[str, dict[str, Any]]:
    for spec in specs.values():
        for version in CANONICAL:
            _SEEN.setdefault(hash_of(spec, version), stored(spec))
    while len(_SEEN) > _SEEN_MOST:
        _SEEN.pop(next(iter(_SEEN)))
    return dict(_SEEN)


def _slurm(config: Config, store: Store, workload: str) -> bool:
    """A Slurm workload (configured so, or its claim's source): its units are Slurm CLOUD
    nodes, which carry no workload taint."""
    spec = config.workload(workload)
    if spec is not None:
        return spec.source == "slurm"
    claim = store.claim(workload)
    return claim is not None and claim.source == "slurm"


def view(config: Config, store: Store, region: Region, tracked: Iterable[InstanceRecord],
         template: str, image_id: str | None = None,
         unresolved_image: str | None = None) -> DriftView:
    """What drift compares the region's `tracked` instances against (module docstring), the
    launch image by `image_id` (what its name resolves to now); `unresolved_image`: the
    region does not have the image the config names (every rollout halts)."""
    rows = list(tracked)
    pairs = {(i.workload, i.pool) for i in rows if i.workload and i.pool}
    slurm = frozenset(pair for pair in pairs if _slurm(config, store, pair[0]))
    specs = specs_of(config, region, template, pairs, image_id, slurm)
    labels = labels_of(config, region, pairs)
    ready = [i for i in rows if i.status == InstanceStatus.READY]
    found = drift.drifted(ready, specs)
    flying = [i for i in ready if i.disruption == DisruptionReason.DRIFTED]
    known = _remember(specs)
    if not found and not flying:
        return DriftView(specs=specs, known=known, node_labels=labels,
                         unresolved_image=unresolved_image)
    every_row = store.instances(region=region.name, include_deleted=True)
    names = {d.workload for d in found} | {i.workload for i in flying if i.workload}
    # from the oldest unit of a workload with drift: the rollout's events came after it
    since = min(i.created for i in every_row if i.workload in names)
    noted: set[str] = set()
    rolled: list[tuple[str, str, str]] = []
    halted: list[tuple[str | None, str, str]] = []
    resumed: dict[str, str] = {}
    every = ""
    for event in store.events(since=since):
        if event.token not in DRIFT_TOKENS:
            continue
        if event.token == "UNIT_DRIFTED":
            noted.add(str(event.detail.get("server", "")))
            rolled.append((event.workload or "", str(event.detail.get("spec") or ""),
                           str(event.detail.get("to") or "")))
        elif event.token == "DRIFT_ROLLOUT_HALTED":
            hashes = ",".join(str(h) for h in event.detail.get("hashes", ()))
            halted.append((event.workload, hashes, event.ts))
        elif event.workload:
            resumed[event.workload] = max(resumed.get(event.workload, ""), event.ts)
        else:
            every = max(every, event.ts)
    kept = drift.kept_after_revert(rolled, specs)
    if kept:
        found = drift.drifted(ready, specs, kept=kept)
    known.update(store.launch_specs(i.spec_hash for i in ready if i.spec_hash and i.id in
                                    {d.server_id for d in found}))
    if every:
        for name in {w for w, _ in pairs} | set(resumed):
            resumed[name] = max(resumed.get(name, ""), every)
    stopped = frozenset((w, h) for w, h, ts in halted
                        if w and (w not in resumed
                                  or parse_rfc3339(ts) >= parse_rfc3339(resumed[w])))
    current = {h for name in {w for w, _ in pairs} for h in drift.current_hashes(name, specs)}
    drifting = {d.server_id for d in found} | {i.id for i in flying}
    first = min((i.created for i in ready if i.id in drifting), default=since)
    launched = tuple(i for i in every_row if i.spec_hash in current and i.created >= first)
    return DriftView(specs=specs, known=known, node_labels=labels, noted=frozenset(noted),
                     halted=stopped, resumed=resumed, launched=launched, kept=kept,
                     unresolved_image=unresolved_image)


def resume(store: Store, workload: str | None) -> int:
    """`scoctl drift resume`: record `DRIFT_RESUMED` (for `workload`, else every workload);
    the failed replacements before it no longer halt the rollout. Returns the event's id."""
    return store.append_event(NewEvent(workload, "DRIFT_RESUMED", "info",
                                       {"workload": workload}))


def halted_or_why(config: Config, store: Store, now: datetime,
                  workload: str | None) -> str | None:
    """None when `scoctl drift resume` has a halted rollout to go on with (`workload`'s, else
    any); else why not, as its error says it."""
    rollouts = {str(r["workload"]): r for r in progress(config, store, now)}
    if workload is None:
        if any(r["halted"] for r in rollouts.values()):
            return None
        return "no drift rollout is halted: nothing to resume"
    rollout = rollouts.get(workload)
    if rollout is None:
        return f"--workload {workload}: no drift rollout (every unit runs its current spec)"
    if not rollout["halted"]:
        return (f"--workload {workload}: the drift rollout is not halted (phase "
                f"{rollout['phase']}): nothing to resume")
    return None


def progress(config: Config, store: Store, now: datetime) -> list[dict[str, object]]:
    """Each workload's rollout (`status`, design: Drift), for workloads with drifted units or
    units replaced for drift: ready units not on the current spec (`drifted`, those in flight
    included), in flight, replaced (deleted for drift), the rollout's phase and its failed
    replacements in a row. Empty when the template cannot be read."""
    try:
        template = config.user_data_template()
    except ConfigError:
        return []
    rows = store.instances(include_deleted=True)
    drifted_ids: set[str] = set()
    views: list[DriftView] = []
    for region in config.regions:
        mine = [i for i in rows if i.region == region.name
                and i.status != InstanceStatus.DELETED]
        image = store.image_ids(region.name).get(region.launch.image) if region.launch else None
        seen = view(config, store, region, mine, template, image)
        views.append(seen)
        drifted_ids |= {d.server_id for d in drift.drifted(
            [i for i in mine if i.status == InstanceStatus.READY], seen.specs, kept=seen.kept)}
    specs = {k: v for seen in views for k, v in seen.specs.items()}
    halted = {key for seen in views for key in seen.halted}  # DRIFT_ROLLOUT_HALTED, standing
    resumed: dict[str, str] = {}
    for seen in views:
        for name, ts in seen.resumed.items():
            resumed[name] = max(resumed.get(name, ""), ts)
    out: list[dict[str, object]] = []
    names = sorted({i.workload for i in rows if i.workload and (
        i.id in drifted_ids or i.disruption == DisruptionReason.DRIFTED)})
    for name in names:
        knobs = config.disruption_of(name).drift
        r = drift.rollout(name, drift.current_hashes(name, specs), rows, now=now,
                          soak=knobs.soak, halt_after=knobs.halt_after,
                          resumed=resumed.get(name))
        if (name, ",".join(r.hashes)) in halted:  # halted for a reason beyond its failures
            r = replace(r, phase=drift.Phase.HALTED, soaking=False)
        mine = [i for i in rows if i.workload == name]
        out.append({
            "workload": name,
            "drifted": sum(1 for i in mine if i.id in drifted_ids),
            "in_flight": sum(1 for i in mine if i.disruption == DisruptionReason.DRIFTED
                             and i.status != InstanceStatus.DELETED),
            "replaced": sum(1 for i in mine if i.disruption == DisruptionReason.DRIFTED
                            and i.status == InstanceStatus.DELETED),
            "phase": str(r.phase), "soaking": r.soaking, "failures": r.failures,
            "halted": r.phase is drift.Phase.HALTED})
    return out
