"""`scoctl sim`: a simulated region driven by the real kubernetes client and openstacksdk.

The region runs as real detached processes started by the real CLI (`python -m scoctl sim up`);
every test talks to it over 127.0.0.1 and the region is stopped by PID (`scoctl sim down`),
which is checked.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import pytest

from scoctl.adapters.nova import NovaCloud
from scoctl.config.schema import load_config
from scoctl.config.yamlsrc import load_located
from scoctl.core.model import LaunchRequest, ServerInfo
from scoctl.core.userdata import BootContract, render_user_data
from scoctl.errors import ConfigError
from scoctl.sim import agent
from scoctl.sim.k8s_emulator import PODGROUP_CRD, K8sEmulator, make_node, make_pod, seed
from scoctl.sim.region import pid_alive
from scoctl.sim.scenario import (
    kubernetes_crds,
    kubernetes_objects,
    load_scenario,
    nova_seed,
    parse_scenario,
)

pytestmark = [pytest.mark.k8s, pytest.mark.nova]

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")
RECLAIMABLE = {"key": "reclaimable", "value": "true", "effect": "NoSchedule"}


def run_scoctl(cwd: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCOCTL_")}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "scoctl", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def wait_for(read: Callable[[], T], done: Callable[[T], bool], timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if done(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s; last value: {value!r}")
        time.sleep(0.1)


def kill_leftovers(pids: list[int]) -> None:
    """Safety net for a failing test: never leave a process behind (by PID only)."""
    for pid in pids:
        if pid_alive(pid):
            os.kill(pid, signal.SIGKILL)


@dataclass
class Sim:
    cwd: Path
    directory: Path
    state: dict[str, Any]
    up_seconds: float

    @property
    def pids(self) -> list[int]:
        return [int(c["pid"]) for c in self.state["components"]]

    def core(self) -> Any:
        """The test's own look at the cluster, as the admin (scoctl runs under its role)."""
        from kubernetes import client, config

        return client.CoreV1Api(config.new_client_from_config(str(self.directory /
                                                                  "kubeconfig-admin")))

    def apps(self) -> Any:
        from kubernetes import client, config

        return client.AppsV1Api(config.new_client_from_config(str(self.directory /
                                                                  "kubeconfig-admin")))

    def cloud(self) -> NovaCloud:
        import openstack.config
        import openstack.connection

        region = openstack.config.OpenStackConfig(
            config_files=[str(self.directory / "clouds.yaml")]).get_one(cloud="scoctl-sim")
        return NovaCloud(openstack.connection.Connection(config=region))


def start_sim(cwd: Path, *options: str) -> Sim:
    started = time.monotonic()
    result = run_scoctl(cwd, "sim", "up", "--json", *options)
    seconds = time.monotonic() - started
    assert result.returncode == 0, result.stderr
    state = json.loads(result.stdout)
    return Sim(cwd=cwd, directory=cwd / ".scoctl-sim", state=state, up_seconds=seconds)


@contextlib.contextmanager
def sim_running(cwd: Path, *options: str) -> Iterator[Sim]:
    """`scoctl sim up` in `cwd` (with `options`), brought down at the end (`sim down`, then
    any component still alive killed by its PID)."""
    region = start_sim(cwd, *options)
    try:
        yield region
    finally:
        result = run_scoctl(region.cwd, "sim", "down")
        kill_leftovers(region.pids)
        assert result.returncode == 0, result.stderr


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    with sim_running(tmp_path_factory.mktemp("sim")) as region:
        yield region


def contract(pool: str, tier: str, flavor: str, az: str) -> BootContract:
    return BootContract(workload="orders-daily", contract="T1", pool=pool, tier=tier,
                        generation=1, launch="l-0123456789ab", region="sim-region", az=az,
                        flavor=flavor)


def launch(cloud: NovaCloud, sim: Sim, boot: BootContract, count: int,
           launch_id: str) -> list[ServerInfo]:
    template = resources.files("scoctl.data").joinpath("user-data.yaml").read_text()
    secret = (sim.directory / "join-token").read_text().strip()
    tags = ("sco:managed", f"sco:workload={boot.workload}", f"sco:pool={boot.pool}",
            f"sco:gen={boot.generation}", f"sco:launch={launch_id}")
    result = cloud.launch(LaunchRequest(
        name=f"sco-{boot.workload}-{launch_id}", flavor=boot.flavor, image="ubuntu-24.04",
        networks=("sim-net",), az=boot.az, min_count=count, max_count=count, tags=tags,
        metadata={t.split("=")[0]: (t.split("=") + ["true"])[1] for t in tags},
        user_data=render_user_data(template, boot, secret), security_groups=("default",)))
    return list(result.servers)


