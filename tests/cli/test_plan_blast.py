"""`plan --json --blast` carries each workload's blast radius under `blast`; `plan --explain`
shows the explained workload's; plain `plan --json` computes none and prints compact JSON to a
non-terminal (`--pretty` indents it)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from scoctl.core.quantity import parse_resources
from scoctl.services.claims import record_claim
from scoctl.state import open_store
from tests.fixtures.state import Cli
from tests.stages.test_plan import write_config


def test_plan_json_and_explain_show_the_blast_radius_of_the_stored_plan(cli: Cli,
                                                                       tmp_path: Path) -> None:
    config = write_config(tmp_path)
    with open_store(tmp_path / "state.db", create=True) as store:
        record_claim(store, "alpha", contract="T1",
                        requests=parse_resources({"cpu": "64", "memory": "256Gi"}),
                        largest_pod=parse_resources({"cpu": "4", "memory": "16Gi"}), pods=16,
                        source="k8s")
    committed = cli("--config", str(config), "plan", "--json", "--blast")  # planned in this run
    assert committed.code == 0, committed.stderr
    fresh = json.loads(committed.stdout)["workloads"][0]["blast"]
    stored = cli("--config", str(config), "plan", "--json", "--blast")  # from the stored rows
    assert stored.code == 0, stored.stderr
    [alpha] = json.loads(stored.stdout)["workloads"]
    blast = alpha["blast"]
    assert blast == fresh  # the planner's own coverage and the stored rows agree
    assert {p["pool"] for p in blast["pools"]} == {p["pool"] for p in alpha["pools"]}
    assert {g["group"] for g in blast["groups"]} == {p["group"] for p in alpha["pools"]}
    assert math.isclose(sum(p["lost"] for p in blast["pools"]), 1.0, abs_tol=1e-3)
    committed_pools = [p for p in blast["pools"] if p["pool"].endswith(".res")]
    below_floor = [p for p in committed_pools if p["committed_after"] < 0.3 - 1e-9]
    assert committed_pools and below_floor  # else the next line would prove nothing
    assert not any(p["floor_holds"] for p in below_floor)
    explain = cli("--config", str(config), "plan", "--explain", "alpha")
    assert explain.code == 0 and "blast radius" in explain.stdout
    assert "holds" in explain.stdout and "breaks" in explain.stdout  # each row says which
    plain = cli("--config", str(config), "plan", "--json")
    assert plain.code == 0, plain.stderr
    assert plain.stdout.count("\n") == 1  # compact: one line, stdout is not a terminal
    [bare] = json.loads(plain.stdout)["workloads"]
    assert "blast" not in bare and bare == {k: v for k, v in alpha.items() if k != "blast"}
    pretty = cli("--config", str(config), "plan", "--json", "--pretty", "--blast")
    assert pretty.code == 0 and pretty.stdout.startswith('{\n  "generation"')
    assert json.loads(pretty.stdout) == json.loads(stored.stdout)
    explained = cli("--config", str(config), "plan", "--json", "--explain", "alpha")
    assert explained.code == 0, explained.stderr
    assert json.loads(explained.stdout)["workloads"][0]["blast"] == blast
