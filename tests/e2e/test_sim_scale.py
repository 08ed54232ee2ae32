"""`scoctl sim scale`: demand ends, and the loop scales the idle nodes down.

One simulated region (real processes, real CLI) runs the whole story: `scoctl run --once`
until the 42 pods run on Ready instance nodes, `scoctl sim scale shop/orders-daily --replicas
0` (the pods go and are not recreated, even when a node is reclaimed), then `run --once` until
reconcile has deleted every scoctl-managed server. The config is the bundled demo config with
`timeouts.idle: 1s` and `disruption.budgets: [{units: "100%"}]`; the scenario is the bundled one
with Nodes named `<server>.novalocal`, as a real cloud names them, so readiness, idle detection,
cordon, drain and Node deletion all have to match Nodes to servers by identity (design: Reconciler).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from scoctl.sim import agent
from scoctl.sim.k8s_emulator import make_deployment, make_pod, make_replicaset, pods_for
from tests.e2e.test_sim import kill_leftovers, run_scoctl, start_sim, wait_for

pytestmark = [pytest.mark.k8s, pytest.mark.nova]

DATA = Path(__file__).resolve().parents[2] / "scoctl" / "data"
DEMO = DATA / "demo.yaml"
SUFFIX = ".novalocal"


class Loop:
    """The simulated region plus a short-idle copy of the demo config, driven by the CLI."""

    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        config = yaml.safe_load(DEMO.read_text())
        config["timeouts"]["idle"] = "1s"
        config["disruption"] = {"budgets": [{"units": "100%"}]}
        self.config = cwd / "config.yaml"
        self.config.write_text(yaml.safe_dump(config))
        self.pids: list[int] = []

    def scoctl(self, *args: str) -> Any:
        result = run_scoctl(self.cwd, "--config", str(self.config), *args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result

    def sim_status(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.scoctl("sim", "status", "--json").stdout)
        return body

    def pods(self) -> list[dict[str, Any]]:
        return [p for p in self.objects("Pod") if p["metadata"].get("namespace") == "shop"]

    def instance_nodes(self) -> list[str]:
        """The Nodes of scoctl's servers."""
        return [str(n["metadata"]["name"]) for n in self.objects("Node")
                if agent.server_of(n) is not None]

    def objects(self, kind: str) -> list[dict[str, Any]]:
        api = agent.SimApi(*self._urls(), k8s_ca=str(self.sim_status()["k8s_ca"]))
        try:
            return api.objects(kind)
        finally:
            api.close()

    def _urls(self) -> tuple[str, str]:
        state = self.sim_status()
        return str(state["k8s_url"]), str(state["nova_url"])


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Loop]:
    cwd = tmp_path_factory.mktemp("scale")
    scenario = yaml.safe_load((DATA / "scenario.yaml").read_text())
    scenario["agent"]["node_suffix"] = SUFFIX
    (cwd / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    region = start_sim(cwd, "--scenario", str(cwd / "scenario.yaml"))
    story = Loop(cwd)
    story.pids = region.pids
    try:
        story.scoctl("init")
        yield story
    finally:
        result = run_scoctl(cwd, "sim", "down")
        kill_leftovers(region.pids)
        assert result.returncode == 0, result.stderr


def converge(loop: Loop, done: Any, rounds: int, pause: float) -> dict[str, Any]:
    for _ in range(rounds):
        loop.scoctl("run", "--once")
        body = loop.sim_status()
        if done(body):
            return body
        time.sleep(pause)
    raise AssertionError(f"not converged after {rounds} passes: {body}")


def test_scale_to_zero_deletes_the_pods_and_the_agent_does_not_recreate_them(loop):
    body = converge(loop, lambda b: b["pods"]["running"] == 42 and b["pods"]["pending"] == 0,
                    rounds=30, pause=1.0)
    assert body["servers"]["managed"] > 0
    names = loop.instance_nodes()  # Nodes unlike their servers: matched by identity
    assert names and all(name.endswith(SUFFIX) for name in names)

    scaled = json.loads(loop.scoctl("sim", "scale", "shop/orders-daily", "--replicas", "0",
                                    "--json").stdout)
    assert (scaled["replicas_before"], scaled["replicas"]) == (42, 0)
    assert len(scaled["pods_deleted"]) == 42 and scaled["pods_created"] == []
    assert loop.pods() == []
    # a node going away (reclaim) must not bring scaled-away pods back
    taken = json.loads(loop.scoctl("sim", "reclaim", "--count", "1", "--seed", "3",
                                   "--json").stdout)["reclaimed"]
    assert len(taken) == 1
    body = wait_for(loop.sim_status, lambda b: b["nodes"]["instances"]
                    == b["servers"]["by_status"].get("ACTIVE", 0))
    time.sleep(1.0)  # a few more agent polls
    assert loop.pods() == []
    deployment = body["deployments"][0]
    assert (deployment["replicas"], deployment["available"]) == (0, 0)


def test_the_loop_then_deletes_every_idle_server(loop):
    started = time.monotonic()
    # the node of the last server goes on the agent's next poll (a kubelet still running
    # re-registers a Node deleted before its server): wait for both
    body = converge(loop, lambda b: b["servers"]["managed"] == 0
                    and b["nodes"]["instances"] == 0, rounds=20, pause=1.2)
    seconds = time.monotonic() - started
    assert body["nodes"]["instances"] == 0 and loop.instance_nodes() == []  # no leak
    events = [json.loads(line) for line in
              loop.scoctl("events", "--json").stdout.splitlines() if line.strip()]
    tokens = [e["token"] for e in events]
    assert "INSTANCE_SCALE_DOWN" in tokens
    deleted = [e for e in events if e["token"] == "INSTANCE_DELETED"
               and "scale-down" in json.dumps(e["detail"])]
    assert deleted
    status = json.loads(loop.scoctl("status", "--json").stdout)
    assert not status.get("instances")
    errors = [e for e in events if e["level"] == "error"]
    assert errors == []  # no cordon of a Node that is not there, no instance left draining
    print(f"idle scale-down of the whole fleet: {seconds:.1f} s")


def test_scale_up_creates_pending_pods_continuing_the_numbering(loop):
    scaled = json.loads(loop.scoctl("sim", "scale", "shop/orders-daily", "--replicas", "3",
                                    "--json").stdout)
    assert scaled["pods_deleted"] == [] and len(scaled["pods_created"]) == 3
    pods = loop.pods()
    assert sorted(p["metadata"]["name"] for p in pods) == sorted(scaled["pods_created"])
    assert all(agent.is_pending(p) for p in pods)


def test_scale_of_an_unknown_deployment_is_a_usage_error(loop):
    result = run_scoctl(loop.cwd, "sim", "scale", "shop/nope", "--replicas", "1")
    assert result.returncode != 0
    assert "no Deployment shop/nope" in result.stderr
    bad = run_scoctl(loop.cwd, "sim", "scale", "orders-daily", "--replicas", "1")
    assert bad.returncode != 0 and "NAMESPACE/NAME" in bad.stderr


# --- the pure parts --------------------------------------------------------------------------


def _objects(replicas: int) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    deployment = make_deployment("web", "shop", replicas=replicas)
    deployment["metadata"]["uid"] = "d-uid"
    replicaset = make_replicaset(deployment)
    replicaset["metadata"]["uid"] = "rs-uid"
    return deployment, replicaset, pods_for(replicaset, replicas)


def test_scale_changes_removes_pending_pods_before_running_ones_then_the_newest():
    deployment, replicaset, pods = _objects(4)
    pods[0] = {**pods[0], "spec": {**pods[0]["spec"], "nodeName": "n1"},
               "status": {"phase": "Running", "conditions": [{"type": "Ready",
                                                              "status": "True"}]}}
    changes = agent.scale_changes(deployment, [replicaset], pods, 1, 1, "2026-01-01T00:00:00Z")
    assert changes.replicas == (("Deployment", "shop", "web", 1),
                                ("ReplicaSet", "shop", replicaset["metadata"]["name"], 1))
    name = replicaset["metadata"]["name"]
    assert changes.delete == (f"{name}-00003", f"{name}-00002", f"{name}-00001")
    assert changes.create == ()


def test_replacement_pods_respect_the_replica_count():
    deployment, replicaset, pods = _objects(3)
    replicaset["spec"]["replicas"] = 1  # scaled from 3 to 1: two pods surplus
    lost = pods[:2]
    room = agent.replica_room([replicaset], pods, lost)
    assert room == {"rs-uid": 0}
    assert agent.replacement_pods(lost, [p["metadata"]["name"] for p in pods], 1,
                                  "2026-01-01T00:00:00Z", room=room) == []
    replicaset["spec"]["replicas"] = 2
    room = agent.replica_room([replicaset], pods, lost)
    fresh = agent.replacement_pods(lost, [p["metadata"]["name"] for p in pods], 1,
                                   "2026-01-01T00:00:00Z", room=room)
    assert len(fresh) == 1
    standalone = make_pod("solo", "shop")
    assert agent.replacement_pods([standalone], [], 1, "2026-01-01T00:00:00Z") == []


_owner_labels = st.dictionaries(st.sampled_from(["app", "tier", "pod-template-hash"]),
                                st.sampled_from(["a", "b"]), max_size=3)
_pod_specs = st.lists(st.tuples(st.sampled_from(["shop", "ml"]), _owner_labels,
                                st.booleans(), st.sampled_from([None, "rs-a", "rs-b"])),
                      max_size=25)


@settings(max_examples=200, deadline=None)
@given(_pod_specs, st.lists(st.tuples(st.sampled_from(["shop", "ml"]), _owner_labels),
                            min_size=1, max_size=4))
def test_property_the_pod_index_finds_what_a_scan_of_every_pod_finds(pod_specs, owners):
    """pkg/controller/replicaset/replica_set.go (`FilterActivePods` over the selector's
    pods) and deployment_util: an owner's pods are those of its namespace its matchLabels
    select, not being deleted; the agent's per-step `PodIndex` (one pass per label key) gives
    every Deployment and ReplicaSet the same pods in the same order as scanning every pod,
    and `replica_room`'s one pass counts the same live pods per ReplicaSet uid."""
    pods = []
    for i, (namespace, labels, deleting, owner_uid) in enumerate(pod_specs):
        pod = make_pod(f"p{i}", namespace, labels=labels)
        if deleting:
            pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        if owner_uid:
            pod["metadata"]["ownerReferences"] = [{"apiVersion": "apps/v1",
                                                   "kind": "ReplicaSet", "name": owner_uid,
                                                   "uid": owner_uid, "controller": True}]
        pods.append(pod)
    index = agent.PodIndex(pods)
    for namespace, match in owners:
        owner = {"metadata": {"name": "o", "namespace": namespace},
                 "spec": {"selector": {"matchLabels": match}}}
        assert agent._owned(owner, index.candidates(owner)) == agent._owned(owner, pods)
    replicasets = [{"metadata": {"uid": uid}, "spec": {"replicas": 3}}
                   for uid in ("rs-a", "rs-b", "rs-c")]
    lost = pods[::3]
    gone = {p["metadata"]["name"] for p in lost}
    assert agent.replica_room(replicasets, pods, lost) == {
        rs["metadata"]["uid"]: 3 - sum(
            1 for p in pods if agent._controller_uid(p["metadata"]) == rs["metadata"]["uid"]
            and p["metadata"]["name"] not in gone and not p["metadata"].get("deletionTimestamp"))
        for rs in replicasets}


class _RacingApi:
    """The region's API as `agent.scale` uses it, with the node agent's ReplicaSet controller
    taking the first pod name `scale` chose (a 409 on its first add)."""

    def __init__(self, deployment: dict[str, Any], replicaset: dict[str, Any],
                 pods: list[dict[str, Any]]) -> None:
        self.kinds: dict[str, list[dict[str, Any]]] = {
            "Deployment": [deployment], "ReplicaSet": [replicaset], "Pod": pods, "Node": []}
        self.calls: list[str] = []
        self.raced = False

    def objects(self, kind: str) -> list[dict[str, Any]]:
        return list(self.kinds[kind])

    def k8s(self, op: str, **body: Any) -> Any:
        self.calls.append(op)
        if op == "add":
            if not self.raced:  # the agent adds the first of them meanwhile
                self.raced = True
                self.kinds["Pod"].append(body["objects"][0])
                raise RuntimeError("kubernetes /_sim/add: 409 {\"reason\":\"AlreadyExists\"}")
            names = {p["metadata"]["name"] for p in self.kinds["Pod"]}
            assert not names & {p["metadata"]["name"] for p in body["objects"]}
            self.kinds["Pod"] += body["objects"]
        return {}


def test_scale_up_adds_the_pods_before_the_count_and_reads_again_after_a_taken_name():
    deployment, replicaset, pods = _objects(2)
    api = _RacingApi(deployment, replicaset, pods)
    scaled = agent.scale(api, "shop", "web", 5)  # type: ignore[arg-type]
    # read, refused (409), read again: the pods, and only then the higher counts
    assert api.calls == ["add", "add", "patch", "patch"]
    assert len(scaled["pods_created"]) == 2  # the agent made the third
    assert len({p["metadata"]["name"] for p in api.kinds["Pod"]}) == 5


def test_a_refusal_other_than_a_taken_name_is_not_retried():
    deployment, replicaset, pods = _objects(1)

    class Refusing(_RacingApi):
        def k8s(self, op: str, **body: Any) -> Any:
            self.calls.append(op)
            raise RuntimeError("kubernetes /_sim/add: 422 invalid")

    api = Refusing(deployment, replicaset, pods)
    with pytest.raises(RuntimeError, match="422"):
        agent.scale(api, "shop", "web", 3)  # type: ignore[arg-type]
    assert api.calls == ["add"]
