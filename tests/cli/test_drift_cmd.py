"""`scoctl drift resume` and the rollouts `status --json` shows (design: Drift)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoctl.config.schema import load_config
from scoctl.core.model import InstanceRecord
from scoctl.core.spec import hash_of
from scoctl.services.drift import specs_of
from scoctl.state import open_store
from tests.builders import nova_config
from tests.fixtures.state import Cli


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """Two ready units of web on an old spec; two replacements on the current one that
    never registered (deleted with their fault): the rollout is halted."""
    path = nova_config(tmp_path, "nowhere")
    config = load_config(path)
    [spec] = specs_of(config, config.regions[0], config.user_data_template(),
                      [("web", "tiny.a")]).values()
    with open_store(tmp_path / "state.db", create=True) as store:
        rows = [("srv-1", "ready", "0123456789ab", None), ("srv-2", "ready", "0123456789ab", None),
                ("new-1", "deleted", hash_of(spec), "no ready node after 900s"),
                ("new-2", "deleted", hash_of(spec), "no ready node after 900s")]
        for sid, status, spec_hash, fault in rows:
            store.upsert_instance(InstanceRecord(
                id=sid, name=f"sco-web-{sid}", region="region-a", workload="web",
                pool="tiny.a", generation=1, launch_id="l-1", status=status,
                created=store.now(), updated=store.now(), spec_hash=spec_hash, fault=fault,
                ready_at=store.now() if status == "ready" else None,
                disruption="drifted" if sid == "srv-1" else None))
    return path


def rollouts(cli: Cli, config: Path) -> list[dict[str, object]]:
    done = cli("--config", str(config), "status", "--json")
    assert done.code == 0, done.stderr
    body: list[dict[str, object]] = json.loads(done.stdout)["drift"]
    return body


def test_status_shows_a_halted_rollout_and_drift_resume_goes_on(cli: Cli, world: Path,
                                                                tmp_path: Path) -> None:
    assert rollouts(cli, world) == [{"workload": "web", "drifted": 2, "in_flight": 1,
                                     "replaced": 0, "phase": "halted", "soaking": False,
                                     "failures": 2,
                                     "halted": True,  # and the default budget is full
                                     "held": "budget #0 (10% in flight): 10% in flight "
                                             "reached until a disruption in flight ends"}]
    done = cli("--config", str(world), "drift", "resume", "--workload", "web", "--json")
    assert done.code == 0, done.stderr
    assert json.loads(done.stdout)["resumed"] == "web"
    with open_store(tmp_path / "state.db") as store:
        [event] = [e for e in store.events() if e.token == "DRIFT_RESUMED"]
    assert (event.workload, dict(event.detail)) == ("web", {"workload": "web"})
    [after] = rollouts(cli, world)
    assert (after["phase"], after["failures"], after["halted"]) == ("canary", 0, False)


def test_drift_resume_of_a_bad_slug_is_exit_2(cli: Cli, world: Path) -> None:
    done = cli("--config", str(world), "drift", "resume", "--workload", "Not A Slug")
    assert done.code == 2
