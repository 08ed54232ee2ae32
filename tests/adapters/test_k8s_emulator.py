"""The Kubernetes API emulator, driven by the real `kubernetes` client over HTTP."""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator

pytestmark = pytest.mark.k8s

UNSCHED = "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: " \
          "3 No preemption victims found for incoming pod.."


def seed_orders(emu: K8sEmulator, pods: int = 3) -> tuple[dict[str, Any], dict[str, Any]]:
    dep = emu.add(ke.make_deployment("orders", "ml", replicas=pods, cpu="4", memory="16Gi",
                                     managed=True, pod_labels={"sco/workload": "orders-daily"}))
    rs = emu.add(ke.make_replicaset(dep))
    emu.add_many(ke.pods_for(rs, pods, unschedulable=UNSCHED))
    return dep, rs


def status_of(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    return body


# --- every object served deserializes into the client's strict models -------------------------


def test_every_kind_the_emulator_builds_deserializes_into_the_client_models(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    emu = k8s_emulator
    emu.add(ke.make_node("gpu-1", gpus=8, labels={"sco/pool": "p1"}, provider_id="openstack:///x",
                         taints=[{"key": "reclaimable", "value": "true",
                                  "effect": "NoSchedule"}]))
    dep, rs = seed_orders(emu)
    emu.add(ke.make_pod("sidecar-pod", "ml", init_containers=[
        ke.make_container("proxy", cpu="100m", memory="64Mi", restart_policy="Always")],
        tolerations=[{"key": "reclaimable", "operator": "Exists", "effect": "NoSchedule"}],
        overhead={"cpu": "250m"}, unschedulable=UNSCHED))
    emu.add(ke.make_pod("gated", "ml", scheduling_gates=["example.com/wait"]))
    job = emu.add(ke.make_job("train", "ml", parallelism=2, gpus=1))
    emu.add_many(ke.pods_for(job, 2, unschedulable=UNSCHED))
    isvc = emu.add(ke.make_inference_service("llm", "ml", gpus=2))
    emu.add(ke.make_predictor_deployment(isvc))
    emu.add(ke.make_resource_quota("compute", "ml", {"requests.cpu": "8", "pods": "10"}))
    emu.add(ke.make_event(rs, "FailedCreate", "Error creating: exceeded quota: compute"))
    emu.set_replica_failure("Deployment", "ml", "orders", "exceeded quota: compute")
    emu.set_node_ready("gpu-1", False)

    core, apps = client.CoreV1Api(k8s_api), client.AppsV1Api(k8s_api)
    batch = client.BatchV1Api(k8s_api)
    node = core.list_node().items[0]
    assert node.status.allocatable["nvidia.com/gpu"] == "8"
    assert node.spec.taints[0].key == "reclaimable"
    assert node.status.conditions[0].status == "False"
    pods = core.list_namespaced_pod("ml").items
    assert len(pods) == 7
    assert {p.status.conditions[0].reason for p in pods} == {"Unschedulable", "SchedulingGated"}
    assert apps.read_namespaced_deployment("orders", "ml").status.conditions[0].type == \
        "ReplicaFailure"
    assert apps.list_namespaced_replica_set("ml").items[0].metadata.owner_references[0].uid == \
        dep["metadata"]["uid"]
    assert batch.read_namespaced_job("train", "ml").spec.template.spec.restart_policy == "Never"
    assert core.list_namespaced_resource_quota("ml").items[0].spec.hard["pods"] == "10"
    assert core.list_namespaced_event("ml").items[0].involved_object.kind == "ReplicaSet"
    assert [n.metadata.name for n in core.list_namespace().items] == [
        "default", "kube-node-lease", "kube-system", "ml"]


def test_objects_the_client_could_not_read_are_refused_with_422(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    with pytest.raises(ke.StatusError) as bad_quantity:
        k8s_emulator.add({"kind": "Node", "metadata": {"name": "n"},
                          "status": {"allocatable": {"nvidia.com/gpu": 8}}})
    assert bad_quantity.value.code == 422
    assert "status.allocatable[nvidia.com/gpu]" in bad_quantity.value.message
    with pytest.raises(ke.StatusError, match="spec.containers: Required value"):
        k8s_emulator.add({"kind": "Pod", "metadata": {"name": "p"}, "spec": {}})
    core = client.CoreV1Api(k8s_api)
    with pytest.raises(ApiException) as invalid:
        core.create_namespaced_pod("default", {"metadata": {"name": "Bad_Name"},
                                               "spec": {"containers": [{"name": "a"}]}})
    assert invalid.value.status == 422
    assert status_of(invalid.value)["reason"] == "Invalid"
    apps = client.AppsV1Api(k8s_api)
    mismatched = ke.make_deployment("d", "default")
    mismatched["spec"]["template"]["metadata"]["labels"] = {"app": "other"}
    with pytest.raises(ApiException) as selector:
        apps.create_namespaced_deployment("default", mismatched)
    assert selector.value.status == 422
    assert "selector" in status_of(selector.value)["message"]


# --- discovery -----------------------------------------------------------------------------------


def test_discovery_and_version(k8s_api: Any) -> None:
    assert client.VersionApi(k8s_api).get_code().git_version.startswith("v1.32")
    assert client.CoreApi(k8s_api).get_api_versions().versions == ["v1"]
    groups = {g.name for g in client.ApisApi(k8s_api).get_api_versions().groups}
    # (the review APIs, authentication.k8s.io and authorization.k8s.io, as upstream serves them;
    # coordination.k8s.io for the node Leases)
    assert groups == {"apps", "batch", "policy", "serving.kserve.io", "rbac.authorization.k8s.io",
                      "authentication.k8s.io", "authorization.k8s.io", "coordination.k8s.io"}
    resources = client.CoreV1Api(k8s_api).get_api_resources().resources
    assert {"pods", "pods/eviction", "nodes", "events"} <= {r.name for r in resources}
    policy = client.PolicyV1Api(k8s_api).get_api_resources().resources
    assert {r.name for r in policy} == {"poddisruptionbudgets", "poddisruptionbudgets/status"}


# --- list, selectors, pagination -----------------------------------------------------------------


def test_label_selectors(k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    emu = k8s_emulator
    emu.add(ke.make_pod("a", labels={"app": "web", "tier": "gpu"}))
    emu.add(ke.make_pod("b", labels={"app": "web", "tier": "cpu"}))
    emu.add(ke.make_pod("c", labels={"app": "db"}))
    core = client.CoreV1Api(k8s_api)

    def names(selector: str) -> list[str]:
        return [p.metadata.name for p in core.list_namespaced_pod(
            "default", label_selector=selector).items]

    assert names("app=web") == ["a", "b"]
    assert names("app==web,tier!=gpu") == ["b"]
    assert names("tier in (gpu, cpu)") == ["a", "b"]
    assert names("app,tier notin (gpu)") == ["b", "c"]
    assert names("!tier") == ["c"]
    assert names("tier") == ["a", "b"]
    with pytest.raises(ApiException) as bad:
        names("app in gpu)")
    assert bad.value.status == 400


def test_field_selectors(k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    emu = k8s_emulator
    emu.add(ke.make_pod("waiting", "ml", unschedulable=UNSCHED))
    emu.add(ke.make_pod("bound", "ml", node_name="n1", phase="Running"))
    emu.add(ke.make_pod("other", "default", unschedulable=UNSCHED))
    core = client.CoreV1Api(k8s_api)

    def names(selector: str) -> list[str]:
        return [p.metadata.name for p in core.list_pod_for_all_namespaces(
            field_selector=selector).items]

    assert names("status.phase=Pending,spec.nodeName=") == ["other", "waiting"]
    assert names("spec.nodeName=n1") == ["bound"]
    assert names("metadata.namespace=ml,status.phase!=Running") == ["waiting"]
    assert names("metadata.name=other") == ["other"]
    with pytest.raises(ApiException) as bad:
        names("spec.priority=3")
    assert bad.value.status == 400
    assert "field label not supported" in status_of(bad.value)["message"]


def test_paged_lists_return_every_object_once(k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    seed_orders(k8s_emulator, pods=25)
    core = client.CoreV1Api(k8s_api)
    seen: list[str] = []
    cont = None
    pages = 0
    while True:
        page = core.list_namespaced_pod("ml", limit=10, _continue=cont)
        seen += [p.metadata.name for p in page.items]
        pages += 1
        cont = page.metadata._continue
        if not cont:
            break
    assert pages == 3
    assert seen == sorted(seen) and len(set(seen)) == 25


def test_an_expired_continue_token_gets_410(k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    seed_orders(k8s_emulator, pods=5)
    core = client.CoreV1Api(k8s_api)
    first = core.list_namespaced_pod("ml", limit=2)
    k8s_emulator.compact()
    with pytest.raises(ApiException) as gone:
        core.list_namespaced_pod("ml", limit=2, _continue=first.metadata._continue)
    assert gone.value.status == 410
    assert status_of(gone.value)["reason"] == "Expired"


# --- watch ---------------------------------------------------------------------------------------


def later(seconds: float, action: Any) -> threading.Thread:
    def run() -> None:
        time.sleep(seconds)
        action()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_a_watch_from_a_resource_version_sees_only_later_changes(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    emu = k8s_emulator
    emu.add(ke.make_pod("before", unschedulable=UNSCHED))
    core = client.CoreV1Api(k8s_api)
    rv = core.list_pod_for_all_namespaces().metadata.resource_version

    def change() -> None:
        emu.add(ke.make_pod("after", unschedulable=UNSCHED))
        emu.bind_pod("default", "before", "n1")
        emu.delete("Pod", "default", "after")

    thread = later(0.2, change)
    events = [(e["type"], e["object"].metadata.name) for e in watch.Watch().stream(
        core.list_pod_for_all_namespaces, resource_version=rv, timeout_seconds=1)]
    thread.join()
    assert events == [("ADDED", "after"), ("MODIFIED", "before"), ("DELETED", "after")]


def test_a_watch_without_resource_version_starts_with_the_current_objects(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    k8s_emulator.add(ke.make_node("n1"))
    k8s_emulator.add(ke.make_node("n2"))
    core = client.CoreV1Api(k8s_api)
    events = [(e["type"], e["object"].metadata.name)
              for e in watch.Watch().stream(core.list_node, timeout_seconds=1)]
    assert events == [("ADDED", "n1"), ("ADDED", "n2")]


def test_objects_leaving_a_watched_selector_are_seen_as_deleted(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    emu = k8s_emulator
    emu.add(ke.make_pod("p", unschedulable=UNSCHED))
    core = client.CoreV1Api(k8s_api)
    rv = str(emu.resource_version)
    thread = later(0.2, lambda: emu.bind_pod("default", "p", "n1"))
    events = [(e["type"], e["object"].spec.node_name) for e in watch.Watch().stream(
        core.list_pod_for_all_namespaces, field_selector="spec.nodeName=",
        resource_version=rv, timeout_seconds=1)]
    thread.join()
    assert events == [("DELETED", "n1")]


def test_timeout_seconds_ends_the_watch(k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    core = client.CoreV1Api(k8s_api)
    started = time.monotonic()
    events = list(watch.Watch().stream(core.list_node,
                                       resource_version=str(k8s_emulator.resource_version),
                                       timeout_seconds=1))
    took = time.monotonic() - started
    assert events == []
    assert 0.9 <= took < 3


def test_a_compacted_resource_version_gets_410_and_a_relist_recovers(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    emu = k8s_emulator
    emu.add(ke.make_pod("a", unschedulable=UNSCHED))
    core = client.CoreV1Api(k8s_api)
    old_rv = core.list_pod_for_all_namespaces().metadata.resource_version
    emu.add(ke.make_pod("b", unschedulable=UNSCHED))
    emu.compact()
    with pytest.raises(ApiException) as gone:
        list(watch.Watch().stream(core.list_pod_for_all_namespaces, resource_version=old_rv,
                                  timeout_seconds=2))
    assert gone.value.status == 410
    assert "Expired: too old resource version" in str(gone.value.reason)
    relisted = core.list_pod_for_all_namespaces()
    assert [p.metadata.name for p in relisted.items] == ["a", "b"]
    thread = later(0.2, lambda: emu.add(ke.make_pod("c")))
    events = [e["object"].metadata.name for e in watch.Watch().stream(
        core.list_pod_for_all_namespaces, resource_version=relisted.metadata.resource_version,
        timeout_seconds=1)]
    thread.join()
    assert events == ["c"]


def test_closed_watches_resume_from_the_last_resource_version(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    emu = k8s_emulator
    core = client.CoreV1Api(k8s_api)
    rv = str(emu.resource_version)

    def close_then_add() -> None:
        emu.add(ke.make_pod("one"))
        time.sleep(0.2)
        emu.close_watches()
        time.sleep(0.2)
        emu.add(ke.make_pod("two"))

    thread = later(0.1, close_then_add)
    stream = watch.Watch()
    names = []
    for event in stream.stream(core.list_pod_for_all_namespaces, resource_version=rv):
        names.append(event["object"].metadata.name)
        if len(names) == 2:
            stream.stop()
            break
    thread.join()
    assert names == ["one", "two"]
    watches = [r for r in emu.requests if "watch=true" in r]
    assert len(watches) == 2
    assert f"resourceVersion={rv}" in watches[0]
    assert f"resourceVersion={rv}" not in watches[1]


# --- writes and errors ---------------------------------------------------------------------------


def test_create_patch_and_replace_with_status_errors(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    core = client.CoreV1Api(k8s_api)
    created = core.create_namespaced_pod("default", ke.make_pod("web"))
    assert created.metadata.uid and created.status.phase == "Pending"
    with pytest.raises(ApiException) as exists:
        core.create_namespaced_pod("default", ke.make_pod("web"))
    assert exists.value.status == 409
    assert status_of(exists.value)["reason"] == "AlreadyExists"
    with pytest.raises(ApiException) as missing:
        core.read_namespaced_pod("nope", "default")
    assert missing.value.status == 404
    assert status_of(missing.value)["message"] == 'pods "nope" not found'
    with pytest.raises(ApiException) as no_ns:
        core.create_namespaced_pod("absent", ke.make_pod("x", "absent"))
    assert no_ns.value.status == 404

    # strategic merge: conditions merge by type, containers by name
    patched = core.patch_namespaced_pod_status("web", "default", {"status": {"conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": UNSCHED}]}})
    assert patched.status.conditions[0].reason == "Unschedulable"
    patched = core.patch_namespaced_pod("web", "default", {"metadata": {"labels": {"x": "1"}},
                                                           "spec": {"containers": [
                                                               {"name": "main",
                                                                "image": "new:2"}]}})
    assert patched.spec.containers[0].image == "new:2"
    assert patched.spec.containers[0].resources.requests == {"cpu": "1", "memory": "1Gi"}
    # JSON patch
    patched = core.patch_namespaced_pod("web", "default", [
        {"op": "add", "path": "/metadata/labels/y", "value": "2"},
        {"op": "remove", "path": "/metadata/labels/x"}])
    assert patched.metadata.labels == {"y": "2"}
    # replace with a stale resourceVersion: 409 Conflict
    stale = created.to_dict(serialize=True)
    with pytest.raises(ApiException) as conflict:
        core.replace_namespaced_pod("web", "default", stale)
    assert conflict.value.status == 409
    assert status_of(conflict.value)["reason"] == "Conflict"
    fresh = core.read_namespaced_pod("web", "default").to_dict(serialize=True)
    fresh["metadata"]["labels"] = {"z": "3"}
    assert core.replace_namespaced_pod("web", "default", fresh).metadata.labels == {"z": "3"}


def test_cordon_by_patch_and_eviction(k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    k8s_emulator.add(ke.make_node("n1"))
    k8s_emulator.add(ke.make_pod("p", node_name="n1", phase="Running"))
    core = client.CoreV1Api(k8s_api)
    assert core.patch_node("n1", {"spec": {"unschedulable": True}}).spec.unschedulable is True
    assert [n.metadata.name for n in core.list_node(
        field_selector="spec.unschedulable=true").items] == ["n1"]
    core.create_namespaced_pod_eviction("p", "default", {
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": "p", "namespace": "default"}})
    # Terminating for its grace period (tests/adapters/test_k8s_emulator_graceful.py)
    [pod] = core.list_namespaced_pod("default").items
    assert pod.metadata.deletion_timestamp is not None


def test_delete_propagation_follows_owner_references(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    emu = k8s_emulator
    seed_orders(emu, pods=2)
    job = emu.add(ke.make_job("train", "ml"))
    emu.add_many(ke.pods_for(job, 1))
    apps, core = client.AppsV1Api(k8s_api), client.CoreV1Api(k8s_api)
    batch = client.BatchV1Api(k8s_api)

    apps.delete_namespaced_deployment("orders", "ml", body={"propagationPolicy": "Orphan"})
    orphan = apps.read_namespaced_replica_set("orders-5d8f7c9b4", "ml")
    assert orphan.metadata.owner_references is None
    apps.delete_namespaced_replica_set("orders-5d8f7c9b4", "ml")  # Background by default
    assert [p.metadata.name for p in core.list_namespaced_pod("ml").items] == ["train-00000"]
    batch.delete_namespaced_job("train", "ml")  # batch/v1 defaults to Orphan
    assert [p.metadata.name for p in core.list_namespaced_pod("ml").items] == ["train-00000"]


def test_inference_services_through_custom_objects_api(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    custom = client.CustomObjectsApi(k8s_api)
    args = ("serving.kserve.io", "v1beta1", "ml", "inferenceservices")
    k8s_emulator.add(ke.make_namespace("ml"))
    created = custom.create_namespaced_custom_object(*args, ke.make_inference_service(
        "llm", "ml", gpus=2, managed=True))
    k8s_emulator.add(ke.make_predictor_deployment(created))
    got = custom.get_namespaced_custom_object(*args, "llm")
    limits = got["spec"]["predictor"]["model"]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "2"}
    patched = custom.patch_namespaced_custom_object_status(*args, "llm", {"status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "PredictorNotReady"}]}})
    assert patched["status"]["conditions"][0]["reason"] == "PredictorNotReady"
    listed = custom.list_cluster_custom_object("serving.kserve.io", "v1beta1",
                                               "inferenceservices")
    assert [i["metadata"]["name"] for i in listed["items"]] == ["llm"]
    with pytest.raises(ApiException) as missing:
        custom.get_namespaced_custom_object(*args, "nope")
    assert missing.value.status == 404
    custom.delete_namespaced_custom_object(*args, "llm")
    assert client.AppsV1Api(k8s_api).list_namespaced_deployment("ml").items == []


def test_injected_faults_answer_the_next_requests_then_stop(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    core = client.CoreV1Api(k8s_api)
    k8s_emulator.fail_next(1, 503, path_contains="/nodes")
    k8s_emulator.fail_next(1, 500)
    with pytest.raises(ApiException) as unavailable:
        core.list_node()
    assert unavailable.value.status == 503
    assert status_of(unavailable.value)["reason"] == "ServiceUnavailable"
    with pytest.raises(ApiException) as internal:
        core.list_namespace()
    assert internal.value.status == 500
    assert core.list_node().items == []


def test_a_429_with_retry_after_is_retried_by_the_client_for_reads(
    k8s_emulator: K8sEmulator, k8s_api: Any
) -> None:
    core = client.CoreV1Api(k8s_api)
    k8s_emulator.fail_next(1, 429, retry_after=0, path_contains="/nodes")
    assert core.list_node().items == []
    assert list(k8s_emulator.requests)[-2:] == ["GET /api/v1/nodes", "GET /api/v1/nodes"]


# --- as a process, for `scoctl sim` ---------------------------------------------------------------


def test_the_emulator_runs_as_a_process_driven_through_the_control_api(tmp_path: Path) -> None:
    ready = tmp_path / "ready.json"
    proc = subprocess.Popen([sys.executable, "-m", "scoctl.sim.k8s_emulator", "--port", "0",
                             "--ready-file", str(ready)], stdout=subprocess.DEVNULL,
                            env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    try:
        deadline = time.monotonic() + 20
        while not ready.exists():
            assert proc.poll() is None, "the emulator exited early"
            assert time.monotonic() < deadline, "the emulator did not get ready"
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        assert info["pid"] == proc.pid
        # HTTPS by default, with the CA of this process in the ready file
        assert info["url"].startswith("https://127.0.0.1:")
        tls = ssl.create_default_context(cadata=info["ca"])

        def control(op: str, body: dict[str, Any] | None = None) -> Any:
            request = urllib.request.Request(
                f"{info['url']}/_sim/{op}", data=json.dumps(body or {}).encode(),
                headers={"Content-Type": "application/json"}, method="POST")
            with urllib.request.urlopen(request, timeout=10, context=tls) as resp:
                return json.loads(resp.read())

        control("apply", {"objects": [ke.make_node("n1", gpus=4),
                                      ke.make_pod("p", "ml", unschedulable=UNSCHED)]})
        control("node-ready", {"name": "n1", "ready": False})
        (tmp_path / "kubeconfig").write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "sim",
            "clusters": [{"name": "sim", "cluster": {
                "server": info["url"],
                "certificate-authority-data": base64.b64encode(info["ca"].encode()).decode()}}],
            "users": [{"name": "sim", "user": {"token": ke.ADMIN_TOKEN}}],
            "contexts": [{"name": "sim", "context": {"cluster": "sim", "user": "sim"}}]}))
        from kubernetes import config

        configuration = client.Configuration()
        config.load_kube_config(config_file=str(tmp_path / "kubeconfig"),
                                client_configuration=configuration)
        with client.ApiClient(configuration) as api:
            core = client.CoreV1Api(api)
            assert core.read_node("n1").status.conditions[0].status == "False"
            assert [p.metadata.name for p in core.list_namespaced_pod("ml").items] == ["p"]
        assert control("faults", {"count": 1, "status": 503}) == {"ok": True}
    finally:
        proc.terminate()
        assert proc.wait(timeout=10) == 0


def test_a_control_batch_runs_each_operation_and_reports_each_refusal(
        k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    """Not the Kubernetes API but the simulator's control API (module docstring): ``POST
    /_sim/batch`` runs its operations in order as their own ``/_sim/<op>`` calls would; a
    refused one (a pod deleted since the agent listed it: 404) is reported and the rest still
    run, unless ``stop_on_error``, which runs none after it (one call per binding, as before);
    the agent's `SimApi.batch` sends them `chunk` to a request; ``/_sim/list`` answers what
    `K8sEmulator.objects` holds. The real client reads what it did."""
    from scoctl.sim.agent import SimApi

    k8s_emulator.add(ke.make_node("n1"))
    for name in ("a", "b", "c", "d"):
        k8s_emulator.add(ke.make_pod(name, "ml", unschedulable=UNSCHED))
    api = SimApi(k8s_emulator.url, "http://127.0.0.1:9/v2.1", k8s_ca=k8s_emulator.client_context())
    core = client.CoreV1Api(k8s_api)

    def bind(name: str) -> dict[str, Any]:
        return {"op": "bind-pod", "namespace": "ml", "name": name, "node": "n1"}

    try:
        results = api.batch([bind("a"), bind("gone"), bind("b")])
        assert [r["ok"] for r in results] == [True, False, True]
        assert results[1]["code"] == 404 and '"gone" not found' in results[1]["message"]
        assert results[0]["result"]["name"] == "a"
        stopped = api.batch([bind("gone"), bind("c")], stop_on_error=True)
        assert [r["ok"] for r in stopped] == [False]
        chunked = api.batch([bind("gone"), bind("d")], stop_on_error=True, chunk=1)
        assert [r["ok"] for r in chunked] == [False]
        # /_sim/list serves the stored objects' cached texts: what `objects` copies
        assert api.objects("Pod") == k8s_emulator.objects("Pod")
        [listed] = api.batch([{"op": "list", "kind": "Node"}])
        assert listed["result"]["items"] == k8s_emulator.objects("Node")
    finally:
        api.close()
    placed = {p.metadata.name: (p.spec.node_name, p.status.phase)
              for p in core.list_namespaced_pod("ml").items}
    assert placed == {"a": ("n1", "Running"), "b": ("n1", "Running"), "c": (None, "Pending"),
                      "d": (None, "Pending")}


def test_the_control_api_clears_the_request_log(k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    """``POST /_sim/clear-requests`` empties the log ``GET /_sim/requests`` reads (a bench
    counts the requests of a span of time against an emulator in another process)."""
    client.CoreV1Api(k8s_api).list_node()

    def control(op: str, method: str = "POST") -> Any:
        request = urllib.request.Request(f"{k8s_emulator.url}/_sim/{op}", method=method,
                                         data=b"{}" if method == "POST" else None,
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10,
                                    context=k8s_emulator.client_context()) as resp:
            return json.loads(resp.read())

    assert "GET /api/v1/nodes" in control("requests", "GET")["requests"]
    assert control("clear-requests") == {"ok": True}
    assert control("requests", "GET")["requests"] == []
