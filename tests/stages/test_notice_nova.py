"""A reclaim notice against Nova itself (design: Notices): the real openstacksdk on the real Nova
harness (and on the emulator, the same code). The reclaimer sets ``sco:reclaim-at`` through
Nova's metadata API; `scoctl run` replaces the server in another pool in the same pass and
deletes it at the deadline (no Kubernetes here: nothing says the node is empty earlier). A
notice on a server without scoctl's tags touches nothing.
"""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from scoctl.clock import FixedClock, rfc3339
from scoctl.config.schema import parse_config
from scoctl.config.yamlsrc import load_located
from scoctl.core.model import LaunchRequest
from scoctl.core.model.vocabulary import META_RECLAIM_AT
from scoctl.core.quantity import parse_resources
from scoctl.services.claims import record_claim
from scoctl.state import open_store
from tests.builders import Systems, one_pass
from tests.fixtures.nova import NovaBackend
from tests.fixtures.state import Cli

pytestmark = pytest.mark.nova
REGION = "region-a"


def config_text(tmp: Path, backend: NovaBackend) -> str:
    return f"""
state: {tmp}/state.db
budget_dir: {tmp}/budget
spool: {tmp}/spool
regions:
  - name: {REGION}
    cloud: scoctl-test
    mutating_calls_per_second: 1000
    launch: {{image: {backend.image}, networks: [none]}}
flavors:
  - {{name: m1.tiny, vcpus: 1, ram: 512Mi}}
pools:
  - {{name: tiny.a, region: {REGION}, az: nova, flavor: m1.tiny, group: g1,
     tier: reclaimable, depth: 5}}
  - {{name: tiny.b, region: {REGION}, az: nova, flavor: m1.tiny, group: g2,
     tier: reclaimable, depth: 5}}
contracts:
  T1: {{floor: 0, pool_cap: 1.0, group_cap: 1.0, min_pools: 1}}
ranking: {{id: r-1, scores: {{tiny.a: 0.9, tiny.b: 0.5}}}}
timeouts: {{drain_margin: 15s}}
"""


@pytest.mark.parametrize("nova_cloud", ["emulator",
                                        pytest.param("real-nova", marks=pytest.mark.realnova)],
                         indirect=True)
def test_a_noticed_server_is_replaced_in_another_pool_and_deleted_at_the_deadline(
        nova_cloud: NovaBackend, tmp_path: Path) -> None:
    text = config_text(tmp_path, nova_cloud)
    config = parse_config(load_located(text, "config.yaml"), path=None)
    clock = FixedClock()
    systems = Systems(clouds={REGION: nova_cloud.cloud})
    cloud, compute = nova_cloud.cloud, nova_cloud.connection.compute
    foreign = cloud.launch(LaunchRequest(name="not-ours", flavor=nova_cloud.small_flavor,
                                         image=nova_cloud.image, networks="none",
                                         tags=("t:foreign",))).servers[0]
    with open_store(tmp_path / "state.db", clock=clock, create=True) as store:
        record_claim(store, "web", contract="T1", requests=parse_resources({"cpu": "1"}),
                        largest_pod=parse_resources({"cpu": "1"}), pods=1, source="file")

        def run() -> None:
            result = one_pass(config, store, clock, systems, acquire_watch=0)
            assert result.exit_code == 0, result.as_dict()

        run()
        [first] = store.instances()
        assert first.pool == "tiny.a"
        nova_cloud.wait_for(lambda: cloud.server(first.id),
                            lambda s: s is not None and s.status == "ACTIVE")
        nova_cloud.wait_for(lambda: cloud.server(foreign.id),
                            lambda s: s is not None and s.status == "ACTIVE")
        deadline = rfc3339(clock.now() + timedelta(seconds=40))
        compute.set_server_metadata(first.id, **{META_RECLAIM_AT: deadline})
        due = rfc3339(clock.now())  # the foreign server's notice is due before first's
        compute.set_server_metadata(foreign.id, **{META_RECLAIM_AT: due})
        calls = len(nova_cloud.emulator.calls()) if nova_cloud.emulator is not None else 0

        clock.advance(1)
        run()  # the notice pass: re-planned and relaunched in tiny.b at once
        noticed = store.instance(first.id)
        assert noticed is not None and noticed.status == "noticed"
        [replacement] = [i for i in store.instances() if i.pool == "tiny.b"]
        nova_cloud.wait_for(lambda: cloud.server(replacement.id),
                            lambda s: s is not None and s.status == "ACTIVE")

        clock.advance(20)
        run()  # before the deadline: nothing says the node is empty, so it stays
        assert cloud.server(first.id) is not None
        clock.advance(20)
        run()  # the deadline: deleted, through the token budget
        reclaimed = next(e for e in store.events() if e.token == "INSTANCE_RECLAIMED")
        assert (reclaimed.detail["why"], reclaimed.detail["noticed"]) == ("deadline", True)
        nova_cloud.wait_for(lambda: cloud.server(first.id),
                            lambda s: s is None or s.status == "DELETED")
        ready = cloud.server(replacement.id)
        assert ready is not None and ready.status == "ACTIVE"

        # the server without scoctl's tags: its notice was due in the very passes that noticed,
        # replaced and deleted `first`, yet it is untouched, unmentioned and untracked
        kept = cloud.server(foreign.id)
        assert kept is not None and kept.status == "ACTIVE"
        assert kept.tags == frozenset({"t:foreign"}) and kept.metadata.get(META_RECLAIM_AT) == due
        assert not [e for e in store.events() if foreign.id in str(dict(e.detail))]
        assert store.instance(foreign.id) is None
        assert foreign.id not in {r.server_id for r in store.noticed(every=True)}
        if nova_cloud.emulator is not None:  # the harness of the real Nova keeps no call log
            mutating = [c for c in nova_cloud.emulator.calls()[calls:]
                        if c[0] in ("POST", "PUT", "DELETE") and foreign.id in c[1]]
            assert mutating == []


