"""KServe InferenceServices, DD-0018's third kind, on the simulated region under the controller,
end to end.

Real processes: ``scoctl sim up`` with a scenario of three InferenceServices (the region makes
each one's predictor Deployment ``<isvc>-predictor`` as KServe's raw reconciler does: labelled
``serving.kserve.io/inferenceservice``, owned by the InferenceService, its ReplicaSet and pods
from the Deployment and ReplicaSet controllers) and the controller ``scoctl run --follow``:

* ``llm-small`` fits the existing worker: its pod runs, the workload is ``running``;
* ``llm-large`` fits no existing node (but a pool): its pod is Unschedulable and the workload is
  ``queued`` (``POD_QUEUED``) until the unit scoctl launches for it joins, then ``running``;
* ``llm-capped`` is refused by its namespace's ResourceQuota (quota admission: 403 ``exceeded
  quota``, the ReplicaSet's and the Deployment's ``ReplicaFailure``): the workload is
  ``failed`` (``POD_QUOTA_EXCEEDED_FAILED``) and its InferenceService is torn down, its
  predictor Deployment and ReplicaSet collected with it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scoctl.sim import agent
from tests.e2e.test_sim import kill_leftovers, run_scoctl, start_sim
from tests.e2e.test_sim_notice import DEMO
from tests.e2e.test_sim_placement import Region as PlacementRegion

pytestmark = [pytest.mark.k8s, pytest.mark.nova]

REPO = Path(__file__).resolve().parents[2]
NAMESPACE = {"llm-small": "ml", "llm-large": "ml", "llm-capped": "capped"}
SCENARIO = {
    "config": "config.yaml",
    "nova": {"timing": {"schedule": 0.2, "recheck": 0.05, "active": 0.5, "delete": 0.2}},
    "kubernetes": {
        "nodes": [{"name": "worker-1", "cpu": 3, "memory": "12Gi"}],
        "quotas": [{"name": "capped-compute", "namespace": "capped",
                    "hard": {"requests.cpu": "2", "requests.memory": "8Gi"}}],
        "inference_services": [
            {"name": "llm-small", "namespace": "ml", "requests": {"cpu": 2, "memory": "4Gi"},
             "managed": True},
            {"name": "llm-large", "namespace": "ml", "requests": {"cpu": 4, "memory": "16Gi"},
             "tolerate_reclaimable": True, "managed": True},
            {"name": "llm-capped", "namespace": "capped",
             "requests": {"cpu": 4, "memory": "16Gi"}, "managed": True},
        ],
    },
    "agent": {"poll_interval": "0.2s", "ready_after": "1s"},
}


class Region(PlacementRegion):
    def __init__(self, cwd: Path) -> None:
        self.cwd = cwd
        config = yaml.safe_load(DEMO.read_text())
        # shared: llm-small runs on the cluster's own worker, which carries no workload
        # label; the paths here are DD-0018's statuses, isolation has tests of its own
        config["workloads"] = [{"name": name, "contract": "T1", "source": "k8s",
                                "kind": "inference", "namespace": ns, "isolation": "shared"}
                               for name, ns in NAMESPACE.items()]
        config["timeouts"]["reconcile_interval"] = "2s"
        self.config = cwd / "config.yaml"
        self.config.write_text(yaml.safe_dump(config))
        (cwd / "scenario.yaml").write_text(yaml.safe_dump(SCENARIO))


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Region]:
    cwd = tmp_path_factory.mktemp("inference")
    story = Region(cwd)
    sim = start_sim(cwd, "--scenario", str(cwd / "scenario.yaml"))
    try:
        story.scoctl("init")
        yield story
    finally:
        result = run_scoctl(cwd, "sim", "down")
        kill_leftovers(sim.pids)
        assert result.returncode == 0, result.stderr


def named(objects: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["metadata"]["name"] == name]


def test_inference_services_run_queue_and_fail_on_quota_with_their_objects_torn_down(
        region: Region) -> None:
    api = region.api()
    # the region made each predictor as KServe does, before scoctl ran
    deadline = time.monotonic() + 30
    while len(api.objects("Deployment")) < 3:
        assert time.monotonic() < deadline, api.objects("Deployment")
        time.sleep(0.2)
    isvcs = {i["metadata"]["name"]: i for i in api.objects("InferenceService")}
    for dep in api.objects("Deployment"):
        isvc = dep["metadata"]["labels"]["serving.kserve.io/inferenceservice"]
        assert dep["metadata"]["name"] == f"{isvc}-predictor"
        assert dep["metadata"]["labels"]["component"] == "predictor"
        [owner] = dep["metadata"]["ownerReferences"]
        assert (owner["kind"], owner["uid"]) == ("InferenceService",
                                                 isvcs[isvc]["metadata"]["uid"])
    log_path = region.cwd / "controller.log"
    log = log_path.open("w")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)}
    controller = subprocess.Popen(
        [sys.executable, "-m", "scoctl", "--config", str(region.config), "--json", "run",
         "--follow"], cwd=region.cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
    seen: dict[str, set[str]] = {name: set() for name in NAMESPACE}
    try:
        deadline = time.monotonic() + 90
        while True:
            assert controller.poll() is None, log_path.read_text()[-3000:]
            for w in region.json("status")["workloads"]:
                if w["slug"] in seen:
                    seen[w["slug"]].add(w["status"])
            capped_gone = not named(api.objects("InferenceService"), "llm-capped") and not \
                named(api.objects("Deployment"), "llm-capped-predictor")
            if "running" in seen["llm-small"] and "running" in seen["llm-large"] \
                    and "failed" in seen["llm-capped"] and capped_gone:
                break
            assert time.monotonic() < deadline, (seen, log_path.read_text()[-3000:])
            time.sleep(0.5)
        tokens = {(e["workload"], e["token"], e["status"]) for e in map(json.loads, region.scoctl(
            "events", "--json").splitlines())}
        # queued while its pod waited for the capacity scoctl then launched, then running
        assert ("llm-large", "POD_QUEUED", "queued") in tokens, tokens
        assert ("llm-capped", "POD_QUOTA_EXCEEDED_FAILED", "failed") in tokens, tokens
        small = [p for p in api.objects("Pod")
                 if p["metadata"]["labels"].get("serving.kserve.io/inferenceservice")
                 == "llm-small"]
        assert len(small) == 1 and agent.is_running(small[0])
        assert small[0]["spec"]["nodeName"] == "worker-1"
        # the capped one's ReplicaSet went with its Deployment (garbage collection) and no
        # pod of it was ever admitted
        assert not [rs for rs in api.objects("ReplicaSet")
                    if rs["metadata"]["name"].startswith("llm-capped-predictor-")]
        assert not [p for p in api.objects("Pod") if p["metadata"]["namespace"] == "capped"]
        assert "failed" not in seen["llm-small"] | seen["llm-large"], seen
        assert not {t for t in tokens if t[0] == "llm-small" and t[1] == "POD_QUEUED"}
    finally:
        api.close()
        controller.send_signal(signal.SIGTERM)
        code = controller.wait(60)
        log.close()
    assert code == 0, log_path.read_text()[-3000:]
