"""`plan_view` computes the blast radius only where it is shown or asked for (issue 29): the
`explain` workload's, every shown plan's with `blast`, and none otherwise."""

from __future__ import annotations

from pathlib import Path

from scoctl.clock import FixedClock
from scoctl.config.schema import load_config
from scoctl.core.quantity import parse_resources
from scoctl.services.claims import record_claim
from scoctl.stages.plan import plan_view
from scoctl.state import open_store
from tests.stages.test_plan import write_config


def test_blast_radius_only_for_the_explained_workload_unless_asked(tmp_path: Path) -> None:
    config = load_config(write_config(tmp_path))
    clock = FixedClock()
    with open_store(tmp_path / "state.db", clock=clock, create=True) as store:
        for name in ("alpha", "beta"):
            record_claim(store, name, contract="T1",
                         requests=parse_resources({"cpu": "64", "memory": "256Gi"}),
                         largest_pod=parse_resources({"cpu": "4", "memory": "16Gi"}), pods=16,
                         source="k8s")
        plain = plan_view(config, store, clock)
        assert set(plain.records) == {"alpha", "beta"} and plain.blasts == {}
        explained = plan_view(config, store, clock, explain="beta")
        assert set(explained.blasts) == {"beta"}
        every = plan_view(config, store, clock, blast=True)
        assert set(every.blasts) == {"alpha", "beta"}
        assert every.blasts["beta"] == explained.blasts["beta"]
    for name, record in every.records.items():  # one line per pool the plan holds
        assert {line.name for line in every.blasts[name].pools} == {u.pool for u in record.pools}
