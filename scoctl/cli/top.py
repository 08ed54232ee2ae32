"""`scoctl top`: a live view of the fleet from the state (design: Visibility)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from scoctl.config.schema import Config
    from scoctl.state import Store

BAR = 20  # characters of a share bar


def bar(share: float, cap: float | None, width: int = BAR) -> str:
    """`share` (0..1) as a bar of `width` characters scaled to `cap` (full: at the cap), then
    the share and cap in per cent; ``!`` when over the cap. No cap (None: a committed pool,
    which the contract's caps do not limit): the bar against the whole, and ``no cap``."""
    if cap is None:
        filled = min(width, round(width * share))
        return f"{'█' * filled}{'·' * (width - filled)} {share * 100:.0f}% (committed: no cap)"
    filled = 0 if cap <= 0 else min(width, round(width * share / cap))
    mark = "!" if share > cap + 1e-9 else ""
    return f"{'█' * filled}{'·' * (width - filled)} {share * 100:.0f}%/{cap * 100:.0f}%{mark}"


def sections(config: Config, store: Store) -> list[tuple[str, list[str], list[list[Any]]]]:
    """The tables of one frame: a pause, workloads, pool and group shares, in flight,
    leaders."""
    from scoctl.clock import SystemClock
    from scoctl.core import pause
    from scoctl.core.model.vocabulary import InstanceStatus, LaunchStatus
    from scoctl.core.timefmt import rfc3339
    from scoctl.state.coordination import leases_of

    workloads = {w.slug: w for w in store.workloads(active_only=True)}
    claims = {c.workload: c for c in store.claims()}
    plans = store.plans()
    instances = store.instances()
    ready: dict[str, int] = {}
    for i in instances:
        if i.workload and i.status == InstanceStatus.READY and not i.unhealthy_since:
            ready[i.workload] = ready.get(i.workload, 0) + 1
    rows: list[list[Any]] = []
    for slug in sorted(set(workloads) | set(plans)):
        w, c, p = workloads.get(slug), claims.get(slug), plans.get(slug)
        planned = sum(u.units for u in p.pools) if p is not None else 0
        rows.append([slug, w.status if w else "-", c.pods if c else 0,
                     planned, ready.get(slug, 0),
                     ("infeasible" if not p.feasible else "degraded" if p.degraded else "ok")
                     if p else "-"])
    contracts = config.contracts
    pool_groups = {pool.name: pool.group for pool in config.pools}
    shares: list[list[Any]] = []
    groups: list[list[Any]] = []
    for slug, p in sorted(plans.items()):
        contract = contracts.get(p.contract)
        pool_cap = contract.pool_cap if contract else 1.0
        group_cap = contract.group_cap if contract else 1.0
        by_group: dict[str, float] = {}
        for u in p.pools:
            if not u.units:
                continue
            # the caps hold for reclaimable units only (committed ones have none)
            committed = u.tier == "committed"
            shares.append([slug, u.pool, u.units, bar(u.share, None if committed
                                                      else pool_cap)])
            group = u.group or pool_groups.get(u.pool, "")
            if not committed:
                by_group[group] = by_group.get(group, 0.0) + u.share
        groups += [[slug, group, bar(share, group_cap)] for group, share
                   in sorted(by_group.items())]
    launches = [[launch.launch_id, launch.workload, launch.pool, launch.count,
                 str(launch.status)] for launch in store.launches(
                     status=[LaunchStatus.INTENT, LaunchStatus.CALLED])]
    launches += [[i.name, i.workload or "-", i.pool or "-", 1, str(i.status)]
                 for i in instances if i.status in (
                     InstanceStatus.REQUESTED, InstanceStatus.BUILDING, InstanceStatus.ACTIVE)]
    disruptions = [[i.name, i.workload or "-", i.pool or "-", str(i.status)]
                   for i in instances if i.status in (
                       InstanceStatus.NOTICED, InstanceStatus.DRAINING, InstanceStatus.DELETING)]
    leaders = [[lease.region, lease.holder, lease.generation, rfc3339(lease.expires_at)]
               for lease in leases_of(store)]
    held = pause.active(store.pauses(), SystemClock().now())
    paused = [[p.scope.value, p.until or "until resumed", p.reason, p.author]
              for p in held.values()]
    return [
        ("Pauses", ["what", "until", "reason", "by"], paused),
        ("Workloads", ["workload", "status", "claim pods", "plan units", "ready", "plan"], rows),
        ("Pools (share of the workload's units / pool cap)",
         ["workload", "pool", "units", "share"], shares),
        ("Groups (reclaimable share / group cap)", ["workload", "group", "share"], groups),
        ("Launches in flight", ["launch / instance", "workload", "pool", "units", "status"],
         launches),
        ("Disruptions in flight", ["instance", "workload", "pool", "status"], disruptions),
        ("Leaders", ["region", "holder", "term", "expires"], leaders),
    ]


def top(
    ctx: typer.Context,
    once: Annotated[bool, typer.Option("--once", help="Print one frame and exit.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=0.1,
                                            help="Seconds between frames.")] = 2.0,
) -> None:
    """A live view of the fleet: per workload its claim, plan and Ready units (a unit whose
    node is not ready is not counted); per reclaimable pool and per group its share of the
    workload against the contract's cap, as bars (committed pools: no cap); launches and
    disruptions in flight; the leaders. Read-only: never takes the run lock.

    \b
    Example:
      scoctl top --once
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.clock import SystemClock
    from scoctl.core.timefmt import rfc3339

    g = globals_of(ctx)
    config = g.config(reader=True)  # a check only launching needs failing: a warning

    def build() -> Any:
        with g.open_store(reader=True) as store:
            parts = sections(config, store)
        return render.frame(f"scoctl top — {rfc3339(SystemClock().now())}", parts)

    if once:
        render.show_frame(build())
        return
    try:
        render.live(build, interval)
    except KeyboardInterrupt:
        pass


def register(app: typer.Typer) -> None:
    app.command("top")(top)
