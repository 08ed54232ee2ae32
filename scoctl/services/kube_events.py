"""The Kubernetes Event writer (design: Visibility): what should stand (`core.kube_events`),
written at
most `RATE` a second, never failing a pass.

`EventWriter.sync` takes one pass's facts — the pods, plans, workloads, instances, open notices
and the disruptions the budget held back — turns them into the Events that should stand, and
makes the writes `core.kube_events.plan_writes` asks for, taking a token of its `TokenBucket`
for each (``RATE`` 10 a second, a burst of ``BURST``). What the bucket cannot cover within
`wait` seconds is kept as a backlog: `drain` writes it as tokens come (the controller calls it
while it idles, its writer's `wait` 0, so no pass waits for the bucket), until the next sync
recomputes the facts and replaces it.
A write that fails is logged and counted (`failures`), and its series stays as it was, so the
next pass tries again; nothing raises into the pass.

A create that finds its Event there already (409: scoctl restarted, or the previous ``run
--once`` wrote it) reads it and continues its series (`core.kube_events.adopted`), so a
restart writes nothing for a fact that still stands.

The writer keeps the series between passes (the controller keeps one writer for its life).
"""

from __future__ import annotations

import logging
import socket
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scoctl.adapters.kube_events import EventRecorder
from scoctl.core import kube_events as ke
from scoctl.core.intake.k8s import K8sPolicy
from scoctl.core.model import (
    InstanceRecord,
    NoticedRecord,
    PlanWorkloadRecord,
    PodInfo,
    WorkloadRecord,
)
from scoctl.errors import ApiError

log = logging.getLogger(__name__)

RATE = 10.0  # Event writes per second at most (design: Visibility)
BURST = 10
WAIT_S = 1.0  # the longest one pass waits for tokens; the rest is the next pass's


