"""scoctl reads scheduler-plugins PodGroups (design: Gangs) through the real kubernetes client
from the emulator: each one's ``spec.minMember``, a 404 (the CRD not installed: the API not
served) being no PodGroup, and only while a pod of a pod group is seen."""

from __future__ import annotations

from pathlib import Path

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.config.schema import load_config
from scoctl.core.model.kubernetes import PodGroupInfo
from scoctl.errors import TemporaryError
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator
from scoctl.stages.watch import read_k8s
from tests.builders import nova_config

pytestmark = pytest.mark.k8s

GROUP, VERSION = "scheduling.x-k8s.io", "v1alpha1"
POD_GROUP = "scheduling.x-k8s.io/pod-group"


def test_scoctl_reads_podgroups_and_nothing_where_the_api_is_not_served(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    assert k8s_cluster.pod_groups() == []  # 404: not served, no error
    assert k8s_cluster.pod_groups("ml") == []
    k8s_emulator.install_crd(ke.PODGROUP_CRD)
    k8s_emulator.add(ke.make_pod_group("train", "ml", min_member=4))
    k8s_emulator.add(ke.make_pod_group("eval", "default"))
    assert k8s_cluster.pod_groups("ml") == [PodGroupInfo("train", "ml", 4)]
    assert k8s_cluster.pod_groups() == [PodGroupInfo("eval", "default", None),
                                        PodGroupInfo("train", "ml", 4)]
    # any other failure is the API's, mapped as every read's (a pass retries it)
    k8s_emulator.fail_next(1, 503, path_contains="/podgroups")
    with pytest.raises(TemporaryError, match="list podgroups: 503"):
        k8s_cluster.pod_groups("ml")


def test_podgroups_are_read_only_while_a_pod_of_a_pod_group_is_seen(
        tmp_path: Path, k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster) -> None:
    k8s_emulator.install_crd(ke.PODGROUP_CRD)
    k8s_emulator.add(ke.make_pod_group("train", "ml", min_member=4))
    k8s_emulator.add(ke.make_pod_group("other", "shop", min_member=9))
    config = load_config(nova_config(tmp_path, "unused"))
    k8s_emulator.add(ke.make_pod("web-0", "default", unschedulable="0/1 nodes",
                                 labels={"sco/workload": "web"}))
    assert read_k8s(k8s_cluster, config).pod_groups == {}
    assert not any("podgroups" in r for r in k8s_emulator.requests)  # not even asked
    k8s_emulator.add(ke.make_pod("train-0", "ml", unschedulable="0/1 nodes",
                                 labels={"sco/workload": "train", POD_GROUP: "train"}))
    assert read_k8s(k8s_cluster, config).pod_groups == {("ml", "train"): 4}
    assert [r for r in k8s_emulator.requests if "podgroups" in r] == [
        f"GET /apis/{GROUP}/{VERSION}/namespaces/ml/podgroups"]
