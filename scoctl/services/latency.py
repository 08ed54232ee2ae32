"""Placement latency (design: Controller): read the sightings, plans and instances → `core.latency`
decides → record the histograms, the recent samples and what is still open.

`record_sightings` runs after an intake with the claims it changed and when their demand
began; `record_progress` after a plan or a reconcile — in every driver (``run --once``,
``--interval`` and the controller). Both are one transaction each; a
crash between an intake and its sighting loses one observation, never any demand.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, MutableMapping

from scoctl.core.latency import all_ready, observe, progress, sight
from scoctl.core.model import Histogram, LatencySample, Sighting
from scoctl.state import Store


def claim_sizes(store: Store) -> dict[str, int]:
    """Pods per claim with demand: what a later claim is compared with to tell growth."""
    return {c.workload: c.pods for c in store.claims() if c.requests}


def record_sightings(store: Store, changed: Collection[str], sizes: MutableMapping[str, int],
                     seen: Mapping[str, float], now: float) -> list[Sighting]:
    """Open (or extend) the sightings of the `changed` claims that grew; `seen` holds when each
    workload's new demand began (`WatchResult.seen`: its pods' creation, its jobs' submission;
    else `now`, the pass that read it). Updates `sizes`."""
    if not changed:
        return []
    with store.transaction():
        current = {s.workload: s for s in store.sightings()}
        out: list[Sighting] = []
        for workload in sorted(changed):
            claim = store.claim(workload)
            pods = claim.pods if claim is not None and claim.requests else 0
            grew = pods > sizes.get(workload, 0)
            sizes[workload] = pods
            if claim is None:
                continue
            new = sight(current.get(workload), workload, claim.version, grew=grew,
                        seen=min(seen.get(workload, now), now))
            if new is not None and new != current.get(workload):
                out.append(new)
        store.save_sightings(out)
    return out


def record_progress(store: Store, now: float, *, give_up: float) -> list[LatencySample]:
    """Observe the decisions and Ready fleets reached by `now` (Unix seconds); returns the
    samples recorded."""
    with store.transaction():
        sightings = store.sightings()
        if not sightings:
            return []
        names = {s.workload for s in sightings}
        plans = store.plans(only=names)
        planned = {w: p.claim_version for w, p in plans.items()}
        ready = {w: all_ready(sum(u.units for u in p.pools),
                              [i.status for i in store.instances(workload=w)])
                 for w, p in plans.items()}
        decision = progress(sightings, planned, ready, now, give_up=give_up)
        histograms: dict[str, Histogram] = {}
        if decision.observations:
            stored = store.histograms()
            for o in decision.observations:
                histograms[o.metric] = observe(
                    histograms.get(o.metric, stored.get(o.metric, Histogram())), o.seconds)
        samples = [LatencySample(o.metric, o.workload, o.seconds, now)
                   for o in decision.observations]
        store.save_latency(histograms, samples)
        store.save_sightings(decision.keep, decision.drop)
    return samples
