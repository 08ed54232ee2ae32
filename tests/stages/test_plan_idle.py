"""The plan stage gives a shrunk claim's idle units back first (design: Disruption): it reads which
of a workload's ready units run no work (`idle_since`, set by reconcile) from the state and
hands them to the planner, so the pools holding idle units lose units before the worst-keyed
busy ones."""

from __future__ import annotations

import json
from pathlib import Path

from scoctl.core.model import InstanceRecord
from scoctl.core.quantity import parse_resources
from scoctl.services.claims import record_claim
from scoctl.state import Store, open_store
from tests.fixtures.state import Cli
from tests.stages.test_plan import write_config

STAMP = "2026-12-01T00:00:00Z"


def claim(store: Store, pods: int) -> None:
    record_claim(store, "alpha", contract="T1",
                 requests=parse_resources({"cpu": str(4 * pods), "memory": f"{16 * pods}Gi"}),
                 largest_pod=parse_resources({"cpu": "4", "memory": "16Gi"}), pods=pods,
                 source="k8s")


def units(cli: Cli, config: Path) -> dict[str, int]:
    result = cli("--config", str(config), "plan", "--json")
    assert result.code == 0, result.stderr
    [alpha] = json.loads(result.stdout)["workloads"]
    return {p["pool"]: p["units"] for p in alpha["pools"]}


def shrink(cli: Cli, tmp_path: Path, idle: str | None) -> tuple[dict[str, int], dict[str, int]]:
    """Plan 24 pods, make the plan's units exist (ready; those of pool `idle` idle), shrink
    the claim to 20 pods and plan again: the units before and after."""
    tmp_path.mkdir()
    config = write_config(tmp_path)
    with open_store(tmp_path / "state.db", create=True) as store:
        claim(store, 24)
    before = units(cli, config)
    with open_store(tmp_path / "state.db") as store:
        for pool, n in sorted(before.items()):
            for i in range(n):
                store.upsert_instance(InstanceRecord(
                    id=f"{pool}-{i}", name=f"sco-alpha-{pool}-{i}", region="r1",
                    workload="alpha", pool=pool, generation=1, launch_id="l-000000000001",
                    status="ready", created=STAMP, updated=STAMP, ready_at=STAMP,
                    idle_since=STAMP if pool == idle else None))
        claim(store, 20)
    return before, units(cli, config)


def test_a_shrunk_claim_gives_back_the_idle_units_first(cli: Cli, tmp_path: Path) -> None:
    before, busy = shrink(cli, tmp_path / "busy", None)
    assert sum(busy.values()) < sum(before.values())
    # the pool the worst-key rule keeps whole, though a unit elsewhere goes
    kept = [p for p, n in before.items() if p.endswith(".spot") and busy.get(p, 0) == n]
    assert kept
    idle_pool = kept[0]
    again, after = shrink(cli, tmp_path / "idle", idle_pool)
    assert again == before
    assert after.get(idle_pool, 0) < before[idle_pool], (idle_pool, before, after)
    assert after != busy and sum(after.values()) < sum(before.values())
    print(f"idle pool {idle_pool}: {before} -> {after} (all busy: {busy})")
