"""Issue 49 item 3: what `status`, its JSON and `drift resume` tell an operator — a unit whose
node is not ready, every disruption reason a budget may name, the open window's end apart from
the next window, the budgets themselves, what holds a rollout, and a resume with nothing to
resume."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from scoctl.clock import rfc3339
from scoctl.config.schema import load_config
from scoctl.core.model import InstanceRecord
from scoctl.core.spec import hash_of
from scoctl.services.drift import specs_of
from scoctl.state import open_store
from tests.builders import nova_config
from tests.fixtures.state import Cli

NOW = datetime.now(UTC)


def unit(sid: str, status: str = "ready", **fields: Any) -> InstanceRecord:
    stamp = rfc3339(NOW - timedelta(hours=2))
    return InstanceRecord(id=sid, name=f"sco-web-{sid}", region="region-a", workload="web",
                          pool="tiny.a", generation=1, launch_id="l-1", status=status,  # type: ignore[arg-type]
                          created=stamp, updated=stamp,
                          ready_at=stamp if status in ("ready", "deleted") else None, **fields)


def state_of(config: Path, *rows: InstanceRecord) -> None:
    with open_store(load_config(config).state, create=True) as store:
        for row in rows:
            store.upsert_instance(row)


def status(cli: Cli, config: Path, *args: str) -> Any:
    done = cli("--config", str(config), "status", *args)
    assert done.code == 0, done.stderr
    return json.loads(done.stdout) if "--json" in args else done.stdout


def test_a_ready_unit_whose_node_is_not_ready_says_so(cli: Cli, tmp_path: Path) -> None:
    config = nova_config(tmp_path, "nowhere")
    since = rfc3339(NOW - timedelta(minutes=3))
    state_of(config, unit("s1", unhealthy_since=since), unit("s2"))
    text = status(cli, config)
    [sick] = [line for line in text.splitlines() if "sco-web-s1" in line]
    assert f"node not ready since {since}" in sick
    [well] = [line for line in text.splitlines() if "sco-web-s2" in line]
    assert "not ready" not in well
    body = status(cli, config, "--json")
    assert {i["id"]: i.get("unhealthy_since") for i in body["instances"]} == {
        "s1": since, "s2": None}


def test_status_json_lists_every_reason_and_an_open_windows_end_apart_from_the_next(
        cli: Cli, tmp_path: Path) -> None:
    opened = NOW.replace(second=0, microsecond=0)
    config = nova_config(tmp_path, "nowhere", extra=(
        "disruption:\n  budgets:\n"
        f"    - {{reasons: [drifted, late], units: 0, schedule: '{opened.minute} "
        f"{opened.hour} * * *', duration: 1h}}\n"
        "    - {reasons: [rebalanced], units: 1}\n"))
    state_of(config, unit("s1"), unit("s2"))
    body = status(cli, config, "--json")
    rows = {e["reason"]: e for e in body["disruption"]}
    assert set(rows) == {"empty", "underutilized", "drifted", "expired", "rebalanced",
                         "unhealthy", "noticed", "late"}
    drifted = rows["drifted"]
    assert drifted["allowed"] == 0
    assert drifted["window_end"] == rfc3339(opened + timedelta(hours=1))  # it closes
    assert drifted["next_window"] == rfc3339(opened + timedelta(days=1))  # the next opens
    assert drifted["held"]["budget"] == 0 and drifted["held"]["by"] == "units"
    assert drifted["held"]["until"] == rfc3339(opened + timedelta(hours=1))
    assert rows["rebalanced"]["allowed"] == 1 and rows["rebalanced"]["held"] is None
    assert rows["empty"]["next_window"] is None and rows["empty"]["window_end"] is None


def test_the_human_status_shows_the_budgets(cli: Cli, tmp_path: Path) -> None:
    config = nova_config(tmp_path, "nowhere", extra=(
        "disruption:\n  budgets:\n"
        "    - {reasons: [drifted], units: 2, rate: {units: 3, per: 10m}}\n"
        "    - {units: 25%}\n"))
    state_of(config, unit("s1"))
    text = status(cli, config)
    assert "Disruption budgets" in text
    assert "2 in flight of drifted, 3 started per 10m" in text and "25% in flight" in text


def held_rollout(tmp_path: Path) -> Path:
    """web's rollout open (a unit on the current spec Ready for an hour), two units still on
    the old spec, nothing in flight, and the one started 5 minutes ago fills the drifted
    budget's rate (1 per hour)."""
    config = nova_config(tmp_path, "nowhere", extra=(
        "disruption:\n  budgets:\n"
        "    - {reasons: [drifted], units: 2, rate: {units: 1, per: 1h}}\n"))
    loaded = load_config(config)
    [spec] = specs_of(loaded, loaded.regions[0], loaded.user_data_template(),
                      [("web", "tiny.a")]).values()
    state_of(config, unit("old-1", spec_hash="0123456789ab"),
             unit("old-2", spec_hash="0123456789ab"),
             unit("new-1", spec_hash=hash_of(spec)),
             unit("old-0", "deleted", spec_hash="0123456789ab", disruption="drifted",
                  disruption_at=rfc3339(NOW - timedelta(minutes=5))))
    return config


def test_a_rollout_held_by_the_rate_says_so(cli: Cli, tmp_path: Path) -> None:
    config = held_rollout(tmp_path)
    [rollout] = status(cli, config, "--json")["drift"]
    assert (rollout["phase"], rollout["in_flight"], rollout["drifted"]) == ("open", 0, 2)
    assert rollout["held"].startswith("budget #0 (2 in flight of drifted, 1 started per 1h): "
                                      "rate 1 per 1h used up")
    until = rfc3339(NOW - timedelta(minutes=5) + timedelta(hours=1))
    assert rollout["held"].endswith(f"until {until}")
    [line] = [x for x in status(cli, config).splitlines() if x.startswith("│ web") and "open" in x]
    assert "rate 1 per 1h used up" in line


def test_drift_resume_of_a_rollout_that_is_not_halted_is_exit_2_and_records_nothing(
        cli: Cli, tmp_path: Path) -> None:
    config = held_rollout(tmp_path)
    done = cli("--config", str(config), "drift", "resume", "--workload", "web")
    assert done.code == 2
    assert "not halted (phase open)" in done.stderr and "resumed" not in done.stdout
    every = cli("--config", str(config), "drift", "resume")
    assert every.code == 2 and "no drift rollout is halted" in every.stderr
    with open_store(load_config(config).state) as store:
        assert not [e for e in store.events() if e.token == "DRIFT_RESUMED"]
