"""`plan --explain WORKLOAD` says whether a rebalance is pending (design: Rebalance), in text and
under `rebalance` in `--json` (null when nothing triggers)."""

from __future__ import annotations

import json
from pathlib import Path

from scoctl.core.quantity import parse_resources
from scoctl.services.claims import record_claim
from scoctl.state import open_store
from tests.fixtures.state import Cli
from tests.stages.test_plan import write_config


def test_plan_explain_says_no_rebalance_is_pending_for_a_fresh_plan(cli: Cli,
                                                                     tmp_path: Path) -> None:
    config = write_config(tmp_path)
    with open_store(tmp_path / "state.db", create=True) as store:
        record_claim(store, "alpha", contract="T1",
                     requests=parse_resources({"cpu": "64", "memory": "256Gi"}),
                     largest_pod=parse_resources({"cpu": "4", "memory": "16Gi"}), pods=16,
                     source="k8s")
    assert cli("--config", str(config), "plan").code == 0
    shown = cli("--config", str(config), "plan", "--explain", "alpha", "--json")
    assert shown.code == 0, shown.stderr
    [alpha] = json.loads(shown.stdout)["workloads"]
    assert "rebalance" in alpha and alpha["rebalance"] is None  # it holds its fresh plan
    text = cli("--config", str(config), "plan", "--explain", "alpha", "--dry-run")
    assert text.code == 0, text.stderr
    assert "alpha: no rebalance pending" in text.stdout
