"""`status` shows noticed instances with their reclaim deadline; the metrics textfile counts
the notices, their lead times and the time to the replacement's Ready."""

from __future__ import annotations

import json
from pathlib import Path

from scoctl.core.model import InstanceRecord, NoticedRecord
from scoctl.services.metrics import RunSample, collect
from scoctl.state import open_store
from tests.fixtures.state import Cli

DEADLINE = "2026-01-01T00:01:00.000000Z"


def noticed_state(path: Path) -> None:
    with open_store(path, create=True) as store:
        for sid, status in (("s1", "noticed"), ("s2", "ready")):
            store.upsert_instance(InstanceRecord(
                id=sid, name=f"sco-web-{sid}", region="r1", workload="web", pool="p1",
                generation=1, launch_id="l-1", status=status, created=store.now(),
                updated=store.now()))
        store.save_noticed(NoticedRecord(
            server_id="s1", region="r1", name="sco-web-s1", workload="web", pool="p1",
            deadline=DEADLINE, noticed_at="2026-01-01T00:00:00.000000Z", source="metadata"))
        store.save_noticed(NoticedRecord(  # an earlier one, over: 90 s lead, replaced in 12 s
            server_id="s0", region="r1", name="sco-web-s0", workload="web", pool="p1",
            deadline="2025-12-31T23:01:30.000000Z", noticed_at="2025-12-31T23:00:00.000000Z",
            source="pool", outcome="reclaimed", closed_at="2025-12-31T23:00:40.000000Z",
            replacement_ready_at="2025-12-31T23:00:12.000000Z"))


def test_status_shows_a_noticed_instance_with_its_deadline(cli: Cli, tmp_path: Path) -> None:
    noticed_state(tmp_path / "state.db")
    done = cli("--state", str(tmp_path / "state.db"), "status", "--json")
    assert done.code == 0, done.stderr
    by_id = {i["id"]: i for i in json.loads(done.stdout)["instances"]}
    assert (by_id["s1"]["status"], by_id["s1"]["deadline"]) == ("noticed", DEADLINE)
    assert "deadline" not in by_id["s2"]
    text = cli("--state", str(tmp_path / "state.db"), "status")
    assert text.code == 0 and "reclaim deadline" in text.stdout
    assert "2026-01-01T00:01" in text.stdout


def test_the_metrics_count_notices_lead_times_and_replacements(tmp_path: Path) -> None:
    noticed_state(tmp_path / "state.db")
    with open_store(tmp_path / "state.db") as store:
        text = collect(store, RunSample())
    assert "scoctl_reclaim_notices_total 2" in text
    assert 'scoctl_reclaim_lead_seconds_bucket{le="60"} 1' in text  # 60 s
    assert 'scoctl_reclaim_lead_seconds_bucket{le="120"} 2' in text  # and 90 s
    assert "scoctl_reclaim_lead_seconds_sum 150.0" in text
    assert 'scoctl_reclaim_replacement_ready_seconds_bucket{le="10"} 0' in text
    assert 'scoctl_reclaim_replacement_ready_seconds_bucket{le="20"} 1' in text
    assert 'scoctl_reclaim_replacement_ready_seconds_bucket{le="+Inf"} 1' in text
    assert "scoctl_reclaim_replacement_ready_seconds_count 1" in text
    assert 'scoctl_instances{state="noticed"} 1' in text
