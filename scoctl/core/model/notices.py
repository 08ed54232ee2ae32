"""Values of reclaim notices (design: Notices): what was announced, and each noticed instance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

NoticeKind = Literal["server", "pool"]
# How scoctl learnt of a notice: the server's `sco:reclaim-at` metadata, or `scoctl notice`
# (through the spool) for the server or for its whole pool.
NoticeSource = Literal["metadata", "server", "pool"]
# How a noticed instance left the flow: scoctl deleted it, the provider took it first, or the
# notice was withdrawn (metadata key removed before the deadline).
NoticeOutcome = Literal["reclaimed", "gone", "withdrawn"]


@dataclass(frozen=True)
class NoticeRecord:
    """A reclaim announced with ``scoctl notice`` for one server or one pool of a region."""

    kind: NoticeKind
    target: str  # the server id, or the pool name
    region: str
    deadline: str  # RFC 3339
    received: str  # when scoctl recorded it
    reason: str = ""


@dataclass(frozen=True)
class NoticedRecord:
    """One instance under a reclaim notice, from the first sight of the notice to its end.

    Open while `outcome` is None. `cordoned`, `drain_forced` (the pods were deleted at
    ``deadline − drain_margin``) and `requeued` (Slurm jobs) record what the drain did, and
    `evicted` / `pods_deleted` count the pods it moved each way. `replacement_ready_at` is when
    the first unit of the workload launched after the notice turned Ready.
    """

    server_id: str
    region: str
    name: str
    workload: str | None
    pool: str | None
    deadline: str
    noticed_at: str
    source: NoticeSource
    reason: str = ""
    cordoned: bool = False
    drain_forced: bool = False
    requeued: bool = False
    evicted: int = 0
    pods_deleted: int = 0
    outcome: NoticeOutcome | None = None
    closed_at: str | None = None
    replacement_ready_at: str | None = None
