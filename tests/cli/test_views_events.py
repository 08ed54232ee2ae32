"""Issue 49 items 4 and 9: the human `events` table shows each token and its reason, filters by
token and level, renders details for people, and refuses a workload the state never saw; the
read-only commands show the state when the config fails a check only launching needs."""

from __future__ import annotations

import json
from pathlib import Path

from scoctl.core.model import NewEvent
from scoctl.state import open_store
from tests.fixtures.state import Cli


def logged(path: Path) -> None:
    with open_store(path, create=True) as store:
        store.ensure_workload("web", kind="deployment", source="k8s", contract="T1")
        store.append_event(NewEvent("web", "CAPACITY_EXCEEDED", "warning",
                                    {"best_node": "n1", "pods": ["web-1", "web-2"]}))
        store.append_event(NewEvent("web", "DISRUPTION_BLOCKED", "info",
                                    {"reason": "drifted", "until": None,
                                     "into": {"c4.large.row-b": 1}, "gc": False,
                                     "limit": "units 2 in flight"}))
        store.append_event(NewEvent("web", "LAUNCH_FAILED", "error", {"share": 0.5}))


def test_the_events_table_shows_the_token_and_its_reason(cli: Cli, tmp_path: Path) -> None:
    logged(tmp_path / "s.db")
    done = cli("--state", str(tmp_path / "s.db"), "events")
    assert done.code == 0, done.stderr
    header, first, *_ = done.stdout.splitlines()
    assert "TOKEN" in header and "REASON" in header
    assert "CAPACITY_EXCEEDED" in first and "CapacityExceeded" in first


def test_event_details_are_rendered_for_people_not_as_python_values(cli: Cli,
                                                                     tmp_path: Path) -> None:
    logged(tmp_path / "s.db")
    done = cli("--state", str(tmp_path / "s.db"), "events")
    text = done.stdout
    for python in ("None", "['", "{'", "False"):
        assert python not in text, text
    assert "pods=web-1,web-2" in text and "until=-" in text and "into=c4.large.row-b:1" in text
    assert 'limit="units 2 in flight"' in text and "gc=no" in text and "share=0.5" in text
    from scoctl.core.text import human_detail

    assert human_detail({"b": [], "a": {}}) == "a=none b=none"


def test_events_filter_by_token_or_reason_and_by_level(cli: Cli, tmp_path: Path) -> None:
    logged(tmp_path / "s.db")
    state = str(tmp_path / "s.db")

    def tokens(*args: str) -> list[str]:
        done = cli("--state", state, "events", "--json", *args)
        assert done.code == 0, done.stderr
        return [json.loads(line)["token"] for line in done.stdout.splitlines()]

    assert tokens("--token", "CAPACITY_EXCEEDED") == ["CAPACITY_EXCEEDED"]
    assert tokens("--token", "DisruptionBlocked", "-t", "LAUNCH_FAILED") == [
        "DISRUPTION_BLOCKED", "LAUNCH_FAILED"]
    assert tokens("--level", "warning") == ["CAPACITY_EXCEEDED", "LAUNCH_FAILED"]
    assert tokens("--level", "Warning", "--token", "DISRUPTION_BLOCKED") == []
    assert tokens("--level", "error") == ["LAUNCH_FAILED"]
    bad = cli("--state", state, "events", "--level", "loud")
    assert bad.code == 2 and "--level" in bad.stderr
    assert cli("--state", state, "events", "--token", "not a token").code == 2


def test_events_of_a_workload_the_state_never_saw_is_exit_2(cli: Cli, tmp_path: Path) -> None:
    logged(tmp_path / "s.db")
    done = cli("--state", str(tmp_path / "s.db"), "events", "-w", "nosuch")
    assert done.code == 2
    assert "no such workload 'nosuch'" in done.stderr and done.stdout == ""
    known = cli("--state", str(tmp_path / "s.db"), "events", "-w", "web", "--json")
    assert known.code == 0 and len(known.stdout.splitlines()) == 3


UNJOINABLE = """\
state: {state}
regions:
  - {{name: r, launch: {{image: i}}}}
flavors: [{{name: f, vcpus: 4, ram: 16Gi}}]
pools: [{{name: p, az: a, flavor: f, group: g, tier: reclaimable, depth: 1}}]
ranking: {{id: r-1, scores: {{p: 1.0}}}}
workloads: [{{name: web, source: k8s}}]
"""


def test_read_only_commands_warn_and_show_the_state_when_the_config_cannot_launch(
        cli: Cli, tmp_path: Path) -> None:
    """The bundled user-data template hands $join_endpoint to kubeadm join and the config
    gives no bootstrap.api_endpoint: `config check` refuses it (exit 2); status, events and
    top only read the state, so they warn and show it."""
    logged(tmp_path / "s.db")
    config = tmp_path / "c.yaml"
    config.write_text(UNJOINABLE.format(state=tmp_path / "s.db"))
    assert cli("--config", str(config), "config", "check").code == 2
    for args in (["status"], ["status", "--json"], ["events"], ["top", "--once"]):
        done = cli("--config", str(config), *args)
        assert done.code == 0, (args, done.stderr)
        assert "warning" in done.stderr and "bootstrap.api_endpoint" in done.stderr, args
        assert "web" in done.stdout, args
    assert cli("--config", str(config), "plan", "--dry-run").code == 2  # it would launch
