"""`plan --explain` for a gang (issue 49 item 2): why each pool holds what it holds — the pools
excluded (and why: a NoValidHost zone's exclusion names the zone), those too small for a
member, the group chosen and the groups it made unneeded — where it said "(none)"."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from scoctl.core.quantity import parse_resources
from scoctl.services.claims import record_claim
from scoctl.state import open_store
from tests.fixtures.state import Cli
from tests.stages.test_plan import write_config

ZONE = "GANG_FAILED: zone az0 cannot hold 6 × c16 (NoValidHost in c16.g0.spot)"


def test_plan_explain_says_where_a_gang_goes_and_why_not_elsewhere(cli: Cli,
                                                                   tmp_path: Path) -> None:
    config = write_config(tmp_path)
    with open_store(tmp_path / "state.db", create=True) as store:
        record_claim(store, "train", contract="T1",
                     requests=parse_resources({"cpu": "72", "memory": "96Gi"}),
                     largest_pod=parse_resources({"cpu": "12", "memory": "16Gi"}), pods=6,
                     source="k8s", gang=6)
        for pool in ("c16.g0.spot", "c16.g0.res"):
            store.exclude(pool, ZONE, "2099-01-01T00:00:00Z")
    shown = cli("--config", str(config), "plan", "--explain", "train", "--json")
    assert shown.code == 0, shown.stderr
    [train] = json.loads(shown.stdout)["workloads"]
    why = {e["pool"]: (e["units"], e["reason"]) for e in train["explain"]}
    assert why["c16.g0.spot"] == (0, f"excluded until 2099-01-01T00:00:00Z: {ZONE}")
    assert why["c8.g1.spot"] == (0, "flavor c8 cannot hold a member (its largest pod)")
    chosen = {p: n for p, (n, _) in why.items() if n}
    assert sum(chosen.values()) == 6 and {p.split(".")[1] for p in chosen} == {"g1"}, why
    assert all("group g1 is the best-ranked group that holds a whole gang of 6"
               in why[p][1] for p in chosen), why
    assert why["c16.g2.spot"] == (0, "not needed: a better-ranked group holds the gang")
    assert {e["pool"] for e in train["explain"]} == {
        p["name"] for p in yaml.safe_load(config.read_text())["pools"]}  # every pool told

    text = cli("--config", str(config), "plan", "--explain", "train")
    assert text.code == 0, text.stderr
    assert "train: why each pool holds what it holds" in text.stdout
    assert "(none)" not in text.stdout and "zone az0 cannot hold" in text.stdout
