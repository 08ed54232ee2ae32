"""`scoctl status --json` and `scoctl events` against design: Schemas: fields, numbers, --since,
--follow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from scoctl.clock import rfc3339
from scoctl.core.model import InstanceRecord, NewEvent, PlanUnitRecord, PlanWorkloadRecord
from scoctl.core.tokens import ALL_STATUSES
from scoctl.services.claims import record_claim
from scoctl.services.tokens import record_token
from scoctl.state import open_store

REPO = Path(__file__).resolve().parents[2]
INSTANCE_STATUSES = {"requested", "building", "active", "ready", "noticed", "draining",
                     "deleting", "deleted", "error"}


def seeded_state(path: Path) -> None:
    """The seed's orders-daily: 42 pods of 4 vCPU / 16 GiB, plus a half-core Slurm job."""
    with open_store(path, create=True) as store:
        store.ensure_workload("orders-daily", kind="deployment", source="k8s", contract="T1")
        record_token(store, "orders-daily", "POD_QUEUED")
        store.ensure_workload("train-7", kind="job", source="slurm", contract="T1", job_id="42")
        record_claim(store, "orders-daily", contract="T1", requests={"cpu": 168_000,
                                                                 "memory": 672 * 2**30},
                        largest_pod={"cpu": 4000, "memory": 16 * 2**30}, pods=42, source="k8s")
        record_claim(store, "train-7", contract="T1",
                        requests={"cpu": 500, "memory": 2**30, "nvidia.com/gpu": 2},
                        largest_pod={"cpu": 500, "memory": 2**30, "nvidia.com/gpu": 2}, pods=1,
                        source="slurm")
        store.commit_plan(ranking="r-8812", full=True, plans=[PlanWorkloadRecord(
            workload="orders-daily", generation=0, claim_version=1, contract="T1",
            ranking="r-8812", feasible=True, degraded=False, reasons=(),
            pools=(PlanUnitRecord("c4.xlarge.az1.spot", "reclaimable", "row-a", 1, 0.09, 0.91),
                   ))])
        store.upsert_instance(InstanceRecord(
            id="3f1c", name="sco-orders-daily-l-1-1", region="region-a",
            workload="orders-daily", pool="c4.xlarge.az1.spot", generation=1,
            launch_id="l-1", status="building", created=store.now(), updated=store.now()))


