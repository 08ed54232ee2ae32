"""`plan --explain WORKLOAD` shows, per disruption reason, what waits on which budget (design:
Disruption): the block the last reconcile stored (the budget's index in the workload's budgets, the
budget itself, until when) and what the budgets allow now, with the next window."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from scoctl.clock import SystemClock
from scoctl.core.model.records import DisruptionBlock
from scoctl.core.quantity import parse_resources
from scoctl.core.timefmt import parse_rfc3339
from scoctl.services.claims import record_claim
from scoctl.state import open_store
from tests.fixtures.state import Cli
from tests.stages.test_plan import write_config

UNTIL = "2026-12-02T09:00:00Z"


def test_plan_explain_names_the_budget_each_reason_waits_on(cli: Cli, tmp_path: Path) -> None:
    berlin = SystemClock().now().astimezone(ZoneInfo("Europe/Berlin"))
    closes = berlin.replace(second=0, microsecond=0) + timedelta(hours=1)
    config = write_config(tmp_path)
    config.write_text(config.read_text() + (
        "disruption:\n  budgets:\n"
        f"    - {{reasons: [empty, expired], units: 0, schedule: '{berlin.minute} {berlin.hour}"
        " * * *', duration: 1h, time_zone: Europe/Berlin}\n"
        "    - {units: 2}\n"))
    with open_store(tmp_path / "state.db", create=True) as store:
        record_claim(store, "alpha", contract="T1",
                     requests=parse_resources({"cpu": "64", "memory": "256Gi"}),
                     largest_pod=parse_resources({"cpu": "4", "memory": "16Gi"}), pods=16,
                     source="k8s")
        store.save_disruption_blocks(["alpha"], [DisruptionBlock("alpha", "empty", 0, UNTIL)])
    assert cli("--config", str(config), "plan").code == 0

    shown = cli("--config", str(config), "plan", "--explain", "alpha", "--json")
    assert shown.code == 0, shown.stderr
    [alpha] = json.loads(shown.stdout)["workloads"]
    rows = {e["reason"]: e for e in alpha["disruption"]}
    empty = rows["empty"]
    assert empty["waiting"] and empty["budget"] == 0 and empty["until"] == UNTIL
    assert empty["limit"] == {"units": "0", "reasons": ["empty", "expired"],
                              "schedule": f"{berlin.minute} {berlin.hour} * * *",
                              "duration": 3600.0, "time_zone": "Europe/Berlin"}
    assert empty["allowed"] == 0 and empty["in_flight"] == 0
    assert parse_rfc3339(empty["window_end"]) == closes  # the window in Berlin closes
    assert parse_rfc3339(empty["next_window"]) == closes - timedelta(hours=1) + timedelta(
        days=1)  # and opens again the next day (issue 49: not the open window's end)
    assert rows["expired"]["allowed"] == 0 and not rows["expired"]["waiting"]
    assert rows["underutilized"] == {"reason": "underutilized", "in_flight": 0, "allowed": 2,
                                     "next_window": None, "window_end": None,
                                     "waiting": False, "budget": None,
                                     "until": None}
    assert rows["noticed"]["allowed"] is None  # never held back

    text = cli("--config", str(config), "plan", "--explain", "alpha")
    assert text.code == 0, text.stderr
    assert "alpha: what waits on which disruption budget" in text.stdout
    assert "budget #0: 0 units of empty, expired" in text.stdout
    assert UNTIL in text.stdout

    other = cli("--config", str(config), "plan", "--json")  # without --explain: no such list
    assert "disruption" not in json.loads(other.stdout)["workloads"][0]
