"""scheduler-plugins PodGroups (scheduling.x-k8s.io/v1alpha1, design: Gangs) in the emulator,
through the real kubernetes client: served as the apiextensions-apiserver serves a custom
resource — only while the CRD (scheduler-plugins ``manifests/coscheduling/crd.yaml``) is
installed, with discovery, list, get, create, watch and delete, and the CRD schema's
integers."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.exceptions import ApiException

from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator

pytestmark = pytest.mark.k8s

GROUP, VERSION, PLURAL = "scheduling.x-k8s.io", "v1alpha1", "podgroups"


def get(emu: K8sEmulator, path: str) -> tuple[int, Any]:
    request = urllib.request.Request(f"{emu.url}{path}",
                                     headers={"Authorization": f"Bearer {ke.ADMIN_TOKEN}"})
    try:
        with urllib.request.urlopen(request, timeout=10, context=emu.client_context()) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_the_podgroup_api_is_not_served_until_its_crd_is_installed(
        k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    """customresource_handler.go `crdHandler.ServeHTTP`: a resource request for which no CRD
    ``<resource>.<group>`` exists goes to the delegate, the apiserver's not-found handler (404),
    and the group is in no discovery document; once the CRD is established its group, version
    and resources (the main one and ``status``, the CRD's only subresource) are discovered."""
    custom = client.CustomObjectsApi(k8s_api)
    for call in (lambda: custom.list_cluster_custom_object(GROUP, VERSION, PLURAL),
                 lambda: custom.list_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL),
                 lambda: custom.get_namespaced_custom_object(GROUP, VERSION, "ml", PLURAL, "t")):
        with pytest.raises(ApiException) as missing:
            call()
        assert missing.value.status == 404
    groups = {g.name for g in client.ApisApi(k8s_api).get_api_versions().groups}
    assert GROUP not in groups
    assert get(k8s_emulator, f"/apis/{GROUP}")[0] == 404
    assert get(k8s_emulator, f"/apis/{GROUP}/{VERSION}")[0] == 404
    with pytest.raises(KeyError, match="podgroups.scheduling.x-k8s.io is not installed"):
        k8s_emulator.add(ke.make_pod_group("train", "ml", min_member=4))

    k8s_emulator.install_crd(ke.PODGROUP_CRD)
    groups = {g.name for g in client.ApisApi(k8s_api).get_api_versions().groups}
    assert GROUP in groups
    code, group = get(k8s_emulator, f"/apis/{GROUP}")
    assert (code, group["preferredVersion"]) == (200, {"groupVersion": f"{GROUP}/{VERSION}",
                                                       "version": VERSION})
    code, listing = get(k8s_emulator, f"/apis/{GROUP}/{VERSION}")
    assert code == 200
    assert {(r["name"], r["namespaced"], r["kind"]) for r in listing["resources"]} == {
        ("podgroups", True, "PodGroup"), ("podgroups/status", True, "PodGroup")}
    assert custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)["items"] == []


def test_podgroups_are_created_got_listed_watched_and_deleted_as_custom_objects(
        k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    k8s_emulator.install_crd(ke.PODGROUP_CRD)
    k8s_emulator.add(ke.make_namespace("ml"))
    custom = client.CustomObjectsApi(k8s_api)
    args = (GROUP, VERSION, "ml", PLURAL)
    created = custom.create_namespaced_custom_object(*args, ke.make_pod_group(
        "train", "ml", min_member=4))
    assert created["spec"] == {"minMember": 4} and created["metadata"]["uid"]
    assert custom.get_namespaced_custom_object(*args, "train")["spec"]["minMember"] == 4
    k8s_emulator.add(ke.make_pod_group("eval", "default"))
    listed = custom.list_cluster_custom_object(GROUP, VERSION, PLURAL)
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in listed["items"]] == [
        ("default", "eval"), ("ml", "train")]
    k8s_emulator.update("PodGroup", "ml", "train", {"spec": {"minMember": 5}})
    # a watch from the list's version replays what happened since, in the namespace watched
    events = [(e["type"], e["object"]["metadata"]["name"], e["object"]["spec"])
              for e in watch.Watch().stream(custom.list_namespaced_custom_object, *args,
                                            timeout_seconds=1,
                                            resource_version=listed["metadata"][
                                                "resourceVersion"])]
    assert events == [("MODIFIED", "train", {"minMember": 5})]
    # a custom resource's delete answers the object (the CRD's registry returns it)
    deleted = custom.delete_namespaced_custom_object(*args, "train")
    assert (deleted["kind"], deleted["spec"]) == ("PodGroup", {"minMember": 5})
    assert custom.list_namespaced_custom_object(*args)["items"] == []


def test_a_podgroup_against_its_crds_schema_is_a_422(
        k8s_emulator: K8sEmulator, k8s_api: Any) -> None:
    """The CRD's structural schema: ``spec.minMember`` is ``integer`` (``format: int32``); the
    apiextensions-apiserver's schema validation refuses anything else with 422 Invalid."""
    k8s_emulator.install_crd(ke.PODGROUP_CRD)
    custom = client.CustomObjectsApi(k8s_api)
    body = ke.make_pod_group("train", "default")
    body["spec"] = {"minMember": "four"}
    with pytest.raises(ApiException) as invalid:
        custom.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)
    status = json.loads(invalid.value.body)
    assert (invalid.value.status, status["reason"]) == (422, "Invalid")
    assert ('spec.minMember: Invalid value: "string": spec.minMember in body must be of type '
            'integer: "string"') in status["message"]


def test_scoctl_sim_installs_a_crd_through_the_control_api(k8s_emulator: K8sEmulator) -> None:
    """``POST /_sim/install-crd`` (the simulator's own API, for an emulator in another
    process): a known CRD is installed, an unknown one is a 400 naming the ones it serves."""

    def install(name: str) -> tuple[int, Any]:
        request = urllib.request.Request(
            f"{k8s_emulator.url}/_sim/install-crd", data=json.dumps({"name": name}).encode(),
            method="POST", headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10,
                                        context=k8s_emulator.client_context()) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    assert install("widgets.example.com")[0] == 400
    assert get(k8s_emulator, f"/apis/{GROUP}/{VERSION}")[0] == 404
    assert install(ke.PODGROUP_CRD) == (200, {"ok": True})
    assert get(k8s_emulator, f"/apis/{GROUP}/{VERSION}/podgroups")[0] == 200