def test_status_json_matches_the_design_schema_with_quantities_as_numbers(cli, tmp_path):
    state = tmp_path / "s.db"
    seeded_state(state)

    result = cli("--state", str(state), "status", "--json")

    assert result.code == 0, result.stderr
    body = result.json()
    assert isinstance(body, dict)
    assert list(body) == ["workloads", "claims", "plan", "instances", "leaders", "latency",
                          "disruption", "drift", "rebalance", "buffers", "paused"]
    assert body["buffers"] == []  # design: Buffers: none configured
    assert body["drift"] == []  # design: Drift: every unit on its pool's current spec
    assert body["rebalance"] == []  # design: Rebalance: nothing waits or moves
    # design: Disruption: per workload and reason, what the budgets allow (the default 10 % of its
    # registered units, rounded up), nothing in flight, no scheduled budget
    for entry in body["disruption"]:
        assert set(entry) == {"workload", "reason", "allowed", "in_flight", "next_window",
                              "window_end", "held"}
    for name in {e["workload"] for e in body["disruption"]}:
        units = sum(1 for i in body["instances"] if i["workload"] == name)
        assert {(e["reason"], e["allowed"], e["in_flight"], e["next_window"], e["window_end"],
                 e["held"])
                for e in body["disruption"] if e["reason"] != "noticed"
                and e["workload"] == name} == {
            (r, -(-units // 10), 0, None, None, None)
            for r in ("empty", "underutilized", "drifted", "expired", "rebalanced",
                      "unhealthy", "late")}
    assert {e["allowed"] for e in body["disruption"] if e["reason"] == "noticed"} == {None}
    assert body["leaders"] == []  # one host on a SQLite state: no leases
    orders = next(w for w in body["workloads"] if w["slug"] == "orders-daily")
    assert orders == {"slug": "orders-daily", "kind": "deployment", "source": "k8s",
                      "contract": "T1", "status": "queued"}
    assert all(w["status"] in ALL_STATUSES for w in body["workloads"])
    claims = {c["workload"]: c for c in body["claims"]}
    assert {k: claims["orders-daily"][k] for k in ("workload", "version", "pods", "requests",
                                                   "largest_pod")} == {
        "workload": "orders-daily", "version": 1, "pods": 42,
        "requests": {"cpu": 168, "memory": 721554505728},
        "largest_pod": {"cpu": 4, "memory": 17179869184}}
    # cpu in cores (a JSON number, fractional when it must be), memory in bytes, counts as ints
    assert claims["train-7"]["requests"] == {"cpu": 0.5, "memory": 1073741824,
                                             "nvidia.com/gpu": 2}
    assert '"cpu": 168,' in result.stdout and '"cpu": 0.5' in result.stdout
    plan = body["plan"]
    assert {k: plan[k] for k in ("generation", "ranking")} == {"generation": 1,
                                                               "ranking": "r-8812"}
    [planned] = plan["workloads"]
    assert {k: planned[k] for k in ("workload", "feasible", "degraded", "reasons")} == {
        "workload": "orders-daily", "feasible": True, "degraded": False, "reasons": []}
    assert planned["pools"] == [{"pool": "c4.xlarge.az1.spot", "tier": "reclaimable",
                                 "group": "row-a", "units": 1, "share": 0.09}]
    [instance] = body["instances"]
    assert {k: instance[k] for k in ("id", "name", "workload", "pool", "status")} == {
        "id": "3f1c", "name": "sco-orders-daily-l-1-1", "workload": "orders-daily",
        "pool": "c4.xlarge.az1.spot", "status": "building"}
    assert instance["status"] in INSTANCE_STATUSES


def test_status_tables_show_the_same_state_for_people(cli, tmp_path):
    state = tmp_path / "s.db"
    seeded_state(state)
    result = cli("--state", str(state), "status")
    assert result.code == 0, result.stderr
    for text in ("orders-daily", "queued", "168 vCPU", "672Gi", "r-8812",
                 "sco-orders-daily-l-1-1", "building"):
        assert text in result.stdout, text


def test_events_json_is_one_design_object_per_line(cli, tmp_path):
    state = tmp_path / "s.db"
    seeded_state(state)

    result = cli("--state", str(state), "events", "--json")

    assert result.code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [e["token"] for e in lines] == ["POD_QUEUED"]
    [event] = lines
    assert list(event) == ["ts", "workload", "token", "level", "status", "detail"]
    assert event["workload"] == "orders-daily"
    assert (event["level"], event["status"], event["detail"]) == ("warning", "queued", {})
    assert datetime.fromisoformat(event["ts"].replace("Z", "+00:00")).tzinfo is not None


def test_events_since_takes_an_rfc3339_time_or_an_age_and_filters_by_workload(cli, tmp_path):
    state = tmp_path / "s.db"
    now = datetime.now(UTC)
    with open_store(state, create=True) as store:
        store.append_event(NewEvent("a", "OLD", "info", {}, ts=rfc3339(now - timedelta(hours=3))))
        store.append_event(NewEvent("b", "MIDDLE", "info", {},
                                    ts=rfc3339(now - timedelta(minutes=90))))
        store.append_event(NewEvent("a", "RECENT", "info", {},
                                    ts=rfc3339(now - timedelta(minutes=10))))

    def tokens(*args: str) -> list[str]:
        result = cli("--state", str(state), "events", "--json", *args)
        assert result.code == 0, result.stderr
        return [json.loads(line)["token"] for line in result.stdout.splitlines()]

    assert tokens() == ["OLD", "MIDDLE", "RECENT"]
    assert tokens("--since", "1h") == ["RECENT"]
    assert tokens("--since", "2h") == ["MIDDLE", "RECENT"]
    two_hours_ago_in_india = (now - timedelta(hours=2)).astimezone(
        timezone(timedelta(hours=5, minutes=30))).isoformat()
    assert "+05:30" in two_hours_ago_in_india
    assert tokens("--since", two_hours_ago_in_india) == ["MIDDLE", "RECENT"]
    assert tokens("--since", "4h", "--workload", "a") == ["OLD", "RECENT"]
    assert tokens("--limit", "2") == ["OLD", "MIDDLE"]


def test_events_follow_prints_new_events_as_they_are_recorded_until_interrupted(tmp_path):
    state = tmp_path / "s.db"
    with open_store(state, create=True) as store:
        store.append_event(NewEvent("w", "FIRST", "info", {}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCOCTL_")}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen([sys.executable, "-m", "scoctl", "--state", str(state), "events",
                             "--follow", "--json", "--workload", "w"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout is not None
        assert json.loads(proc.stdout.readline())["token"] == "FIRST"
        with open_store(state) as store:
            store.append_event(NewEvent("other", "NOT_MINE", "info", {}))
            store.append_event(NewEvent("w", "SECOND", "warning", {"reason": "Resources"},
                                        status="queued"))
        second = json.loads(proc.stdout.readline())
        assert (second["token"], second["detail"]) == ("SECOND", {"reason": "Resources"})
        assert proc.poll() is None  # still following
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert proc.returncode in (0, 130)
    assert "Traceback" not in err


def test_events_follow_does_not_wait_for_the_run_lock(tmp_path):
    from scoctl.host.lock import run_lock

    state = tmp_path / "s.db"
    with open_store(state, create=True) as store:
        store.append_event(NewEvent("w", "FIRST", "info", {}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCOCTL_")}
    env["PYTHONPATH"] = str(REPO)
    with run_lock(state):
        started = time.monotonic()
        proc = subprocess.Popen([sys.executable, "-m", "scoctl", "--state", str(state),
                                 "events", "--follow", "--json"],
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                env=env)
        try:
            assert proc.stdout is not None
            assert json.loads(proc.stdout.readline())["token"] == "FIRST"
            assert time.monotonic() - started < 10
        finally:
            proc.kill()
            proc.communicate()
