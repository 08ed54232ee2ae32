"""The simulated region's kube-scheduler end to end: a scenario Deployment with a node selector
and a zone topology spread lands as kube-scheduler would put it, read back through the real
kubernetes client; a pod using a field the simulator does not implement is refused loudly.

The region runs as real processes started by the real CLI (`scoctl sim up`) on 127.0.0.1 and is
stopped by PID (`scoctl sim down`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scoctl.sim.k8s_emulator import make_pod
from tests.e2e.test_sim import Sim, kill_leftovers, run_scoctl, start_sim, wait_for

pytestmark = [pytest.mark.k8s, pytest.mark.nova]

ZONE = "topology.kubernetes.io/zone"
SCENARIO = {
    "config": "bundled",
    "kubernetes": {
        "nodes": [
            {"name": "z1-a", "cpu": 4, "memory": "8Gi", "labels": {ZONE: "az1", "pool": "web"}},
            {"name": "z1-b", "cpu": 4, "memory": "8Gi", "labels": {ZONE: "az1", "pool": "web"}},
            {"name": "z2-a", "cpu": 2, "memory": "8Gi", "labels": {ZONE: "az2", "pool": "web"}},
            {"name": "z3-a", "cpu": 8, "memory": "8Gi", "labels": {ZONE: "az3", "pool": "db"}},
        ],
        "deployments": [{
            "name": "web", "namespace": "shop", "replicas": 6,
            "requests": {"cpu": 1, "memory": "1Gi"},
            "labels": {"tier": "front"},
            "annotations": {"karpenter.sh/do-not-disrupt": "true"},
            "node_selector": {"pool": "web"},
            "topology_spread_constraints": [{
                "maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}}}],
        }],
    },
    "agent": {"poll_interval": "0.2s", "ready_after": "1s"},
}


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    cwd = tmp_path_factory.mktemp("sched")
    (cwd / "scenario.yaml").write_text(yaml.safe_dump(SCENARIO))
    sim = start_sim(cwd, "--scenario", str(cwd / "scenario.yaml"))
    try:
        yield sim
    finally:
        result = run_scoctl(sim.cwd, "sim", "down")
        kill_leftovers(sim.pids)
        assert result.returncode == 0, result.stderr


def _scheduled(pod: Any) -> Any:
    return next((c for c in pod.status.conditions or [] if c.type == "PodScheduled"), None)


def test_a_zone_spread_with_a_node_selector_lands_as_kube_scheduler_puts_it(region):
    """podtopologyspread/filtering.go `Filter` (maxSkew 1 over the zones of the nodes the node
    selector allows: nodeAffinityPolicy Honor, so az3 is no domain), nodeaffinity `Filter`,
    noderesources/fit.go `fitsRequest`, and framework/types.go `FitError.Error` for the pod
    that fits nowhere. The old agent scheduler, blind to spread, put the sixth pod in az1."""
    core = region.core()

    def pods() -> list[Any]:
        return list(core.list_namespaced_pod("shop").items)

    def settled(found: list[Any]) -> bool:
        running = [p for p in found if p.status.phase == "Running"]
        waiting = [p for p in found if p.status.phase == "Pending"
                   and "topology spread" in (_scheduled(p).message or "")]
        return len(running) == 5 and len(waiting) == 1

    found = wait_for(pods, settled, timeout=60)
    running = [p for p in found if p.status.phase == "Running"]
    nodes = Counter(p.spec.node_name for p in running)
    # az1 (two 4-cpu nodes) takes 3, az2 (one 2-cpu node) is full with 2, az3 none
    assert nodes == {"z1-a": 2, "z1-b": 1, "z2-a": 2}
    [pending] = [p for p in found if p.status.phase == "Pending"]
    condition = _scheduled(pending)
    assert (condition.status, condition.reason) == ("False", "Unschedulable")
    assert condition.message == (
        "0/4 nodes are available: 1 Insufficient cpu, 1 node(s) didn't match Pod's node "
        "affinity/selector, 2 node(s) didn't match pod topology spread constraints.")
    for pod in found:  # written onto every pod as the ReplicaSet writes its template
        assert pod.metadata.labels["tier"] == "front"
        assert pod.metadata.annotations["karpenter.sh/do-not-disrupt"] == "true"
        assert pod.spec.node_selector == {"pool": "web"}
        [spread] = pod.spec.topology_spread_constraints
        assert (spread.max_skew, spread.topology_key) == (1, ZONE)
    for pod in running:
        assert _scheduled(pod).status == "True"  # the Unschedulable condition went on binding


def test_a_pod_for_another_scheduler_is_refused_loudly(region):
    """Not upstream (another scheduler would take it): the simulator names the field it does
    not implement, in a PodScheduled=False/SchedulerError condition and the agent's log."""
    pod = make_pod("batch-0", "shop", cpu="100m", memory="64Mi")
    pod["spec"]["schedulerName"] = "volcano"
    region.core().create_namespaced_pod("shop", pod)

    def condition() -> Any:
        return _scheduled(region.core().read_namespaced_pod("batch-0", "shop"))

    found = wait_for(condition, lambda c: c is not None and c.reason == "SchedulerError")
    assert "spec.schedulerName" in found.message and "volcano" in found.message
    assert region.core().read_namespaced_pod("batch-0", "shop").spec.node_name is None
    log = Path(region.directory / "agent.log")
    wait_for(log.read_text, lambda text: "batch-0 not scheduled" in text)
