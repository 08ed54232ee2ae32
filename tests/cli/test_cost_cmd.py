"""`scoctl cost` through the real entry point, over a state whose unit lifetimes are known:
the totals are the lifetimes in the window times the prices, and bad options are exit 2."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from scoctl.core.model import InstanceRecord
from scoctl.core.timefmt import rfc3339
from scoctl.services.claims import record_claim
from scoctl.state import open_store
from tests.builders import nova_config
from tests.fixtures.state import Cli

PRICED = """\
tiers: {reclaimable: {price_factor: 0.5}}
"""


@pytest.fixture
def config(tmp_path: Path, cli: Cli) -> Path:
    path = nova_config(tmp_path, "nowhere", extra=PRICED)
    text = path.read_text().replace("{name: m1.tiny, vcpus: 1, ram: 512Mi}",
                                    "{name: m1.tiny, vcpus: 1, ram: 512Mi, price: 2.0}")
    path.write_text(text)
    assert cli("--config", str(path), "init").code == 0
    now = datetime.now(UTC)
    with open_store(tmp_path / "state.db") as store:
        spans = [("gone", now - timedelta(hours=3), now - timedelta(minutes=30), "deleted"),
                 ("alive", now - timedelta(minutes=20), None, "ready"),
                 ("old", now - timedelta(hours=5), now - timedelta(hours=2), "deleted")]
        for sid, start, end, status in spans:
            store.upsert_instance(InstanceRecord(
                id=sid, name=f"sco-web-{sid}", region="region-a", workload="web",
                pool="tiny.a", generation=1, launch_id="l-1", status=status,
                created=rfc3339(start), updated=rfc3339(end or now)))
    return path


def test_cost_since_1h_is_the_lifetimes_in_the_window_at_the_price(cli: Cli, config: Path):
    done = cli("--config", str(config), "cost", "--since", "1h", "--json")
    assert done.code == 0, done.stderr
    body = json.loads(done.stdout)
    [line] = body["lines"]
    # 30 min of "gone" and ~20 min of "alive" (its clock ran a little since the fixture)
    assert line["key"] == "web"
    assert abs(line["unit_hours"] - 50 / 60) < 0.01
    assert abs(body["total"]["cost"] - line["unit_hours"] * 2.0 * 0.5) < 1e-3
    assert line["efficiency"] == {"cpu": 0.0, "memory": 0.0}  # no claim recorded
    human = cli("--config", str(config), "cost", "--since", "1h", "--by", "tier")
    assert "reclaimable" in human.stdout and "total" in human.stdout


def test_efficiency_follows_the_recorded_claim(cli: Cli, config: Path, tmp_path: Path):
    with open_store(tmp_path / "state.db") as store:
        record_claim(store, "web", contract="T1", requests={"cpu": 500, "memory": 2**28},
                     largest_pod={"cpu": 500, "memory": 2**28}, pods=1, source="k8s")
        assert [s.workload for s in store.claim_history("2000-01-01T00:00:00Z")] == ["web"]
    body = json.loads(cli("--config", str(config), "cost", "--since", "10m", "--json").stdout)
    [line] = body["lines"]
    # the claim was written just now: it holds for (almost) none of the window yet
    assert 0 <= line["efficiency"]["cpu"] < 0.1


@pytest.mark.parametrize(("args", "named"), [(["--by", "region"], "--by"),
                                             (["--since", "yesterday"], "--since")])
def test_bad_cost_options_are_exit_2(cli: Cli, config: Path, args: list[str], named: str):
    done = cli("--config", str(config), "cost", *args)
    assert done.code == 2 and named in done.stderr
