"""A 60 s reclaim notice on the simulated region (design: Notices), end to end.

Real processes started by the real CLI: the Kubernetes emulator (with the bundled scenario's
PodDisruptionBudget, maxUnavailable 1, over the 42 pods of orders-daily), the Nova emulator and
the node agent (which reclaims a noticed server when its deadline comes). `scoctl run --once`
runs until the pods run; `scoctl sim reclaim --count 2 --notice 60s` gives two instances
notice; `run --once` then runs every second (or the controller, `run --follow`, runs alone)
while a watcher counts the Ready pods ten times a second. The replacements must be Ready and
every pod of the noticed nodes evicted (never killed by the reclaim) before the deadline, the
budget never broken, the noticed servers gone by then.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from scoctl.core.model.vocabulary import META_RECLAIM_AT
from scoctl.errors import ConfigError
from scoctl.sim import agent
from tests.e2e.test_sim import kill_leftovers, run_scoctl, start_sim

pytestmark = [pytest.mark.k8s, pytest.mark.nova, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "scoctl" / "data" / "demo.yaml"
REPLICAS = 42


class Region:
    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        self.config = cwd / "config.yaml"
        self.config.write_text(yaml.safe_dump(yaml.safe_load(DEMO.read_text())))
        self.pids: list[int] = []

    def scoctl(self, *args: str) -> str:
        result = run_scoctl(self.cwd, "--config", str(self.config), *args)
        assert result.returncode == 0, (args, result.stdout, result.stderr)
        return result.stdout

    def sim_status(self) -> dict[str, Any]:
        body: dict[str, Any] = json.loads(self.scoctl("sim", "status", "--json"))
        return body

    def api(self) -> agent.SimApi:
        body = self.sim_status()
        return agent.SimApi(str(body["k8s_url"]), str(body["nova_url"]),
                            k8s_ca=str(body["k8s_ca"]))

    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.scoctl("events", "--json").splitlines()
                if line.strip()]


class ReadyWatch(threading.Thread):
    """Counts the Ready pods of orders-daily ten times a second; keeps the minimum."""

    def __init__(self, api: agent.SimApi) -> None:
        super().__init__(daemon=True)
        self.api, self.lowest, self.samples = api, REPLICAS, 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            pods = [p for p in self.api.objects("Pod") if p["metadata"].get("namespace") == "shop"]
            self.lowest = min(self.lowest, sum(1 for p in pods if agent.is_running(p)))
            self.samples += 1
            self.done.wait(0.1)


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Region]:
    cwd = tmp_path_factory.mktemp("notice")
    sim = start_sim(cwd)
    story = Region(cwd)
    story.pids = sim.pids
    try:
        story.scoctl("init")
        yield story
    finally:
        result = run_scoctl(cwd, "sim", "down")
        kill_leftovers(sim.pids)
        assert result.returncode == 0, result.stderr


def running_everywhere(region: Region) -> dict[str, Any]:
    for _ in range(40):
        region.scoctl("run", "--once")
        body = region.sim_status()
        if body["pods"]["running"] == REPLICAS and body["pods"]["pending"] == 0:
            return body
        time.sleep(1.0)
    raise AssertionError(f"the pods never all ran: {body}")


def notice_and_follow(region: Region, step: Callable[[], None], seed: str) -> None:
    """Give two instances a 60 s notice, call `step` every second until their servers are gone
    (or the deadline comes), and check the whole flow: the replacements Ready and every pod
    evicted before the deadline, the PodDisruptionBudget held, no pod killed by a reclaim.
    The pods must already run everywhere: no `run --once` here, as one would race a running
    controller for the run lock (exit 75 while a pass holds it)."""
    api = region.api()
    watch = ReadyWatch(api)
    watch.start()
    since = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    log_from = len((region.cwd / ".scoctl-sim" / "agent.log").read_text())
    try:
        noticed_at = time.monotonic()
        taken = json.loads(region.scoctl("sim", "reclaim", "--count", "2", "--notice", "60s",
                                         "--seed", seed, "--json"))["noticed"]
        names = {t["name"] for t in taken}
        deadline = max(datetime.fromisoformat(t["reclaim_at"].replace("Z", "+00:00"))
                       for t in taken)
        on_noticed = {p["metadata"]["name"] for p in api.objects("Pod")
                      if p["spec"].get("nodeName") in names}
        assert len(names) == 2 and on_noticed
        gone_after = None
        while datetime.now(UTC) < deadline:
            step()
            servers = {s["name"] for s in api.servers() if s.get("status") != "DELETED"}
            if not names & servers:
                gone_after = time.monotonic() - noticed_at
                break
            time.sleep(1.0)
    finally:
        watch.done.set()
        watch.join(5)
        api.close()
    assert gone_after is not None, "the noticed servers outlived their deadline"
    events = [e for e in region.events() if e["ts"] >= since]
    ready = [e["detail"] for e in events if e["token"] == "REPLACEMENT_READY"]
    reclaimed = [e["detail"] for e in events if e["token"] == "INSTANCE_RECLAIMED"]
    assert len(ready) == 2 and all(r["before_deadline"] for r in ready), ready
    assert {r["name"] for r in reclaimed} == names
    assert all(r["noticed"] and r["why"] == "empty" for r in reclaimed), reclaimed
    assert sum(r["evicted"] for r in reclaimed) == len(on_noticed)  # moved, not killed
    assert sum(r["pods_deleted"] for r in reclaimed) == 0
    assert watch.samples > 50 and watch.lowest >= REPLICAS - 1  # maxUnavailable: 1 held
    log = (region.cwd / ".scoctl-sim" / "agent.log").read_text()[log_from:]
    assert "pods of removed nodes replaced" not in log  # nothing ran there at the end
    assert "reclaim at the notice deadline" not in log  # scoctl was first
    body = region.sim_status()
    assert body["pods"]["running"] == REPLICAS
    lead = min(e["detail"]["lead_seconds"] for e in events if e["token"] == "RECLAIM_NOTICED")
    ready_s = max(r["seconds"] for r in ready)
    before = min(r["before_deadline_seconds"] for r in reclaimed)
    print(f"60 s notice: seen with {lead:.1f} s left, replacements Ready after {ready_s:.1f} s, "
          f"{len(on_noticed)} pods "
          f"evicted, noticed servers gone after {gone_after:.1f} s ({before:.1f} s before the "
          f"deadline), fewest Ready pods {watch.lowest}/{REPLICAS} over {watch.samples} samples")


def test_a_60s_notice_moves_every_pod_before_the_deadline_within_the_budget(
        region: Region) -> None:
    running_everywhere(region)
    notice_and_follow(region, lambda: region.scoctl("run", "--once"), seed="13")


def test_the_controller_drains_and_replaces_a_noticed_instance_on_its_own(
        region: Region) -> None:
    """`run --follow` alone (no pass from outside), already past its first reconcile when the
    notice comes: the notice in the server metadata reaches it through `timeouts.notice_poll`
    (the fleet holds reclaimable capacity) — its `reconcile_interval` here is 120 s, past the
    60 s deadline — and it looks again every follow-up while the drain runs."""
    running_everywhere(region)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCOCTL_")}
    env["PYTHONPATH"] = str(REPO)
    config = yaml.safe_load(region.config.read_text())
    config.setdefault("timeouts", {}).update(reconcile_interval="120s", notice_poll="3s")
    slow = region.cwd / "controller.yaml"
    slow.write_text(yaml.safe_dump(config))
    log_path = region.cwd / "controller.log"
    log = log_path.open("w")
    controller = subprocess.Popen(
        [sys.executable, "-m", "scoctl", "--config", str(slow), "--json", "run", "--follow"],
        cwd=region.cwd, env=env, stdout=log, stderr=subprocess.STDOUT)

    def reconciled() -> bool:  # a pass (one JSON line) with a reconcile step in it
        passes = [json.loads(line) for line in log_path.read_text().splitlines()
                  if line.startswith("{")]
        return any(step["step"] == "reconcile" for one in passes for step in one["steps"])

    try:
        deadline = time.monotonic() + 60
        while not reconciled():  # its first reconcile is done: the notice comes after it
            assert controller.poll() is None and time.monotonic() < deadline, \
                log_path.read_text()[-2000:]
            time.sleep(0.2)
        notice_and_follow(region, lambda: None, seed="29")
        assert controller.poll() is None, "the controller stopped"
    finally:
        controller.send_signal(signal.SIGTERM)
        code = controller.wait(60)
        log.close()
    assert code == 0, (region.cwd / "controller.log").read_text()[-2000:]


# --- the pure parts --------------------------------------------------------------------------


def test_a_replicaset_below_its_count_gets_pending_pods_continuing_the_numbering() -> None:
    from scoctl.sim.k8s_emulator import make_deployment, make_replicaset, pods_for

    deployment = make_deployment("web", "shop", replicas=3)
    deployment["metadata"]["uid"] = "d-uid"
    replicaset = make_replicaset(deployment)
    replicaset["metadata"]["uid"] = "rs-uid"
    pods = pods_for(replicaset, 3)
    assert agent.missing_pods([replicaset], pods, 1, "2026-01-01T00:00:00Z") == []
    evicted = pods[:1] + pods[2:]
    [fresh] = agent.missing_pods([replicaset], evicted, 1, "2026-01-01T00:00:00Z")
    assert fresh["metadata"]["name"] == f"{replicaset['metadata']['name']}-00003"
    assert fresh["metadata"]["ownerReferences"][0]["uid"] == "rs-uid"
    assert agent.is_pending(fresh)


def test_a_noticed_server_is_taken_at_its_deadline_and_not_picked_at_random() -> None:
    import random

    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    noticed = {"id": "a", "status": "ACTIVE", "tags": ["sco:managed"],
               "metadata": {META_RECLAIM_AT: "2026-01-01T12:00:00Z"}}
    later = {**noticed, "id": "b", "metadata": {META_RECLAIM_AT: "2026-01-01T12:01:00Z"}}
    plain = {"id": "c", "status": "ACTIVE", "tags": ["sco:managed"], "metadata": {}}
    bad = {**noticed, "id": "d", "metadata": {META_RECLAIM_AT: "noon"}}
    assert [s["id"] for s in agent.due_reclaims([noticed, later, plain, bad], now)] == ["a"]
    picked = agent.pick_reclaim([noticed, later, plain], 3, random.Random(1))
    assert [s["id"] for s in picked] == ["c"]


def test_the_scenario_gives_a_deployment_a_disruption_budget() -> None:
    from scoctl.config.yamlsrc import load_located
    from scoctl.sim.scenario import kubernetes_objects, load_scenario, parse_scenario

    [dep] = load_scenario(None).deployments
    assert dep.pdb == {"maxUnavailable": 1}
    [pdb] = [o for o in kubernetes_objects(load_scenario(None), "2026-01-01T00:00:00Z")
             if o["kind"] == "PodDisruptionBudget"]
    assert pdb["spec"] == {"selector": {"matchLabels": {"app": "orders-daily"}},
                           "maxUnavailable": 1}
    text = ("kubernetes:\n  deployments:\n    - {name: a, namespace: s, requests: {cpu: 1},"
            " pdb: {max_unavailable: lots}}\n")
    with pytest.raises(ConfigError, match=r"scenario.yaml:3: .*pdb.max_unavailable"):
        parse_scenario(load_located(text, "scenario.yaml"), base=None)


def test_a_notice_that_does_not_parse_is_exit_2(tmp_path: Path) -> None:
    result = run_scoctl(tmp_path, "sim", "reclaim", "--notice", "soon")
    assert result.returncode == 2 and "--notice 'soon'" in result.stderr


def test_a_replicaset_makes_its_new_pods_with_the_templates_labels_and_annotations() -> None:
    """The ReplicaSet controller creates pods from the whole template metadata
    (`pkg/controller/controller_utils.go` `getPodsAnnotationSet` / `GetPodFromTemplate`):
    a re-created pod keeps the template's annotations, as `karpenter.sh/do-not-disrupt`."""
    from scoctl.sim.k8s_emulator import make_deployment, make_replicaset, pods_for

    deployment = make_deployment("web", "shop", replicas=2)
    deployment["metadata"]["uid"] = "d-uid"
    deployment["spec"]["template"]["metadata"]["annotations"] = {
        "karpenter.sh/do-not-disrupt": "true"}
    replicaset = make_replicaset(deployment)
    replicaset["metadata"]["uid"] = "rs-uid"
    [kept] = pods_for(replicaset, 1)
    [fresh] = agent.missing_pods([replicaset], [kept], 1, "2026-01-01T00:00:00Z")
    assert fresh["metadata"]["annotations"] == {"karpenter.sh/do-not-disrupt": "true"}
    assert fresh["metadata"]["labels"] == replicaset["spec"]["template"]["metadata"]["labels"]