@pytest.mark.slow
@pytest.mark.parametrize("nova_cloud", ["emulator",
                                        pytest.param("real-nova", marks=pytest.mark.realnova)],
                         indirect=True)
def test_a_timer_running_the_stages_one_by_one_handles_a_notice_end_to_end(
        nova_cloud: NovaBackend, tmp_path: Path, cli: Cli) -> None:
    """`scoctl plan`, `acquire` and `reconcile` as separate commands (a systemd timer's
    ExecStart lines), never `run`: `reconcile` itself records the notice, marks the unit
    noticed and excludes its pool; the next `plan` and `acquire` replace it in another pool;
    the `reconcile` after the deadline deletes it (design: Reconciler, Notices)."""
    (tmp_path / "config.yaml").write_text(
        config_text(tmp_path, nova_cloud).replace("drain_margin: 15s", "drain_margin: 2s"),
        encoding="utf-8")
    (tmp_path / "claims.yaml").write_text(
        "claims:\n  - {workload: web, contract: T1, requests: {cpu: 1},"
        " largest_pod: {cpu: 1}}\n", encoding="utf-8")
    cli.env.update(OS_CLIENT_CONFIG_FILE=os.environ["OS_CLIENT_CONFIG_FILE"],
                   HOME=str(tmp_path), SLURM_CONF=str(tmp_path / "no-slurm.conf"))
    cli.env.pop("KUBECONFIG", None)  # no Kubernetes, no Slurm: Nova and the state only
    cloud, compute = nova_cloud.cloud, nova_cloud.connection.compute

    def scoctl(*args: str) -> dict[str, Any]:
        done = cli("--config", str(tmp_path / "config.yaml"), *args, "--json", timeout=120)
        assert done.code == 0, (args, done.stdout, done.stderr)
        body = done.json()
        assert isinstance(body, dict)
        return body

    def instances() -> list[dict[str, Any]]:
        return list(scoctl("status")["instances"])

    def tokens() -> list[str]:
        done = cli("--config", str(tmp_path / "config.yaml"), "events", "--json")
        return [json.loads(line)["token"] for line in done.stdout.splitlines() if line]

    scoctl("plan", "--claims", str(tmp_path / "claims.yaml"))  # recorded and planned
    scoctl("acquire")
    [first] = instances()
    assert first["pool"] == "tiny.a"
    nova_cloud.wait_for(lambda: cloud.server(first["id"]),
                        lambda s: s is not None and s.status == "ACTIVE")
    scoctl("reconcile")
    lead = 30.0
    deadline = datetime.now(UTC) + timedelta(seconds=lead)
    compute.set_server_metadata(first["id"], **{META_RECLAIM_AT: rfc3339(deadline)})

    noticed = scoctl("reconcile")  # the stage alone: no run, no controller
    assert noticed["notices"] is not None
    assert cloud.server(first["id"]) is not None  # drained, not deleted: the deadline is far
    assert "RECLAIM_NOTICED" in tokens()
    statuses = {i["id"]: i["status"] for i in instances()}
    assert statuses[first["id"]] == "noticed"
    assert "web" in noticed["notices"]["replan"]

    planned = scoctl("plan")  # the replacement is planned away from the noticed pool
    pools = {p["pool"]: p["units"] for w in planned["workloads"] if w["workload"] == "web"
             for p in w["pools"]}
    assert pools.get("tiny.b") == 1 and "tiny.a" not in pools, planned
    scoctl("acquire")
    [replacement] = [i for i in instances() if i["pool"] == "tiny.b"]
    nova_cloud.wait_for(lambda: cloud.server(replacement["id"]),
                        lambda s: s is not None and s.status == "ACTIVE")

    time.sleep(max(0.0, (deadline - datetime.now(UTC)).total_seconds()) + 0.5)
    scoctl("reconcile")  # past the deadline: deleted, through the token budget
    done = cli("--config", str(tmp_path / "config.yaml"), "events", "--json")
    [reclaimed] = [json.loads(line) for line in done.stdout.splitlines()
                   if line and json.loads(line)["token"] == "INSTANCE_RECLAIMED"]
    assert (reclaimed["detail"]["why"], reclaimed["detail"]["noticed"]) == ("deadline", True)
    nova_cloud.wait_for(lambda: cloud.server(first["id"]),
                        lambda s: s is None or s.status == "DELETED")
    kept = cloud.server(replacement["id"])
    assert kept is not None and kept.status == "ACTIVE"
