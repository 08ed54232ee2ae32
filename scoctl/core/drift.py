"""Drift (design: Drift), pure: which units no longer run what the config says, in what order
they are replaced, and whether a workload's rollout may go on.

- `drifted`: the ready units whose recorded spec hash is not their (workload, pool)'s current
  spec under any known version (`core.spec.matches`); they become `drifted` candidates of the
  disruption seam (`core.disruption`), replaced first, under the `drifted` budgets.
- `order`: empty units first, then busy ones; within each, round-robin across pools, each
  pool's oldest first — so one pool is never emptied of old units before another starts.
- `rollout`: a workload's rollout onto its current hashes — ``canary`` until a unit on one of
  them has stayed Ready for `drift.soak` (one drifted unit at a time until a replacement is
  Ready, then none while it soaks), ``open`` once one has, ``halted`` after
  `drift.halt_after` failed launches in a row on them (launch or registration timeout,
  ERROR) since the last resume, or while the region lacks the launch image (`held`): old
  units stay.
- `meta_patches`: Node labels (`workloads[].node_labels`, `pools[].labels`) that differ from
  the config: patched in place, no new server (`DRIFT_PATCHED`).

No I/O, no clock: time comes in as `now`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from scoctl.core.constraints import HOSTNAME_LABEL, INSTANCE_TYPE_LABEL, REGION_LABEL, ZONE_LABEL
from scoctl.core.disruption import Disruption, Unit, disruption
from scoctl.core.model import InstanceRecord
from scoctl.core.model.vocabulary import DisruptionReason, InstanceStatus
from scoctl.core.spec import LaunchSpec, changed_fields, hashes_of
from scoctl.core.timefmt import parse_rfc3339


class Phase(StrEnum):
    CANARY = "canary"
    OPEN = "open"
    HALTED = "halted"


@dataclass(frozen=True)
class Drifted:
    """A unit whose spec no longer matches: the fields that changed (empty when the spec it
    was launched from is not known any more, only its hash)."""

    server_id: str
    name: str
    workload: str
    pool: str
    fields: tuple[str, ...]


@dataclass(frozen=True)
class Rollout:
    """A workload's rollout onto its current spec hashes: its phase, the failed launches in a
    row on them (since `resumed`), and the hashes (sorted) it rolls onto."""

    workload: str
    phase: Phase
    failures: int
    hashes: tuple[str, ...]
    soaking: bool = False  # a canary: a unit on them is Ready, not yet for the soak

    def room(self, in_flight: int) -> int | None:
        """How many more drifted units may start now, before the budgets (None: only the
        budgets limit): none when halted; a canary is one at a time, and none more while a
        unit on the new spec soaks (design: Drift: it stays Ready for the soak before the rest
        of the rollout starts, even once its old unit is gone)."""
        if self.phase is Phase.HALTED:
            return 0
        if self.phase is Phase.CANARY:
            return 0 if self.soaking else max(0, 1 - in_flight)
        return None


def kept_after_revert(noted: Iterable[tuple[str, str, str]],
                      specs: Mapping[tuple[str, str], LaunchSpec]) -> frozenset[tuple[str, str]]:
    """The (workload, hash)s whose units are ordinary units although their hash is not the
    current spec (design: Drift: reverting the config mid-rollout ends the rollout, and the
    replacements already launched stay). `noted` is each recorded `UNIT_DRIFTED` as
    (workload, the unit's hash, the hash it was to be replaced on): a rollout from a hash the
    workload's spec is again to one it no longer is was reverted, and its target is kept —
    until the spec changes once more (then every unit off the new spec drifts)."""
    current: dict[str, set[str]] = {}
    out: set[tuple[str, str]] = set()
    for workload, was, to in noted:
        if workload not in current:
            current[workload] = current_hashes(workload, specs)
        now = current[workload]
        if to and was in now and to not in now:
            out.add((workload, to))
    return frozenset(out)


def drifted(units: Iterable[InstanceRecord], specs: Mapping[tuple[str, str], LaunchSpec],
            known: Mapping[str, Mapping[str, Any]] | None = None,
            kept: frozenset[tuple[str, str]] = frozenset()) -> tuple[Drifted, ...]:
    """The `units` whose recorded hash is not the current spec of their (workload, pool)
    (`specs`); a (workload, pool) the config no longer has is not drift (the planner removes
    it), a unit recorded with no hash is taken as current, and so is one on a hash the
    workload `kept` after a revert (`kept_after_revert`). `known[hash]` is what was kept of a
    spec recorded or seen before (`core.spec.stored`; the fields are named from it). By name."""
    out: list[Drifted] = []
    current: dict[LaunchSpec, frozenset[str]] = {}  # each spec's hashes, computed once
    for inst in sorted(units, key=lambda i: i.name):
        if not (inst.workload and inst.pool):
            continue
        spec = specs.get((inst.workload, inst.pool))
        if spec is None or not inst.spec_hash:
            continue
        if spec not in current:
            current[spec] = hashes_of(spec)
        if inst.spec_hash in current[spec] or (inst.workload, inst.spec_hash) in kept:
            continue
        old = (known or {}).get(inst.spec_hash or "")
        out.append(Drifted(inst.id, inst.name, inst.workload, inst.pool,
                           changed_fields(old, spec) if old is not None else ()))
    return tuple(out)


def order(units: Sequence[Unit]) -> tuple[Unit, ...]:
    """The order drifted units are replaced in: empty (idle) units first, then busy ones;
    within each, round-robin across pools (by name), each pool's oldest first (by `created`,
    then name)."""
    out: list[Unit] = []
    for empty in (True, False):
        queues: dict[str, list[Unit]] = {}
        for unit in units:
            if (unit.idle_since is not None) is empty:
                queues.setdefault(unit.pool, []).append(unit)
        lanes = [sorted(q, key=lambda u: (u.created or "", u.name))
                 for _, q in sorted(queues.items())]
        while any(lanes):
            for lane in lanes:
                if lane:
                    out.append(lane.pop(0))
    return tuple(out)


FAILED = frozenset({InstanceStatus.ERROR})


def _failed(inst: InstanceRecord) -> bool:
    """A launch that never became a ready unit: ERROR, or gone with a fault before Ready
    (launch or registration timeout, an ERROR server) — not a reclaim after Ready."""
    if inst.ready_at:
        return False
    return inst.status in FAILED or (inst.status in (InstanceStatus.DELETING,
                                                     InstanceStatus.DELETED)
                                     and bool(inst.fault))


def rollout(workload: str, hashes: Iterable[str], instances: Iterable[InstanceRecord], *,
            now: datetime, soak: float, halt_after: int,
            resumed: str | None = None) -> Rollout:
    """The workload's rollout onto `hashes` (its pools' current spec hashes, every version):
    halted after `halt_after` failed launches in a row on them (by creation, counted after
    the last one that became Ready and since `resumed`); else open once one of them has been
    Ready for `soak` seconds and is still ready; else canary (`soaking` once one is Ready)."""
    current = frozenset(hashes)
    mine = sorted((i for i in instances if i.workload == workload
                   and i.spec_hash in current), key=lambda i: (i.created, i.name))
    failures = 0
    since = parse_rfc3339(resumed) if resumed else None
    for inst in mine:
        if since is not None and parse_rfc3339(inst.created) < since:
            continue
        if inst.ready_at:
            failures = 0
        elif _failed(inst):
            failures += 1
    ready = [(now - parse_rfc3339(i.ready_at)).total_seconds() for i in mine
             if i.status == InstanceStatus.READY and i.ready_at]
    if halt_after > 0 and failures >= halt_after:
        phase = Phase.HALTED
    elif any(age >= soak for age in ready):
        phase = Phase.OPEN
    else:
        phase = Phase.CANARY
    return Rollout(workload, phase, failures, tuple(sorted(current)),
                   soaking=phase is Phase.CANARY and bool(ready))


def held(r: Rollout, unresolved_image: str | None) -> Rollout:
    """`r`, halted when its region does not have the launch image the config names: no unit
    is replaced onto a spec nothing can launch (the rollout goes on once the image resolves,
    its spec hashes then naming the image's id)."""
    if unresolved_image is None or r.phase is Phase.HALTED:
        return r
    return replace(r, phase=Phase.HALTED, soaking=False)


def current_hashes(workload: str, specs: Mapping[tuple[str, str], LaunchSpec]) -> set[str]:
    """Every hash (all versions) of the workload's current specs."""
    out: set[str] = set()
    for (name, _), spec in specs.items():
        if name == workload:
            out |= hashes_of(spec)
    return out


def candidates(units: Sequence[Unit], found: Sequence[Drifted], rollouts: Mapping[str, Rollout],
               in_flight: Sequence[Disruption]) -> tuple[Disruption, ...]:
    """The `drifted` candidates: the drifted `units` (not yet disrupted), in `order`, at most
    each workload's rollout `room` (in flight: its drifted disruptions); replaced first, but
    for Slurm CLOUD nodes (drained, then powered down once idle)."""
    ids = {d.server_id for d in found}
    out: list[Disruption] = []
    taken: dict[str, int] = {}
    for unit in order([u for u in units if u.server_id in ids]):
        r = rollouts.get(unit.workload)
        if r is None:
            continue
        flying = sum(1 for d in in_flight if d.workload == unit.workload
                     and d.reason is DisruptionReason.DRIFTED)
        room = r.room(flying + taken.get(unit.workload, 0))
        if room is not None and room <= 0:
            continue
        taken[unit.workload] = taken.get(unit.workload, 0) + 1
        # a Slurm CLOUD node is drained and powered down once idle: its next resume launches
        # on the new spec (Slurm resumes a node by its name, there is no replacement to wait for)
        out.append(replace(disruption(unit, DisruptionReason.DRIFTED),
                           replace_first=not unit.slurm))
    return tuple(out)


# labels that are not the config's to take away, whatever it once said
SCOCTL_LABELS = frozenset({ZONE_LABEL, REGION_LABEL, INSTANCE_TYPE_LABEL, HOSTNAME_LABEL})


def meta_patches(labels: Mapping[str, str], want: Mapping[str, str],
                 given: Iterable[str] = ()) -> dict[str, str | None]:
    """The labels to patch onto a Node holding `labels` so it carries `want` (the config's
    `pools[].labels` and `workloads[].node_labels`): those missing or different, and — as
    None, which a merge patch deletes — those of the keys the config `given` it before that
    the config no longer names. Labels scoctl never gave the Node are never removed."""
    patch: dict[str, str | None] = {k: v for k, v in sorted(want.items()) if labels.get(k) != v}
    for key in sorted(set(given) - set(want)):
        if key in labels and key not in SCOCTL_LABELS and not key.startswith("sco/"):
            patch[key] = None
    return patch


def label_keys(want: Mapping[str, str]) -> str:
    """What an instance records of the labels it was given (`InstanceRecord.labels`)."""
    return ",".join(sorted(want))


def given_keys(recorded: str | None) -> tuple[str, ...]:
    """The keys an instance's `InstanceRecord.labels` names."""
    return tuple(k for k in (recorded or "").split(",") if k)
