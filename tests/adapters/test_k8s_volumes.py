"""The zones of the volumes pending pods mount (design: Constraints), read through the real
kubernetes
client from the emulator: PersistentVolumeClaims (``spec.volumeName``) and PersistentVolumes.

A PersistentVolume's zones are read as kube-scheduler reads them: the required node affinity
(`k8s.io/component-helpers/scheduling/corev1/nodeaffinity`: terms ORed, so the union over the
terms, and a term that does not name the zone allows any) and, for a volume without one, the
zone label the VolumeZone filter checks (`pkg/scheduler/framework/plugins/volumezone/
volume_zone.go`: ``topology.kubernetes.io/zone`` or the beta key, several zones joined by
``__`` as `volumehelpers.LabelZonesToSet` splits them). Only a volume of exactly one zone pins
its pods to a zone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.config.schema import load_config
from scoctl.core.intake.k8s import volume_zones
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator
from scoctl.stages.watch import read_k8s
from tests.builders import nova_config

pytestmark = pytest.mark.k8s

ZONE = "topology.kubernetes.io/zone"


def pv(name: str, *, terms: list[list[dict[str, Any]]] | None = None,
       labels: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                            "csi": {"driver": "cinder.csi.openstack.org", "volumeHandle": name}}
    if terms is not None:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [
            {"matchExpressions": term} for term in terms]}}
    return {"apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def pvc(name: str, volume: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"accessModes": ["ReadWriteOnce"],
                            "resources": {"requests": {"storage": "10Gi"}}}
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": "shop"}, "spec": spec}


def zone_in(*zones: str) -> dict[str, Any]:
    return {"key": ZONE, "operator": "In", "values": list(zones)}


def seed(emu: K8sEmulator) -> None:
    emu.add(ke.make_namespace("shop"))
    emu.add(pv("pv-affinity", terms=[[zone_in("az2")]]))
    emu.add(pv("pv-label", labels={ZONE: "az3"}))
    emu.add(pv("pv-beta", labels={"failure-domain.beta.kubernetes.io/zone": "az1"}))
    emu.add(pv("pv-several", labels={ZONE: "az1__az2"}))
    emu.add(pv("pv-two-terms", terms=[[zone_in("az1")], [zone_in("az3")]]))
    emu.add(pv("pv-any", terms=[[zone_in("az1")], [{"key": "kubernetes.io/hostname",
                                                     "operator": "In", "values": ["n1"]}]]))
    emu.add(pv("pv-anded", terms=[[zone_in("az1", "az2"), zone_in("az2", "az3")]]))
    for claim, volume in (("a", "pv-affinity"), ("b", "pv-label"), ("c", "pv-beta"),
                          ("d", "pv-several"), ("e", "pv-two-terms"), ("f", "pv-any"),
                          ("g", "pv-anded"), ("h", None), ("i", "pv-gone")):
        emu.add(pvc(f"data-{claim}", volume))


def test_volumes_and_claims_are_read_with_their_zones(k8s_emulator: K8sEmulator,
                                                      k8s_cluster: KubernetesCluster) -> None:
    seed(k8s_emulator)
    zones = {v.name: v.zones for v in k8s_cluster.volumes()}
    assert zones == {"pv-affinity": ("az2",), "pv-label": ("az3",), "pv-beta": ("az1",),
                     "pv-several": ("az1", "az2"), "pv-two-terms": ("az1", "az3"),
                     "pv-any": (), "pv-anded": ("az2",)}
    claims = {c.name: c.volume for c in k8s_cluster.volume_claims("shop")}
    assert claims["data-a"] == "pv-affinity" and claims["data-h"] == ""
    assert volume_zones(k8s_cluster.volume_claims(), k8s_cluster.volumes()) == {
        ("shop", "data-a"): "az2", ("shop", "data-b"): "az3", ("shop", "data-c"): "az1",
        ("shop", "data-g"): "az2"}


def test_intake_reads_the_zones_only_when_a_pending_pod_mounts_a_claim(
        tmp_path: Path, k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    seed(k8s_emulator)
    config = load_config(nova_config(tmp_path, "unused"))
    k8s_emulator.add(ke.make_pod("web-0", "shop", unschedulable="0/1 nodes"))
    assert read_k8s(k8s_cluster, config).volume_zones == {}
    assert not [a for a in k8s_emulator.authorized if a[3].startswith("persistentvolume")]
    mounting = ke.make_pod("db-0", "shop", unschedulable="0/1 nodes")
    mounting["spec"]["volumes"] = [{"name": "data",
                                    "persistentVolumeClaim": {"claimName": "data-a"}}]
    k8s_emulator.add(mounting)
    snap = read_k8s(k8s_cluster, config)
    assert snap.volume_zones == {("shop", "data-a"): "az2", ("shop", "data-b"): "az3",
                                 ("shop", "data-c"): "az1", ("shop", "data-g"): "az2"}
    (db,) = [p for p in snap.pods if p.name == "db-0"]
    assert db.placement is not None and db.placement.volume_claims == ("data-a",)
