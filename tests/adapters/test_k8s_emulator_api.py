"""The emulator's API machinery, each behaviour next to the upstream rule it follows: list pages
from one snapshot, a restart's 410 and monotonic versions (and scoctl's re-list through it),
strategic merge patch per field's patch strategy, ``/status`` apart from the main resource,
handler bugs as 500 and malformed input as 400."""

from __future__ import annotations

import json
import queue
import socket
import threading
import time
import urllib.request
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.core.model import PodEvent
from scoctl.services.informer import LIVE_SELECTOR, pump
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator, strategic_merge_patch
from tests.fixtures.k8s import with_scoctl_role


def status_of(exc: ApiException) -> dict[str, Any]:
    return dict(json.loads(exc.body))


# --- lists and watches ---------------------------------------------------------------------------


def test_every_page_of_a_list_comes_from_the_snapshot_of_its_first_page(
        k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    """staging/src/k8s.io/apiserver/pkg/storage/etcd3/store.go `GetList`: a continuation reads
    at the revision its token carries (continue.go `EncodeContinue`/`DecodeContinue`), so writes
    between pages are not seen and every page reports the list's resourceVersion."""
    core = client.CoreV1Api(k8s_api)
    for i in range(5):
        k8s_emulator.add(ke.make_pod(f"p{i}"))
    first = core.list_namespaced_pod("default", limit=2)
    k8s_emulator.delete("Pod", "default", "p3")
    k8s_emulator.add(ke.make_pod("p9"))
    k8s_emulator.update("Pod", "default", "p4", {"metadata": {"labels": {"changed": "yes"}}})
    second = core.list_namespaced_pod("default", limit=2, _continue=first.metadata._continue)
    third = core.list_namespaced_pod("default", limit=2, _continue=second.metadata._continue)
    names = [p.metadata.name for page in (first, second, third) for p in page.items]
    assert names == ["p0", "p1", "p2", "p3", "p4"]
    assert "changed" not in (third.items[-1].metadata.labels or {})  # p4 as at the first page
    versions = {page.metadata.resource_version for page in (first, second, third)}
    assert versions == {first.metadata.resource_version}
    assert not third.metadata._continue
    # a new list sees the writes, at a later version
    fresh = core.list_namespaced_pod("default")
    assert [p.metadata.name for p in fresh.items] == ["p0", "p1", "p2", "p4", "p9"]
    assert int(fresh.metadata.resource_version) > int(first.metadata.resource_version)


def test_a_listed_object_is_written_as_stored_after_every_change(
        k8s_emulator: K8sEmulator) -> None:
    """A list reuses each item's text while the item is the stored object it was made from
    (`K8sEmulator._list_json`): the bytes are those of the whole page encoded at once, and a
    replaced, patched or deleted object is listed as it is now."""
    pods = ke.resource_type("Pod")
    for i in range(3):
        k8s_emulator.add(ke.make_pod(f"p{i}"))

    def listed() -> bytes:
        with k8s_emulator._cond:
            page = k8s_emulator._list(pods, ke._Filter("default"), None, None)
        data = k8s_emulator._list_json(pods, page)
        assert data == json.dumps(page, separators=(",", ":")).encode()
        return data

    assert listed() == listed()
    k8s_emulator.update("Pod", "default", "p1", {"metadata": {"labels": {"changed": "yes"}}})
    k8s_emulator.delete("Pod", "default", "p2")
    items = json.loads(listed())["items"]
    assert [p["metadata"]["name"] for p in items] == ["p0", "p1"]
    assert items[1]["metadata"]["labels"]["changed"] == "yes"
    k8s_emulator.add(ke.make_pod("p2"))  # the same name again: a new object, a new text
    assert [p["metadata"]["name"] for p in json.loads(listed())["items"]] == ["p0", "p1", "p2"]


def test_a_continue_token_of_a_compacted_revision_gets_410_expired(
        k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    """etcd3/store.go `GetList`: reading a continuation at a compacted revision answers
    `errors.NewResourceExpired` (410, reason Expired) — the client must start a new list."""
    core = client.CoreV1Api(k8s_api)
    for i in range(3):
        k8s_emulator.add(ke.make_pod(f"p{i}"))
    first = core.list_namespaced_pod("default", limit=1)
    k8s_emulator.compact("Pod")
    with pytest.raises(ApiException) as expired:
        core.list_namespaced_pod("default", limit=1, _continue=first.metadata._continue)
    assert expired.value.status == 410 and status_of(expired.value)["reason"] == "Expired"


def kubeconfig_api(emu: K8sEmulator, tmp_path: Any) -> client.ApiClient:
    from kubernetes import config

    path = tmp_path / "admin-kubeconfig"
    path.write_text(emu.kubeconfig(user=ke.ADMIN), encoding="utf-8")
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=configuration)
    return client.ApiClient(configuration)


def test_a_restarted_emulator_goes_on_from_a_later_version_and_old_watches_get_410(
        tmp_path: Any) -> None:
    """staging/src/k8s.io/apiserver/pkg/storage/cacher/watch_cache.go: a restarted apiserver's
    watch cache starts at the current revision, and a watch from an older one gets an ERROR
    event with a 410 ``Expired`` Status (``too old resource version``); etcd's revision never
    goes back. Here a new emulator process on the same port (as `scoctl sim up` restarts one)
    starts from a later version than any the old one handed out."""
    old = K8sEmulator().start()
    port = old.port
    old.add_many(ke.make_pod(f"p{i}") for i in range(3))
    with kubeconfig_api(old, tmp_path) as api:
        seen = client.CoreV1Api(api).list_pod_for_all_namespaces().metadata.resource_version
    old.stop()
    new = K8sEmulator(port=port).start()
    try:
        with kubeconfig_api(new, tmp_path) as api:
            core = client.CoreV1Api(api)
            relisted = core.list_pod_for_all_namespaces()
            assert int(relisted.metadata.resource_version) > int(seen)
            with pytest.raises(ApiException) as gone:
                list(watch.Watch().stream(core.list_pod_for_all_namespaces,
                                          resource_version=seen, timeout_seconds=2))
            assert gone.value.status == 410
    finally:
        new.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_emulator_started_again_expires_the_watches_from_before(tmp_path: Any) -> None:
    """cacher.go: the watch cache of a restarted apiserver holds no history, so a watch from a
    version before the restart gets 410 and the client re-lists; versions go on upwards."""
    emu = K8sEmulator(port=free_port()).start()
    try:
        with kubeconfig_api(emu, tmp_path) as api:
            core = client.CoreV1Api(api)
            emu.add(ke.make_pod("a"))
            before = core.list_namespaced_pod("default").metadata.resource_version
            emu.stop()
            emu.start()
            with pytest.raises(ApiException) as gone:
                list(watch.Watch().stream(core.list_namespaced_pod, "default",
                                          resource_version=before, timeout_seconds=2))
            assert gone.value.status == 410
            after = core.list_namespaced_pod("default")
            assert int(after.metadata.resource_version) > int(before)
            assert [p.metadata.name for p in after.items] == ["a"]  # same process: kept
    finally:
        emu.stop()


def test_scoctls_informer_relists_after_an_emulator_restart(tmp_path: Any) -> None:
    """scoctl's watch pump (`services.informer.pump` over `KubernetesCluster.watch_pods`)
    through a restart: the resumed watch gets 410 (watch_cache.go), the adapter re-lists and the
    RESYNC event carries the new process's pods at a version above every one seen before."""
    emu = with_scoctl_role(K8sEmulator()).start()
    port = emu.port
    emu.add_many(ke.make_pod(f"old-{i}") for i in range(2))
    path = tmp_path / "kubeconfig"
    path.write_text(emu.kubeconfig(), encoding="utf-8")
    cluster = KubernetesCluster(str(path), "scoctl-sim")
    events: queue.Queue[Any] = queue.Queue()
    stop = threading.Event()
    thread = threading.Thread(target=pump, args=(
        lambda rv, t: cluster.watch_pods(rv, t, field_selector=LIVE_SELECTOR), events, stop,
        3.0), daemon=True)
    thread.start()
    try:
        first = events.get(timeout=10)
        assert isinstance(first, PodEvent) and first.type == "RESYNC"
        assert sorted(p.name for p in first.pods) == ["old-0", "old-1"]
        emu.add(ke.make_pod("old-2"))
        added = events.get(timeout=10)
        assert (added.type, added.pod.name) == ("ADDED", "old-2")
        emu.stop()
        emu = with_scoctl_role(K8sEmulator(port=port)).start()  # a new process: new objects
        emu.add_many(ke.make_pod(f"new-{i}") for i in range(3))
        deadline = time.monotonic() + 20
        resync = None
        while time.monotonic() < deadline:
            item = events.get(timeout=max(0.1, deadline - time.monotonic()))
            if isinstance(item, PodEvent) and item.type == "RESYNC":
                resync = item
                break
        assert resync is not None, "no re-list after the restart"
        assert sorted(p.name for p in resync.pods) == ["new-0", "new-1", "new-2"]
        assert int(resync.resource_version) > int(added.resource_version)
    finally:
        stop.set()
        thread.join(timeout=10)
        cluster.close()
        emu.stop()


# --- strategic merge patch -----------------------------------------------------------------------


def test_strategic_merge_patch_follows_each_fields_patch_strategy() -> None:
    """k8s.io/api/core/v1/types.go struct tags, applied as apimachinery's
    strategicpatch.StrategicMergePatch does: `NodeSpec.Taints` and `PodSpec.Tolerations` have no
    patchStrategy (the list is replaced); `ObjectMeta.Finalizers` is ``merge`` (values added);
    containers merge by ``name``, conditions by ``type``, ownerReferences by ``uid``; the
    ``$patch: delete``/``replace`` and ``$deleteFromPrimitiveList`` directives."""
    node = {"metadata": {"finalizers": ["a"]},
            "spec": {"taints": [{"key": "x", "effect": "NoSchedule"},
                                {"key": "y", "effect": "NoExecute"}]}}
    out = strategic_merge_patch(node, {"metadata": {"finalizers": ["b", "a"]},
                                       "spec": {"taints": [{"key": "z", "effect": "NoSchedule"}]}})
    assert out["spec"]["taints"] == [{"key": "z", "effect": "NoSchedule"}]
    assert out["metadata"]["finalizers"] == ["a", "b"]
    out = strategic_merge_patch(out, {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a"]}})
    assert out["metadata"]["finalizers"] == ["b"]

    pod = {"metadata": {"ownerReferences": [{"uid": "1", "name": "rs"}]},
           "spec": {"tolerations": [{"key": "a"}, {"key": "b"}],
                    "containers": [{"name": "main", "image": "i:1"},
                                   {"name": "side", "image": "s:1"}]},
           "status": {"conditions": [{"type": "Ready", "status": "False"},
                                     {"type": "PodScheduled", "status": "True"}]}}
    out = strategic_merge_patch(pod, {
        "metadata": {"ownerReferences": [{"uid": "1", "controller": True},
                                         {"uid": "2", "name": "other"}]},
        "spec": {"tolerations": [{"key": "c"}],
                 "containers": [{"name": "side", "image": "s:2"},
                                {"name": "new", "image": "n:1"}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    assert out["spec"]["tolerations"] == [{"key": "c"}]
    assert out["spec"]["containers"] == [{"name": "main", "image": "i:1"},
                                         {"name": "side", "image": "s:2"},
                                         {"name": "new", "image": "n:1"}]
    assert out["status"]["conditions"] == [{"type": "Ready", "status": "True"},
                                           {"type": "PodScheduled", "status": "True"}]
    assert out["metadata"]["ownerReferences"] == [{"uid": "1", "name": "rs", "controller": True},
                                                  {"uid": "2", "name": "other"}]
    out = strategic_merge_patch(out, {"spec": {"containers": [
        {"name": "side", "$patch": "delete"}]}})
    assert [c["name"] for c in out["spec"]["containers"]] == ["main", "new"]
    out = strategic_merge_patch(out, {"spec": {"containers": [
        {"$patch": "replace"}, {"name": "only", "image": "o:1"}]}})
    assert out["spec"]["containers"] == [{"name": "only", "image": "o:1"}]
    out = strategic_merge_patch(out, {"status": {"$patch": "replace", "phase": "Running"}})
    assert out["status"] == {"phase": "Running"}
    with pytest.raises(ValueError):
        strategic_merge_patch(out, {"spec": {"containers": [{"image": "no-name"}]}})


def test_a_strategic_merge_patch_of_a_nodes_taints_replaces_them(
        k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    """core/v1 types.go `NodeSpec.Taints` (no patchStrategy) through the client's
    ``patch_node`` (application/strategic-merge-patch+json): the taints sent are the taints."""
    k8s_emulator.add(ke.make_node("n1", taints=[{"key": "a", "value": "1",
                                                 "effect": "NoSchedule"}]))
    core = client.CoreV1Api(k8s_api)
    patched = core.patch_node("n1", {"spec": {"taints": [{"key": "b", "value": "2",
                                                          "effect": "NoExecute"}]}})
    assert [(t.key, t.effect) for t in patched.spec.taints] == [("b", "NoExecute")]


# --- /status -------------------------------------------------------------------------------------


def test_the_main_resource_keeps_its_status_and_status_changes_only_status(
        k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    """pkg/registry/core/pod/strategy.go: `podStrategy.PrepareForUpdate` sets
    ``newPod.Status = oldPod.Status``; `podStatusStrategy.PrepareForUpdate` sets
    ``newPod.Spec = oldPod.Spec`` and `metav1.ResetObjectMetaForStatus` keeps labels,
    annotations, finalizers and ownerReferences. The same holds for every type with a status
    subresource (nodes: pkg/registry/core/node/strategy.go)."""
    core = client.CoreV1Api(k8s_api)
    k8s_emulator.add(ke.make_pod("web", labels={"app": "web"}))
    main = core.patch_namespaced_pod("web", "default", {
        "metadata": {"labels": {"tier": "a"}}, "status": {"phase": "Running"}})
    assert main.status.phase == "Pending" and main.metadata.labels == {"app": "web", "tier": "a"}
    status = core.patch_namespaced_pod_status("web", "default", {
        "metadata": {"labels": {"ignored": "yes"}}, "spec": {"nodeName": "n9"},
        "status": {"phase": "Running"}})
    assert status.status.phase == "Running"
    assert status.spec.node_name is None
    assert status.metadata.labels == {"app": "web", "tier": "a"}
    # a PUT of the whole object: the same split
    body = core.read_namespaced_pod("web", "default")
    body.status.phase = "Failed"
    body.metadata.labels = {"app": "web"}
    replaced = core.replace_namespaced_pod("web", "default", body)
    assert replaced.status.phase == "Running" and replaced.metadata.labels == {"app": "web"}

    k8s_emulator.add(ke.make_node("n1"))
    node = core.patch_node("n1", {"status": {"capacity": {"cpu": "99"}}})
    assert node.status.capacity["cpu"] == "16"
    node = core.patch_node_status("n1", {"status": {"capacity": {"cpu": "99"}},
                                         "spec": {"unschedulable": True}})
    assert node.status.capacity["cpu"] == "99" and not node.spec.unschedulable


def test_types_without_a_status_subresource_store_the_body_as_sent(
        k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    """An Event has no status subresource (pkg/registry/core/event/strategy.go has no
    status strategy): an update stores what was sent."""
    pod = k8s_emulator.add(ke.make_pod("web"))
    k8s_emulator.add(ke.make_event(pod, "FailedScheduling", "0/1 nodes are available"))
    core = client.CoreV1Api(k8s_api)
    name = core.list_namespaced_event("default").items[0].metadata.name
    patched = core.patch_namespaced_event(name, "default", {"message": "changed"})
    assert patched.message == "changed"


# --- errors --------------------------------------------------------------------------------------


class BrokenLists(K8sEmulator):
    """An emulator whose list handler has a bug."""

    def _list(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the list handler broke")


def test_a_handler_bug_is_a_500_internal_error_and_bad_input_a_400() -> None:
    """staging/src/k8s.io/apimachinery/pkg/api/errors/errors.go `NewInternalError` (500,
    reason InternalError, ``Internal error occurred: …``) for what fails inside the server;
    a malformed request (a bad ``limit``, a body that is not JSON) stays 400 BadRequest."""
    emu = BrokenLists().start()
    try:
        def call(path: str, method: str = "GET", data: bytes | None = None) -> tuple[int, Any]:
            request = urllib.request.Request(
                f"{emu.url}{path}", data=data, method=method,
                headers={"Authorization": f"Bearer {ke.ADMIN_TOKEN}",
                         "Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(request, timeout=10,
                                            context=emu.client_context()) as resp:
                    return resp.status, json.loads(resp.read())
            except urllib.error.HTTPError as err:
                return err.code, json.loads(err.read())

        code, body = call("/api/v1/pods")
        assert (code, body["reason"], body["code"]) == (500, "InternalError", 500)
        assert body["message"].startswith("Internal error occurred: ")
        code, body = call("/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=x")
        assert (code, body["reason"]) == (400, "BadRequest")
        code, body = call("/api/v1/namespaces/default/pods", "POST", b"{not json")
        assert (code, body["reason"]) == (400, "BadRequest")
        code, body = call("/api/v1/namespaces/default/pods", "POST",
                          json.dumps({"metadata": "x"}).encode())
        assert (code, body["reason"]) == (400, "BadRequest")
    finally:
        emu.stop()
