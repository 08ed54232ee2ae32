"""`scoctl cost`: what the fleet cost over a window, and how much of it the demand used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from scoctl.cli.common import JsonOption

if TYPE_CHECKING:
    from scoctl.config.schema import Config
    from scoctl.core.cost import CostLine, Prices


def prices_of(config: Config) -> Prices:
    """The config's prices: `flavors[].price`, `pools[].price`, `tiers.<t>.price_factor`."""
    from scoctl.core.cost import Prices

    return Prices(
        flavors={n: f.price for n, f in config.flavors.items() if f.price is not None},
        pools={p.name: p.price for p in config.pools if p.price is not None},
        tier_factor={t: s.price_factor for t, s in config.tiers.items()})


def line_json(line: CostLine) -> dict[str, Any]:
    """One cost line as JSON: cpu in core-hours, memory in GiB-hours."""
    scale = {"cpu": 1000.0, "memory": float(2**30)}

    def hours(amounts: Any) -> dict[str, float]:
        return {r: round(v / scale[r], 3) for r, v in amounts.items()}

    return {"key": line.key, "unit_hours": round(line.unit_hours, 4),
            "cost": None if line.cost is None else round(line.cost, 4),
            "provisioned": hours(line.provisioned), "requested": hours(line.requested),
            "efficiency": {r: None if v is None else round(v, 4)
                           for r, v in line.efficiency.items()}}


def cost(
    ctx: typer.Context,
    since: Annotated[str, typer.Option(
        "--since", help="The window: this long back from now (30m, 24h, 7d); the state keeps "
        "deleted units for retention.instances (7 days).")] = "24h",
    by: Annotated[str, typer.Option(
        "--by", help="One line per workload, pool or tier.")] = "workload",
    json_out: JsonOption = False,
) -> None:
    """What each workload's (or pool's, or tier's) units cost over the window, from the unit
    lifetimes the state records: unit-hours, cost (a pool's price, else its flavor's price
    times its tier's price_factor; "-" when a unit has no price), and, by workload, efficiency:
    the claim's requested vCPU and memory over its units' allocatable, both over the window.
    Read-only: never takes the run lock.

    \b
    Examples:
      scoctl cost --since 24h
      scoctl cost --since 7d --by tier --json
    """
    from datetime import timedelta

    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.clock import SystemClock
    from scoctl.config.schema import parse_duration
    from scoctl.core.cost import BY, costs, lifetimes
    from scoctl.core.timefmt import rfc3339
    from scoctl.errors import UsageError

    g = globals_of(ctx, json=json_out)
    if by not in BY:
        raise UsageError(f"--by: {by!r} is not one of {', '.join(BY)}")
    try:
        window = parse_duration(since)
    except ValueError as exc:
        raise UsageError(f"--since: {exc}") from exc
    config = g.config()
    now = SystemClock().now()
    start = now - timedelta(seconds=window)
    with g.open_store(reader=True) as store:
        lives = lifetimes(store.instances(include_deleted=True))
        history = store.claim_history(rfc3339(start))
    lines = costs(lives, pools={p.name: p for p in config.pools}, flavors=config.flavors,
                  prices=prices_of(config), since=start, now=now, by=by,
                  claims=history, reserve=config.node_reserve)
    priced = all(line.cost is not None for line in lines)
    total = {"unit_hours": round(sum(x.unit_hours for x in lines), 4),
             "cost": round(sum(x.cost or 0.0 for x in lines), 4) if priced else None}
    if g.json:
        render.print_json({"since": rfc3339(start), "until": rfc3339(now), "by": by,
                           "lines": [line_json(x) for x in lines], "total": total})
        return

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{100 * value:.0f}%"

    rows = [(x.key, f"{x.unit_hours:.2f}", "-" if x.cost is None else f"{x.cost:.2f}",
             pct(x.efficiency.get("cpu")), pct(x.efficiency.get("memory"))) for x in lines]
    rows.append(("total", f"{total['unit_hours']:.2f}",
                 "-" if total["cost"] is None else f"{total['cost']:.2f}", "", ""))
    render.table(f"Cost since {rfc3339(start)} (by {by})",
                 [by, "unit-hours", "cost", "cpu used", "memory used"], rows)


def register(app: typer.Typer) -> None:
    app.command("cost")(cost)
