"""The whole loop against Nova's own harness on a PostgreSQL state, with no SQLite file anywhere
(design: Runners).

Real processes only: ``python -m scoctl`` (init, then ``run --once`` passes) with ``state:`` a
database of the session's private PostgreSQL cluster, the real openstacksdk against the real Nova
harness (python3-nova, `real_nova`) and the real kubernetes client against the Kubernetes
emulator. The test plays the kubelets and the scheduler: it registers a Ready node for each
server Nova turned ACTIVE and binds the pending pods there. Pending pods → claims → plan →
acquire (servers appear in Nova) → reconcile (ready) → the pods go (demand gone) → scale-down:
cordon, drain, delete the Node, delete the server (gone from Nova).

HOME, every XDG directory and the working directory are the test's own, so a SQLite file written
anywhere scoctl writes by default would be found.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scoctl.adapters.nova import NovaCloud
from scoctl.core.model import ServerInfo
from scoctl.sim.k8s_emulator import K8sEmulator, make_node, make_pod
from scoctl.sim.nova_emulator import IMAGE_ID
from tests.builders import JOIN_FIELDS
from tests.fixtures.nova import RealNova, write_clouds_yaml
from tests.fixtures.postgres import PgState

pytestmark = [pytest.mark.nova, pytest.mark.k8s, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
CLOUD = "harness"
RECLAIMABLE = {"key": "reclaimable", "value": "true", "effect": "NoSchedule"}
XDG = ("XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME",
       "XDG_RUNTIME_DIR")
PODS = 2  # one m1.tiny unit each (a pod of 600m does not leave room for a second)


@dataclass
class Loop:
    """One host's directories, its config, and the two systems it talks to."""

    root: Path
    config: Path
    k8s: K8sEmulator
    nova: NovaCloud

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SCOCTL_", "OS_", "KUBECONFIG", "SLURM_", "PG", "XDG_"))}
        env.update(PYTHONPATH=str(REPO), HOME=str(self.root / "home"),
                   SLURM_CONF=str(self.root / "no-slurm.conf"),
                   **{name: str(self.root / name.lower()) for name in XDG})
        return env

    def scoctl(self, *args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run([sys.executable, "-m", "scoctl", "--config", str(self.config),
                               *args], cwd=self.root / "work", env=self.env(), text=True,
                              capture_output=True, timeout=300, check=False)
        assert done.returncode == 0, (args, done.stdout[-2000:], done.stderr[-3000:])
        return done

    def run_until(self, done: Any, passes: int = 30) -> None:
        """``run --once`` until `done()` (the kubelets and scheduler act between passes)."""
        for _ in range(passes):
            self.scoctl("run", "--once")
            self.kubelets()
            if done():
                return
            time.sleep(0.5)
        raise AssertionError(f"not done after {passes} passes: {self.status()}")

    def servers(self) -> list[ServerInfo]:
        return [s for s in self.nova.servers(tags=["sco:managed"]) if s.status != "DELETED"]

    def kubelets(self) -> None:
        """A Ready node for each ACTIVE server (as kubelet registers it), and the pending pods
        bound to those nodes (as kube-scheduler would)."""
        nodes = {n["metadata"]["name"] for n in self.k8s.objects("Node")}
        for server in self.servers():
            if server.status == "ACTIVE" and server.name not in nodes:
                tags = dict(t.split("=", 1) for t in server.tags if "=" in t)
                self.k8s.add(make_node(
                    server.name, cpu="1", memory="512Mi",
                    provider_id=f"openstack:///{server.id}", taints=[RECLAIMABLE],
                    labels={"sco/managed": "true", "sco/workload": tags["sco:workload"],
                            "sco/pool": tags["sco:pool"], "sco/instance": server.id}))
                nodes.add(server.name)
        free = sorted(nodes - {p["spec"].get("nodeName") for p in self.k8s.objects("Pod")})
        for pod in self.k8s.objects("Pod", "default"):
            if not pod["spec"].get("nodeName") and free:
                self.k8s.bind_pod("default", pod["metadata"]["name"], free.pop(0))

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.scoctl("status", "--json").stdout)
        return body

    def instances(self) -> dict[str, str]:
        return {i["id"]: i["status"] for i in self.status()["instances"]}