@dataclass
class Fleet:
    spot: list[ServerInfo]
    committed: list[ServerInfo]
    first_seen_ready: dict[str, bool]
    seconds_to_ready: float


@pytest.fixture(scope="module")
def fleet(sim: Sim) -> Fleet:
    """Two reclaimable c4.xlarge instances and one committed, launched through openstacksdk."""
    cloud = sim.cloud()
    started = time.monotonic()
    spot = launch(cloud, sim, contract("c4.xlarge.row-i.spot", "reclaimable", "c4.xlarge", "az3"),
                  2, "l-aaaaaaaaaaaa")
    committed = launch(cloud, sim, contract("c4.xlarge.row-a.res", "committed", "c4.xlarge",
                                            "az1"), 1, "l-bbbbbbbbbbbb")
    core = sim.core()
    names = {s.name for s in spot + committed}
    first_seen: dict[str, bool] = {}

    def nodes() -> dict[str, Any]:
        out = {n.metadata.name: n for n in core.list_node().items if n.metadata.name in names}
        for name, node in out.items():
            first_seen.setdefault(name, agent_ready(node))
        return out

    wait_for(nodes, lambda found: len(found) == 3 and all(map(agent_ready, found.values())))
    return Fleet(spot, committed, first_seen, time.monotonic() - started)


