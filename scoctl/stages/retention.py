"""The retention stage (design: State): prune what the state no longer has to keep.

read: the config's `retention` and the clock · decide: `scoctl.core.retention.pruning` (pure:
the cutoffs and the batch) · act + record: the Store's prune methods, one short transaction per
table, at most one batch each. Events leave only through `Store.prune_events`, the one path the
schema's append-only trigger lets through. The composer runs it after reconcile (`scoctl
reconcile` and every `scoctl run` pass), never on a dry run; it calls no other stage.
"""

from __future__ import annotations

import logging

from scoctl.clock import Clock
from scoctl.config.schema import Config
from scoctl.core.retention import pruning
from scoctl.state import Store

log = logging.getLogger(__name__)


def prune_state(config: Config, store: Store, clock: Clock) -> dict[str, int]:
    """Prune one batch of old events, ended instances and settled launches; returns the rows
    pruned per table (tables with none left out)."""
    keep = config.retention
    plan = pruning(events=keep.events, instances=keep.instances, launches=keep.launches,
                   now=clock.now())
    pruned = {
        "events": store.prune_events(plan.events_before, plan.batch),
        "instances": store.prune_instances(plan.instance_statuses, plan.instances_before,
                                           plan.batch),
        "launches": store.prune_launches(plan.launch_statuses, plan.launches_before,
                                         plan.batch),
    }
    pruned = {table: rows for table, rows in pruned.items() if rows}
    if pruned:
        log.info("retention: pruned %s", ", ".join(f"{n} {t}" for t, n in pruned.items()))
    return pruned