@pytest.fixture
def loop(real_nova: RealNova, pg_state: PgState, k8s_emulator: K8sEmulator,
         k8s_kubeconfig: Path, tmp_path: Path) -> Iterator[Loop]:
    root = tmp_path / "host"
    for name in ("home", "work", *(x.lower() for x in XDG)):
        (root / name).mkdir(parents=True)
    project = "p" + uuid.uuid4().hex[:12]
    clouds = write_clouds_yaml(root, CLOUD, real_nova.url, project)
    (root / "join-token").write_text("k8s-join-0123456789abcdef\n")
    config = root / "config.yaml"
    config.write_text(f"""
state: {pg_state.url}
state_password_file: {pg_state.password_file}
budget_dir: {root / "budget"}
spool: {root / "spool"}
kubernetes: {{kubeconfig: {k8s_kubeconfig}, context: scoctl-sim}}
timeouts: {{idle: 1s}}
disruption_budget: 1.0
regions:
  - name: region-a
    cloud: {CLOUD}
    clouds_yaml: {clouds}
    launch: {{image: {IMAGE_ID}, networks: [none]}}
flavors:
  - {{name: m1.tiny, vcpus: 1, ram: 512Mi}}
pools:
  - {{name: tiny.a, region: region-a, az: nova, flavor: m1.tiny, group: g1,
     tier: reclaimable, depth: 20}}
ranking: {{id: r-1, scores: {{tiny.a: 0.5}}}}
contracts:
  T1: {{floor: 0, pool_cap: 1.0, group_cap: 1.0, min_pools: 1}}
workloads:
  - {{name: web, contract: T1, source: k8s}}
bootstrap: {{join_secret_file: {root / "join-token"}, {JOIN_FIELDS}}}
""")
    import openstack.config
    import openstack.connection

    region = openstack.config.OpenStackConfig(config_files=[str(clouds)]).get_one(cloud=CLOUD)
    nova = NovaCloud(openstack.connection.Connection(config=region))
    found = Loop(root, config, k8s_emulator, nova)
    try:
        yield found
    finally:
        for server in found.servers():  # free the shared harness host for the next test
            nova.delete(server.id)
        nova.connection.close()


def sqlite_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and (
        p.suffix in (".db", ".sqlite", ".sqlite3") or p.name.endswith(("-wal", "-shm"))
        or p.read_bytes()[:16] == b"SQLite format 3\x00")]


def test_the_whole_loop_against_the_nova_harness_on_postgresql_leaves_no_sqlite_file(
        loop: Loop, tmp_path: Path) -> None:
    init = json.loads(loop.scoctl("init", "--json").stdout)
    assert init["created"] and init["state"].startswith("postgresql://")
    for i in range(PODS):
        loop.k8s.add(make_pod(f"web-{i}", "default", cpu="600m", memory="64Mi",
                              labels={"sco/workload": "web"}, unschedulable="0/1 nodes",
                              tolerations=[{**RECLAIMABLE, "operator": "Equal"}]))

    loop.run_until(lambda: len(loop.servers()) == PODS
                   and set(loop.instances().values()) == {"ready"})
    launched = {s.id for s in loop.servers()}  # in Nova, made by scoctl
    assert set(loop.instances()) == launched
    assert all(p["status"]["phase"] == "Running" for p in loop.k8s.objects("Pod", "default"))

    for i in range(PODS):  # the demand is gone
        loop.k8s.delete("Pod", "default", f"web-{i}")
    loop.run_until(lambda: not loop.servers()
                   and set(loop.instances().values()) <= {"deleted"}, passes=40)
    assert {s.id for s in loop.nova.servers()} & launched == set()  # deleted in Nova
    assert loop.k8s.objects("Node") == []  # each Node deleted before its server

    status = loop.status()
    [leader] = status["leaders"]
    assert leader["region"] == "region-a"
    events = [json.loads(line) for line in loop.scoctl("events", "--json").stdout.splitlines()
              if line.strip()]
    tokens = [e["token"] for e in events]
    assert tokens.count("INSTANCE_SCALE_DOWN") == PODS and "LEADER_ELECTED" in tokens
    assert sqlite_files(tmp_path) == []  # the state dir, HOME, XDG dirs, cwd: all of them