class TokenBucket:
    """`rate` tokens a second up to `burst` (client-go's flowcontrol token bucket); `clock`
    and `sleep` are injectable."""

    def __init__(self, rate: float = RATE, burst: int = BURST, *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.rate, self.burst = rate, burst
        self._clock, self._sleep = clock, sleep
        self._tokens = float(burst)
        self._at = clock()

    def now(self) -> float:
        return self._clock()

    def _fill(self) -> None:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
        self._at = now

    def wait_for(self, count: int) -> float:
        """Seconds until `count` tokens (at most `burst`) are there (0: they are)."""
        self._fill()
        return max(0.0, (min(float(count), float(self.burst)) - self._tokens) / self.rate)

    def available(self) -> int:
        """The tokens there now (whole ones)."""
        self._fill()
        return int(self._tokens)

    def take(self, wait: float = 0.0) -> bool:
        """Take one token, waiting for it at most `wait` seconds; False when none came."""
        self._fill()
        if self._tokens < 1.0:
            need = (1.0 - self._tokens) / self.rate
            if need > wait:
                return False
            self._sleep(need)
            self._fill()
            self._tokens = max(self._tokens, 1.0)
        self._tokens -= 1.0
        return True


@dataclass
class SyncResult:
    """One sync: the writes made (by op), deferred to the next pass, failed."""

    created: int = 0
    patched: int = 0
    deferred: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def writes(self) -> int:
        return self.created + self.patched

    def as_dict(self) -> dict[str, int]:
        return {"created": self.created, "patched": self.patched, "deferred": self.deferred,
                "failed": self.failed}


@dataclass(frozen=True)
class Facts:
    """What one pass knows that Events report."""

    pods: Sequence[PodInfo]
    policy: K8sPolicy
    plans: Mapping[str, PlanWorkloadRecord]
    workloads: Mapping[str, WorkloadRecord]
    instances: Sequence[InstanceRecord] = ()
    noticed: Sequence[NoticedRecord] = ()
    blocked: Sequence[ke.Blocked] = ()


class EventWriter:
    """Keeps scoctl's Event series and writes them; see the module docstring."""

    def __init__(self, *, bucket: TokenBucket | None = None, host: str | None = None,
                 wall: Callable[[], float] = time.time, wait: float = WAIT_S,
                 most: int | None = None) -> None:
        self.bucket = bucket or TokenBucket()
        self.host = socket.gethostname() if host is None else host
        self.wall = wall
        self.wait = wait
        # writes one sync or drain makes at most (None: as many as the bucket allows); the
        # rest is the backlog. The controller's writer makes few at a time, so that its
        # loop — and a batch window closing — never waits behind a burst of ten writes
        self.most = most
        self.series: dict[ke.Key, ke.Series] = {}
        self.failures = 0  # every failed write since the start
        # the disruptions the budget held back in the last reconcile (passes without one keep
        # them: a steady state writes nothing)
        self.blocked: tuple[ke.Blocked, ...] = ()
        self.writes = 0
        # what the last sync could not write for lack of tokens, in order (`drain`)
        self.backlog: list[tuple[ke.Wanted, ke.Series | None]] = []
        self.pod_memo = ke.PodEventMemo()  # what pod_events worked out, pass to pass
        # the facts of the last full sync, and until when its outcome stands as it is: the
        # first refresh of a series it wanted, or the first forgetting of an ended one
        self._last: Facts | None = None
        self._stands_until = 0.0
        # a write since then that failed, or left a series other than the one it wrote (an
        # Event found there, or gone): the next sync works everything out again
        self._stale = False

    def wanted(self, facts: Facts) -> list[ke.Wanted]:
        return [*ke.pod_events(facts.pods, facts.policy, facts.plans, facts.workloads,
                               self.pod_memo),
                *ke.node_events(facts.instances, facts.noticed, facts.blocked)]

    def sync(self, recorder: EventRecorder, facts: Facts) -> SyncResult:
        """Write what `facts` call for (see the module docstring). Never raises an ApiError.
        What the bucket cannot cover within `wait` is kept as the backlog (`drain`).

        Facts the same as the last sync's (the very same pod values, equal records), before any
        series it wanted is due for a refresh and any ended one for forgetting, call for
        what that sync called for: what it could not write, its backlog, and nothing more. So
        such a sync writes on from the backlog and leaves the series as they are, without
        working the Events out again over every cached pod (a steady controller's every pass:
        0.25–0.5 s at 40,000 pending pods)."""
        now = self.wall()
        if not self._stale and self._same(facts) and now < self._stands_until:
            return self._write_backlog(recorder, len(self.backlog),
                                       self.bucket.now() + self.wait)
        wanted = self.wanted(facts)
        todo = ke.needed(wanted, self.series, now)
        result = SyncResult()
        updates: dict[ke.Key, ke.Series] = {}
        deadline = self.bucket.now() + self.wait
        self._stale = False
        done = self._write_all(recorder, todo, now, deadline, result, updates)
        self.backlog = todo[done:]
        self.series = ke.settle(self.series, wanted, updates, now)
        self._stands_until = self._until(wanted)
        self.writes += result.writes
        self._last = facts
        return result

    def _same(self, facts: Facts) -> bool:
        """Whether `facts` are the last full sync's: its pods the very same values (a cache
        replaces a pod that changed), the records equal."""
        last = self._last
        if last is None:
            return False
        if last is facts:
            return True
        if len(last.pods) != len(facts.pods) or any(
                a is not b for a, b in zip(last.pods, facts.pods, strict=True)):
            return False
        return (last.policy, last.plans, last.workloads, last.instances, last.noticed,
                last.blocked) == (facts.policy, facts.plans, facts.workloads,
                                  facts.instances, facts.noticed, facts.blocked)

    def _until(self, wanted: Sequence[ke.Wanted]) -> float:
        """When the series as they stand after a sync wanting `wanted` call for a write or a
        change without any new fact: the first refresh of a wanted series (`ke.needed`), the
        first forgetting of an ended one (`ke.settle`)."""
        keys = {w.key for w in wanted}
        refresh = min((s.last for k, s in self.series.items() if k in keys),
                      default=float("inf")) + ke.REFRESH_S
        forget = min((s.last for s in self.series.values() if not s.active),
                     default=float("inf")) + ke.FORGET_S
        return min(refresh, forget)

    def drain(self, recorder: EventRecorder) -> SyncResult:
        """Write what the last sync left for lack of tokens, as far as the bucket has tokens
        now (no wait): the controller calls it while it idles, so Events keep flowing at
        `RATE` without a pass waiting for them. Each is checked against the series again
        just before it is written: only the head of the backlog the tokens cover, so a
        backlog of 40,000 (every pending pod of a large burst) costs a drain what it writes,
        not a pass over all of them each tenth of a second (that held the controller's idle
        loop, and the batch window closing meanwhile, for tens of milliseconds each time)."""
        room = self.bucket.available() if self.backlog else 0
        return self._write_backlog(recorder, room, self.bucket.now())

    def _write_backlog(self, recorder: EventRecorder, room: int, deadline: float
                       ) -> SyncResult:
        """Write the head of the backlog, `room` (at most `most`) of it, waiting for tokens
        until `deadline`; the rest stays the backlog."""
        result = SyncResult()
        if self.most is not None:
            room = min(room, self.most)
        if not room:
            return result
        now = self.wall()
        head, rest = self.backlog[:room], self.backlog[room:]
        todo = ke.needed([w for w, _ in head], self.series, now)
        updates: dict[ke.Key, ke.Series] = {}
        done = self._write_all(recorder, todo, now, deadline, result, updates)
        result.deferred += len(rest)
        self.backlog = todo[done:] + rest
        self.series.update(updates)
        self.writes += result.writes
        return result

    def next_drain(self) -> float | None:
        """Seconds until the backlog can go on: the next token (None: no backlog). The
        controller drains as tokens come, so a deferred Event waits no longer than the rate
        limit makes it — not for a whole burst, which a pass due meanwhile would take."""
        return self.bucket.wait_for(1) if self.backlog else None

    def _write_all(self, recorder: EventRecorder, todo: Sequence[tuple[ke.Wanted,
                                                                        ke.Series | None]],
                   now: float, deadline: float, result: SyncResult,
                   updates: dict[ke.Key, ke.Series]) -> int:
        """Write `todo` in order until the bucket runs dry by `deadline`; how many were done
        (written, failed or found written), at most `most`. The rest counts as deferred, none
        of it built."""
        for index, (w, old) in enumerate(todo):
            if self.most is not None and index >= self.most:
                result.deferred += len(todo) - index
                return index
            if not self._take(deadline, result):
                result.deferred += len(todo) - index - 1
                return index
            write = ke.write_of(w, old, now, host=self.host)
            try:
                found = self._write(recorder, write, w, now, deadline, result)
            except ApiError as exc:
                self._stale = True
                self.failures += 1
                result.failed += 1
                result.errors.append(str(exc))
                log.warning("kubernetes events: %s", exc)
                continue
            if found is not write.series:
                self._stale = True
            if found is not None:
                updates[write.key] = found
        return len(todo)

    def _take(self, deadline: float, result: SyncResult) -> bool:
        if self.bucket.take(max(0.0, deadline - self.bucket.now())):
            return True
        result.deferred += 1
        return False

    def _write(self, recorder: EventRecorder, write: ke.Write, wanted: ke.Wanted, now: float,
               deadline: float, result: SyncResult) -> ke.Series | None:
        """One write, a token taken for each call that writes; the series it leaves, or None
        (nothing known: the next pass tries again). A create that meets its Event continues
        the series found there (a patch only when that series asks for one); a patch that
        finds its Event gone starts a new series. Its first token is taken already."""
        if write.op == "create":
            if recorder.create_event(write.namespace, write.body):
                result.created += 1
                return write.series
            raw = recorder.read_event(write.namespace, write.name)
            found = ke.adopted(raw, write.key) if raw is not None else None
            if found is None:  # not scoctl's, or gone again meanwhile: the next pass
                return None
            again = ke.plan_writes([wanted], {write.key: found}, now, host=self.host)
            if not again or not self._take(deadline, result):
                return found  # as it stands: a patch it still needs comes next pass
            if recorder.patch_event(found.namespace, found.name, again[0].body):
                result.patched += 1
                return again[0].series
            return None
        if recorder.patch_event(write.namespace, write.name, write.body):
            result.patched += 1
            return write.series
        # gone (the TTL, or someone deleted it): a new series, next pass
        self.series.pop(write.key, None)
        return None


def facts_of(pods: Iterable[PodInfo], policy: K8sPolicy,
             plans: Mapping[str, PlanWorkloadRecord],
             workloads: Iterable[WorkloadRecord], instances: Sequence[InstanceRecord],
             noticed: Sequence[NoticedRecord], blocked: Sequence[ke.Blocked]) -> Facts:
    """`Facts` from the state's reads."""
    latest: dict[str, WorkloadRecord] = {}
    for w in workloads:  # the newest row per slug
        if w.slug not in latest or w.id > latest[w.slug].id:
            latest[w.slug] = w
    return Facts(tuple(pods), policy, dict(plans), latest,
                 tuple(instances), tuple(noticed), tuple(blocked))
