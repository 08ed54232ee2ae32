"""A reclaim notice against Nova itself (DESIGN §14): the real openstacksdk on the real Nova
harness (and on the emulator, the same code). The reclaimer sets ``sco:reclaim-at`` through
Nova's metadata API; `scoctl run` replaces the server in another pool in the same pass and
deletes it at the deadline (no Kubernetes here: nothing says the node is empty earlier). A
notice on a server without scoctl's tags touches nothing.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from scoctl.clock import FixedClock, rfc3339
from scoctl.config.schema import parse_config
from scoctl.config.yamlsrc import load_located
from scoctl.core.model import LaunchRequest
from scoctl.core.model.vocabulary import META_RECLAIM_AT
from scoctl.core.quantity import parse_resources
from scoctl.runner.compose import Systems, run_once
from scoctl.state import open_store
from tests.fixtures.nova import NovaBackend

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
        store.put_claim("web", contract="T1", requests=parse_resources({"cpu": "1"}),
                        largest_pod=parse_resources({"cpu": "1"}), pods=1, source="file")

        def run() -> None:
            result = run_once(config, store, clock, systems, acquire_watch=0)
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
