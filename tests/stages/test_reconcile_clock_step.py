"""A forward step of the time of day deletes no booting server and starts no disruption
(issue 49 item 12): the reconcile stage against the Nova and Kubernetes emulators (the fixtures
of `test_reconcile`), its clock injected and stepped exactly (`FixedClock.step`: the time of day
moves, the monotonic clock does not). The timeouts still fire, on the monotonic reckoning."""

from __future__ import annotations

from scoctl.sim.k8s_emulator import make_pod
from tests.stages.test_reconcile import World, emulator_cloud, world  # noqa: F401


def test_a_forward_step_does_not_time_out_a_booting_server(world: World) -> None:  # noqa: F811
    [server] = world.launch(1)
    world.settle()
    world.reconcile()  # ACTIVE, waiting for its node (registration timeout 15 m)
    world.clock.advance(60)
    world.reconcile()
    world.clock.step(3600)  # the time of day jumps an hour ahead
    world.reconcile()
    assert world.status(server.id) == "active"
    assert "REGISTRATION_TIMEOUT" not in world.tokens()
    world.clock.advance(900 - 60 + 1)  # 15 m and a second after it went ACTIVE, really
    world.reconcile()
    assert "REGISTRATION_TIMEOUT" in world.tokens()
    assert world.status(server.id) in ("deleting", "deleted")


def test_a_forward_step_does_not_start_a_scale_down_of_idle_nodes(world: World) -> None:  # noqa: F811
    servers = world.launch(2)
    world.settle()
    for server in servers:
        world.register(server)
    world.plan({"tiny.spot": 2})
    world.k8s.add(make_pod("busy", node_name=servers[0].name, phase="Running"))
    world.reconcile()
    world.plan({"tiny.spot": 1})  # one unit surplus, idle (idle timeout 10 m)
    world.clock.advance(10)
    world.reconcile()
    world.clock.step(3600)
    assert world.reconcile().regions[0].scaled_down == ()
    assert "INSTANCE_SCALE_DOWN" not in world.tokens()
    world.clock.advance(600)
    [name] = world.reconcile().regions[0].scaled_down
    assert name == servers[1].name