def agent_ready(node: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


# --- the bundled scenario, read by the real clients ------------------------------------------


def test_sim_up_serves_the_42_pending_pods_to_the_kubernetes_client(sim):
    pods = sim.core().list_namespaced_pod("shop").items
    assert len(pods) == 42
    for pod in pods:
        assert pod.metadata.labels["sco/workload"] == "orders-daily"
        assert pod.spec.node_name is None
        scheduled = next(c for c in pod.status.conditions if c.type == "PodScheduled")
        assert (scheduled.status, scheduled.reason) == ("False", "Unschedulable")
        assert pod.spec.containers[0].resources.requests == {"cpu": "4", "memory": "16Gi"}
        # managed pods of an exclusive workload: its toleration and selector, as the platform
        # gives them, beside the reclaimable toleration
        assert [(t.key, t.operator, t.value, t.effect) for t in pod.spec.tolerations] == [
            ("sco/workload", "Equal", "orders-daily", "NoSchedule"),
            ("reclaimable", "Equal", "true", "NoSchedule")]
        assert pod.spec.node_selector == {"sco/workload": "orders-daily"}
    deployment = sim.apps().read_namespaced_deployment("orders-daily", "shop")
    assert deployment.metadata.labels["sco/managed"] == "true"
    assert deployment.spec.replicas == 42
    workers = [n for n in sim.core().list_node().items if n.spec.provider_id is None]
    assert len(workers) == 3 and all(n.status.allocatable["cpu"] == "2" for n in workers)


def test_sim_up_serves_the_demo_flavors_zones_and_limits_to_openstacksdk(sim):
    conn = sim.cloud().connection
    demo = load_config(None)
    flavors = {f.name: (f.vcpus, f.ram) for f in conn.compute.flavors()}
    assert flavors == {f.name: (f.vcpus, f.ram // 2**20) for f in demo.flavors.values()}
    limits = conn.compute.get_limits().absolute
    assert (limits.instances, limits.total_cores) == (1000, 16000)
    assert limits.total_ram == 64 * 2**20
    zones = {z.name for z in conn.compute.availability_zones()}
    assert zones == {p.az for p in demo.pools} == {"az1", "az2", "az3"}
    assert (sim.directory / "join-token").stat().st_mode & 0o777 == 0o600


def test_sim_status_reports_the_running_processes_and_the_pending_pods(sim):
    result = run_scoctl(sim.cwd, "sim", "status", "--json")
    assert result.returncode == 0, result.stderr
    body = json.loads(result.stdout)
    assert body["running"] is True
    assert {c["name"] for c in body["components"]} == {"k8s", "nova", "agent"}
    assert body["pods"]["pending"] + body["pods"]["running"] == 42


# --- instances become nodes ------------------------------------------------------------------


def test_launched_servers_register_notready_then_ready_with_contract_labels_and_taints(sim,
                                                                                       fleet):
    nodes = {n.metadata.name: n for n in sim.core().list_node().items}
    assert fleet.first_seen_ready and not any(fleet.first_seen_ready.values())
    for server in fleet.spot + fleet.committed:
        node = nodes[server.name]
        reclaimable = server in fleet.spot
        assert node.spec.provider_id == f"openstack:///{server.id}"
        labels = node.metadata.labels
        assert labels["sco/managed"] == "true"
        assert labels["sco/workload"] == "orders-daily"
        assert labels["sco/reclaimable"] == ("true" if reclaimable else "false")
        assert labels["node.kubernetes.io/instance-type"] == "c4.xlarge"
        taints = [t.to_dict() for t in node.spec.taints or []]
        assert [{k: v for k, v in t.items() if v is not None} for t in taints] == (
            [RECLAIMABLE] if reclaimable else [])
        assert node.status.capacity["cpu"] == "16"
        assert node.status.capacity["memory"] == "64Gi"
        assert node.status.allocatable["cpu"] == "15900m"
        assert node.status.allocatable["memory"] == "63Gi"


def test_the_agent_schedules_pending_pods_onto_ready_nodes_with_room(sim, fleet):
    core = sim.core()
    names = {s.name for s in fleet.spot + fleet.committed}

    def running() -> list[Any]:
        return [p for p in core.list_namespaced_pod("shop").items
                if p.status.phase == "Running"]

    pods = wait_for(running, lambda found: len(found) == 9)  # 3 pods of 4 vCPU/16Gi per node
    assert {p.spec.node_name for p in pods} == names
    deployment = wait_for(lambda: sim.apps().read_namespaced_deployment("orders-daily", "shop"),
                          lambda d: d.status.ready_replicas == 9)
    available = next(c for c in deployment.status.conditions if c.type == "Available")
    assert available.status == "False"  # 9 of 42: below the 25% maxUnavailable


# --- spot reclaims ---------------------------------------------------------------------------


def test_reclaiming_a_server_removes_it_and_its_node_and_requeues_its_pods(sim, fleet):
    victim = fleet.spot[0]
    result = run_scoctl(sim.cwd, "sim", "reclaim", "--server", victim.id, "--json")
    assert result.returncode == 0, result.stderr
    assert [r["id"] for r in json.loads(result.stdout)["reclaimed"]] == [victim.id]
    cloud = sim.cloud()
    assert cloud.server(victim.id) is None
    core = sim.core()
    wait_for(lambda: [n.metadata.name for n in core.list_node().items],
             lambda names: victim.name not in names)
    pods = wait_for(lambda: core.list_namespaced_pod("shop").items,
                    lambda found: sum(p.status.phase == "Running" for p in found) == 6
                    and len(found) == 42)
    assert not any(p.spec.node_name == victim.name for p in pods)


def test_reclaim_by_count_takes_only_reclaimable_instances(sim, fleet):
    result = run_scoctl(sim.cwd, "sim", "reclaim", "--count", "5", "--seed", "1", "--json")
    assert result.returncode == 0, result.stderr
    taken = {r["id"] for r in json.loads(result.stdout)["reclaimed"]}
    assert taken == {fleet.spot[1].id}  # the committed instance is never reclaimed
    cloud = sim.cloud()
    assert cloud.server(fleet.committed[0].id) is not None


def test_fail_node_turns_the_node_not_ready_for_good_while_the_server_stays_active(sim, fleet):
    """pkg/controller/nodelifecycle/node_lifecycle_controller.go `tryUpdateNodeHealth`: a Node
    whose kubelet stopped posting status turns Ready=Unknown (``NodeStatusUnknown``, "Kubelet
    stopped posting node status.") after the grace period, tainted
    ``node.kubernetes.io/unreachable`` (`doNoScheduleTaintingPass`); its server stays ACTIVE."""
    server = fleet.committed[0]
    core = sim.core()
    assert agent_ready(core.read_node(server.name))
    result = run_scoctl(sim.cwd, "sim", "fail-node", server.name, "--json")
    assert result.returncode == 0, result.stderr
    failed = json.loads(result.stdout)["failed"]
    assert (failed["id"], failed["node"], failed["status"]) == (server.id, server.name, "ACTIVE")
    node = wait_for(lambda: core.read_node(server.name), lambda n: not agent_ready(n),
                    timeout=20)
    [ready] = [c for c in node.status.conditions if c.type == "Ready"]
    assert (ready.status, ready.reason, ready.message) == (
        "Unknown", "NodeStatusUnknown", "Kubelet stopped posting node status.")
    node = wait_for(lambda: core.read_node(server.name),
                    lambda n: any(t.key == "node.kubernetes.io/unreachable"
                                  for t in n.spec.taints or []))
    deadline = time.monotonic() + 3  # six agent polls: it stays so
    while time.monotonic() < deadline:
        assert not agent_ready(core.read_node(server.name))
        time.sleep(0.5)
    assert sim.cloud().server(server.id).status == "ACTIVE"
    unknown = run_scoctl(sim.cwd, "sim", "fail-node", "no-such-server")
    assert unknown.returncode == 2 and "no server 'no-such-server'" in unknown.stderr


# --- lifecycle -------------------------------------------------------------------------------


def test_up_twice_is_idempotent_and_down_stops_every_process_by_pid(tmp_path):
    first = start_sim(tmp_path)
    try:
        again = run_scoctl(tmp_path, "sim", "up", "--json")
        assert again.returncode == 0, again.stderr
        second = json.loads(again.stdout)
        assert second["already_running"] is True
        assert [c["pid"] for c in second["components"]] == first.pids
        assert all(pid_alive(pid) for pid in first.pids)
        started = time.monotonic()
        down = run_scoctl(tmp_path, "sim", "down", "--json")
        stop_seconds = time.monotonic() - started
        assert down.returncode == 0, down.stderr
        stopped = json.loads(down.stdout)["stopped"]
        assert {s["how"] for s in stopped} == {"terminated"}
        assert not any(pid_alive(pid) for pid in first.pids)
        assert not (tmp_path / ".scoctl-sim" / "kubeconfig").exists()
        status = run_scoctl(tmp_path, "sim", "status")
        assert status.returncode == 1
        print(f"sim up {first.up_seconds:.2f} s, sim down {stop_seconds:.2f} s")
    finally:
        kill_leftovers(first.pids)


@pytest.mark.parametrize("killed", ["nova", "k8s"])
def test_up_restarts_one_killed_emulator_on_its_port_and_leaves_the_live_ones(tmp_path, killed):
    first = start_sim(tmp_path)
    before = {c["name"]: int(c["pid"]) for c in first.state["components"]}
    seen = list(before.values())
    try:
        os.kill(before[killed], signal.SIGKILL)
        wait_for(lambda: pid_alive(before[killed]), lambda alive: not alive)

        again = run_scoctl(tmp_path, "sim", "up", "--json")

        assert again.returncode == 0, again.stderr
        state = json.loads(again.stdout)
        after = {c["name"]: int(c["pid"]) for c in state["components"]}
        seen.extend(after.values())
        assert state["running"] is True and state["restarted"] == [killed]
        assert after[killed] != before[killed] and pid_alive(after[killed])
        assert {n: p for n, p in after.items() if n != killed} == \
            {n: p for n, p in before.items() if n != killed}
        assert (state["k8s_url"], state["nova_url"]) == (first.state["k8s_url"],
                                                         first.state["nova_url"])
        # served again on its old port, from the seed it was first started with
        if killed == "nova":
            assert {f.name for f in first.cloud().flavors()} == {
                f["name"] for f in json.loads((first.directory / "nova-seed.json").read_text(
                    encoding="utf-8"))["flavors"]}
        else:
            assert len(first.core().list_namespaced_pod("shop").items) == 42
    finally:
        run_scoctl(tmp_path, "sim", "down")
        kill_leftovers(seen)


def test_sim_down_without_a_region_is_a_no_op(tmp_path):
    result = run_scoctl(tmp_path, "sim", "down")
    assert result.returncode == 0
    assert "no simulated region" in result.stdout


# --- the pure parts --------------------------------------------------------------------------


def test_the_bundled_scenario_takes_its_flavors_and_zones_from_the_demo_config():
    scenario = load_scenario(None)
    seed = nova_seed(scenario, load_config(None))
    assert {f["name"] for f in seed["flavors"]} == set(load_config(None).flavors)
    assert seed["availability_zones"] == ["az1", "az2", "az3"]
    assert [i["name"] for i in seed["images"]] == ["ubuntu-24.04"]
    assert [n["name"] for n in seed["networks"]] == ["sim-net"]
    assert [(d.name, d.replicas, d.requests) for d in scenario.deployments] == [
        ("orders-daily", 42, {"cpu": 4000, "memory": 16 * 2**30})]


@pytest.mark.parametrize(("text", "where"), [
    ("nova: {quota: {instances: many}}\n", "scenario.yaml:1: nova.quota.instances"),
    ("kubernetes:\n  deployments:\n    - {name: a, namespace: s, requests: {cpu: lots}}\n",
     "scenario.yaml:3: kubernetes.deployments[0].requests"),
    ("agent: {reclaim: {mode: explode}}\n", "scenario.yaml:1: agent.reclaim.mode"),
    ("agent: {node_suffix: novalocal}\n", "scenario.yaml:1: agent.node_suffix"),
    ("bogus: 1\n", "scenario.yaml:1: bogus"),
    ("nova: {az_capacity: {az1: {vcpus: 0}}}\n", "scenario.yaml:1: nova.az_capacity.az1.vcpus"),
])
def test_a_bad_scenario_names_its_file_line_and_field(text, where):
    with pytest.raises(ConfigError) as caught:
        parse_scenario(load_located(text, "scenario.yaml"), base=None)
    assert str(caught.value).startswith(where)


def test_az_capacity_sizes_one_zones_host_in_the_nova_seed():
    text = "nova: {az_capacity: {az2: {vcpus: 32, ram: 128Gi}}}\n"
    scenario = parse_scenario(load_located(text, "scenario.yaml"), base=None)
    seed = nova_seed(scenario, load_config(None))
    assert seed["az_capacity"] == {"az2": {"vcpus": 32, "ram": 128 * 1024, "disk": 10**7}}
    assert seed["capacity"] is None  # the other zones stay unlimited


def test_nodes_take_the_scenarios_suffix_and_carry_their_servers_identity():
    scenario = parse_scenario(load_located("agent: {node_suffix: .novalocal}\n",
                                           "scenario.yaml"), base=None)
    assert scenario.node_suffix == ".novalocal"
    server = {"id": "s-1", "name": "sco-web-l-1", "status": "ACTIVE", "tags": ["sco:managed"],
              "flavor": "m1.small", "user_data": ""}
    actions = agent.plan_nodes([server], [], {}, 0.0, 2.0, {}, "2026-01-01T00:00:00Z",
                               scenario.node_suffix)
    [node] = actions.create
    assert node["metadata"]["name"] == "sco-web-l-1.novalocal"
    assert node["metadata"]["labels"]["sco/instance"] == "s-1"
    assert agent.server_of(node) == "s-1"
    # registered once: the next poll finds it by identity and creates nothing more
    again = agent.plan_nodes([server], [node], {node["metadata"]["name"]: 0.0}, 5.0, 2.0, {},
                             "2026-01-01T00:00:05Z", scenario.node_suffix)
    assert again.create == () and again.ready == ("sco-web-l-1.novalocal",)


def test_registration_reads_kubelet_flags_when_the_template_has_no_contract_json():
    reg = agent.registration('KUBELET_EXTRA_ARGS="--node-labels=sco/managed=true,'
                             'sco/reclaimable=false --register-with-taints=gpu=true:NoSchedule"')
    assert reg.labels == {"sco/managed": "true", "sco/reclaimable": "false"}
    assert reg.taints == ("gpu=true:NoSchedule",)
    assert reg.reclaimable is False


def test_the_scheduler_respects_taints_capacity_and_readiness():
    tainted = make_node("spot", cpu="8", memory="32Gi", taints=[RECLAIMABLE])
    plain = make_node("plain", cpu="8", memory="32Gi")
    booting = make_node("booting", cpu="64", memory="256Gi", ready=False)
    # the scheduler takes pending pods by name: the intolerant "a" pods first
    intolerant = [make_pod(f"a{i}", "shop", cpu="4", memory="16Gi") for i in range(3)]
    tolerant = [make_pod(f"b{i}", "shop", cpu="4", memory="16Gi",
                         tolerations=[{"key": "reclaimable", "operator": "Equal",
                                       "value": "true", "effect": "NoSchedule"}])
                for i in range(3)]
    bindings = agent.schedule(tolerant + intolerant, [tainted, plain, booting])
    assert bindings == [("shop", "a0", "plain"), ("shop", "a1", "plain"),
                        ("shop", "b0", "spot"), ("shop", "b1", "spot")]


def test_lost_pods_are_replaced_by_pending_pods_that_continue_the_numbering():
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs",
                                                                         "uid": "u"}}
    lost = [make_pod("rs-00003", "shop", owner=owner, node_name="gone", phase="Running")]
    fresh = agent.replacement_pods(lost, ["rs-00000", "rs-00003", "rs-00041"], 3,
                                   "2026-01-01T00:00:00Z")
    assert [p["metadata"]["name"] for p in fresh] == ["rs-00042"]
    assert "nodeName" not in fresh[0]["spec"]
    assert fresh[0]["status"]["conditions"][0]["reason"] == "Unschedulable"


def test_scenario_pod_groups_are_seeded_with_their_crd_installed_first():
    text = ("kubernetes:\n  pod_groups:\n    - {name: train, namespace: ml, min_member: 4}\n"
            "    - {name: eval, namespace: ml}\n")
    scenario = parse_scenario(load_located(text, "scenario.yaml"), base=None)
    objects = kubernetes_objects(scenario, "2026-01-01T00:00:00Z")
    assert [(o["kind"], o["metadata"]["name"], o.get("spec")) for o in objects] == [
        ("Namespace", "ml", None),
        ("PodGroup", "train", {"minMember": 4}), ("PodGroup", "eval", {})]
    data = {"crds": kubernetes_crds(scenario), "objects": objects}
    assert data["crds"] == [PODGROUP_CRD]
    emulator = K8sEmulator()
    seed(emulator, data)  # as `python -m scoctl.sim.k8s_emulator --seed` loads it
    assert [g["spec"] for g in emulator.objects("PodGroup", "ml")] == [{}, {"minMember": 4}]
    # without PodGroups the CRD stays uninstalled: the API is not served
    assert kubernetes_crds(parse_scenario(load_located("{}\n", "s.yaml"), base=None)) == []
    with pytest.raises(KeyError):
        seed(K8sEmulator(), {"objects": objects})


@pytest.mark.parametrize(("text", "where"), [
    ("kubernetes: {pod_groups: [{name: t, namespace: ml, min_member: 0}]}\n",
     "scenario.yaml:1: kubernetes.pod_groups[0].min_member"),
    ("kubernetes: {pod_groups: [{name: t, namespace: ml}, {name: t, namespace: ml}]}\n",
     "scenario.yaml:1: kubernetes.pod_groups"),
])
def test_a_bad_scenario_pod_group_names_its_field(text, where):
    with pytest.raises(ConfigError) as caught:
        parse_scenario(load_located(text, "scenario.yaml"), base=None)
    assert str(caught.value).startswith(where)


def test_a_managed_inference_service_carries_its_exclusive_workloads_isolation():
    """The platform gives a managed InferenceService's predictor its workload's toleration
    and node selector (KServe copies the predictor's onto its pods), as it gives a managed
    Deployment's pods; a shared workload's gets neither, an unmanaged one neither."""
    text = ("kubernetes:\n  inference_services:\n"
            "    - {name: llm, namespace: ml, workload: llm, managed: true,\n"
            "       tolerate_reclaimable: true, requests: {cpu: 2, memory: 4Gi}}\n"
            "    - {name: shared, namespace: ml, workload: pool, managed: true,\n"
            "       requests: {cpu: 2, memory: 4Gi}}\n"
            "    - {name: theirs, namespace: ml, workload: other,\n"
            "       requests: {cpu: 2, memory: 4Gi}}\n")
    scenario = parse_scenario(load_located(text, "scenario.yaml"), base=None)
    objects = kubernetes_objects(scenario, "2026-01-01T00:00:00Z", frozenset({"pool"}))
    predictors = {o["metadata"]["name"]: o["spec"]["predictor"] for o in objects
                  if o["kind"] == "InferenceService"}
    assert predictors["llm"]["nodeSelector"] == {"sco/workload": "llm"}
    assert [t["key"] for t in predictors["llm"]["tolerations"]] == ["sco/workload",
                                                                   "reclaimable"]
    assert "nodeSelector" not in predictors["shared"] and "tolerations" not in predictors["shared"]
    assert "nodeSelector" not in predictors["theirs"] and "tolerations" not in predictors["theirs"]
