"""Gang intake through the stages (design: Gangs), on both state backends: pods of a pod group
in the Kubernetes emulator, read by the real client, become a claim that carries the gang
size (the pods' annotation, else their PodGroup's minMember where that API is served, else the
pods seen), and `plan` plans it whole in one correlation group."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.config.schema import Config, load_config
from scoctl.core.model import FinishedJob, SlurmJob, SlurmNode
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_emulator import K8sEmulator
from scoctl.stages.plan import run_plan
from scoctl.stages.watch import run_pass
from scoctl.state import Store
from tests.builders import BOOTSTRAP
from tests.stages.test_watch_k8s import BUSY

pytestmark = pytest.mark.k8s

GROUP = "scheduling.x-k8s.io/pod-group"
TOLERATE = {"key": "reclaimable", "operator": "Equal", "value": "true", "effect": "NoSchedule"}


@pytest.fixture
def config(tmp_path: Path, k8s_kubeconfig: Path) -> Config:
    path = tmp_path / "config.yaml"
    path.write_text(f"""
state: {tmp_path}/state.db
spool: {tmp_path}/spool
budget_dir: {tmp_path}/run
regions:
  - name: region-a
    launch: {{image: ubuntu-24.04, networks: [net-a]}}
flavors:
  - {{name: c4.xlarge, vcpus: 16, ram: 64Gi}}
pools:
  - {{name: small.a, region: region-a, az: az1, flavor: c4.xlarge, group: row-a,
     tier: reclaimable, depth: 4}}
  - {{name: big.b, region: region-a, az: az2, flavor: c4.xlarge, group: row-b,
     tier: reclaimable, depth: 40}}
contracts:
  T2: {{floor: 0.0}}
ranking: {{id: r-1, scores: {{small.a: 0.9, big.b: 0.5}}}}
workloads:
  - {{name: train, contract: T2, source: k8s, kind: deployment, namespace: ml}}
kubernetes: {{kubeconfig: {k8s_kubeconfig}, context: scoctl-sim}}
{BOOTSTRAP}""", encoding="utf-8")
    return load_config(path)


# the gang's pods, as its platform gives them: the workload's toleration and selector
# (exclusive isolation), and one pod per node (a hostname spread), so that a member is a pod
# and the gang's size is what these tests read (pods of a gang otherwise pack by requests)
ISOLATED = {"key": "sco/workload", "operator": "Equal", "value": "train",
            "effect": "NoSchedule"}
ONE_PER_NODE = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "train"}}}


def pod_group(emu: K8sEmulator, pods: int, size: str | None) -> None:
    dep = emu.add(ke.make_deployment(
        "train", "ml", replicas=pods, cpu="4", memory="16Gi", managed=True,
        pod_labels={GROUP: "train"}, tolerations=[TOLERATE, ISOLATED],
        node_selector={"sco/workload": "train"},
        topology_spread_constraints=[ONE_PER_NODE],
        pod_annotations={"sco/gang-size": size} if size is not None else None))
    emu.add_many(ke.pods_for(emu.add(ke.make_replicaset(dep)), pods, unschedulable=BUSY))


def test_a_pod_group_is_a_gang_claim_planned_whole_in_one_group(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        store: Store) -> None:
    pod_group(k8s_emulator, 6, "6")
    run_pass(config, store, store.clock, sources=["k8s"], cluster=k8s_cluster)
    claim = store.claim("train")
    assert claim is not None and (claim.pods, claim.gang, claim.version) == (6, 6, 1)
    assert [c.gang for c in store.claims()] == [6]
    assert store.gang_claims() == {"train": (6, 6)}

    plan = run_plan(config, store, store.clock).plans["train"]
    assert plan.feasible
    assert [(p.pool, p.units) for p in plan.pools] == [("big.b", 6)]  # row-a holds 4 only


def test_a_pod_group_without_a_size_annotation_is_a_gang_of_the_pods_seen(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        store: Store) -> None:
    pod_group(k8s_emulator, 3, None)
    run_pass(config, store, store.clock, sources=["k8s"], cluster=k8s_cluster)
    claim = store.claim("train")
    assert claim is not None and (claim.pods, claim.gang) == (3, 3)
    plan = run_plan(config, store, store.clock).plans["train"]
    assert [(p.pool, p.units) for p in plan.pools] == [("small.a", 3)]  # fits the best pool


def test_a_pod_group_is_a_gang_of_its_podgroups_min_member_where_that_api_is_served(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        store: Store) -> None:
    k8s_emulator.install_crd(ke.PODGROUP_CRD)
    k8s_emulator.add(ke.make_pod_group("train", "ml", min_member=4))
    pod_group(k8s_emulator, 2, None)  # 2 of its 4 members seen so far
    result = run_pass(config, store, store.clock, sources=["k8s"], cluster=k8s_cluster)
    assert result.sources["k8s"].error is None
    claim = store.claim("train")
    assert claim is not None and (claim.pods, claim.gang) == (2, 4)
    assert store.gang_claims() == {"train": (4, 2)}
    plan = run_plan(config, store, store.clock).plans["train"]
    assert [(p.pool, p.units) for p in plan.pools] == [("small.a", 4)]  # the whole gang


def test_where_the_podgroup_api_is_not_served_a_pod_group_is_the_pods_seen_without_error(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        store: Store) -> None:
    pod_group(k8s_emulator, 2, None)  # no PodGroup CRD in this cluster
    result = run_pass(config, store, store.clock, sources=["k8s"], cluster=k8s_cluster)
    assert any("/podgroups" in r for r in k8s_emulator.requests)  # asked, and answered 404
    assert result.sources["k8s"].error is None
    claim = store.claim("train")
    assert claim is not None and (claim.pods, claim.gang) == (2, 2)


def test_a_failing_podgroup_read_fails_the_kubernetes_source_of_the_pass_only(
        k8s_emulator: K8sEmulator, k8s_cluster: KubernetesCluster, config: Config,
        store: Store) -> None:
    k8s_emulator.install_crd(ke.PODGROUP_CRD)
    k8s_emulator.add(ke.make_pod_group("train", "ml", min_member=4))
    pod_group(k8s_emulator, 2, None)
    k8s_emulator.fail_next(1, 503, path_contains="/podgroups")
    failed = run_pass(config, store, store.clock, sources=["k8s"], cluster=k8s_cluster)
    assert "list podgroups: 503" in (failed.sources["k8s"].error or "")
    assert store.claim("train") is None  # no claim of a wrong size: the next pass reads again
    run_pass(config, store, store.clock, sources=["k8s"], cluster=k8s_cluster)
    claim = store.claim("train")
    assert claim is not None and claim.gang == 4


def test_a_committed_claims_file_gang_is_stored_and_kept_by_the_next_plan(
        config: Config, store: Store, tmp_path: Path) -> None:
    claims = tmp_path / "claims.yaml"
    claims.write_text("claims:\n  - {workload: train, contract: T2, requests: {cpu: 24},\n"
                      "     largest_pod: {cpu: 4}, pods: 6, gang: {size: 6}}\n",
                      encoding="utf-8")
    first = run_plan(config, store, store.clock, claims_path=claims).plans["train"]
    claim = store.claim("train")
    assert claim is not None and (claim.gang, claim.source) == (6, "file")
    assert [(p.pool, p.units) for p in first.pools] == [("big.b", 6)]
    again = run_plan(config, store, store.clock, full=True).plans["train"]  # from the state
    assert [(p.pool, p.units) for p in again.pools] == [("big.b", 6)]


class Squeue:
    """A recording fake of scoctl's `BatchScheduler` (the real-Slurm ``sbatch -N 4`` flow is
    not run here): one CLOUD partition and the jobs it is given."""

    def __init__(self, *jobs: SlurmJob) -> None:
        self.listed = list(jobs)

    def nodes(self, partition: str | None = None) -> list[SlurmNode]:
        return [SlurmNode(f"cloud-{i}", 16, 64000, partitions=("cloud",),
                          flags=frozenset({"CLOUD", "POWERED_DOWN"})) for i in range(1, 9)]

    def default_partition(self) -> str | None:
        return "cloud"

    def jobs(self, partition: str | None = None) -> list[SlurmJob]:
        return list(self.listed)

    def job(self, job_id: int) -> SlurmJob | None:
        return next((j for j in self.listed if j.job_id == job_id), None)

    def finished(self, job_ids: Sequence[int]) -> list[FinishedJob]:
        return []


def test_a_slurm_job_needing_four_nodes_is_a_gang_claim_of_four(
        config: Config, store: Store) -> None:
    config = replace(config, workloads=(*config.workloads, replace(
        config.workloads[0], name="hpc", source="slurm", kind="job", namespace=None,
        partition="cloud")))
    job = SlurmJob(job_id=7, name="mpi", state="PENDING", reason="Resources",
                   partition="cloud", account="ml", cpus=16, memory_per_node_mb=8192,
                   node_count=4)
    run_pass(config, store, store.clock, sources=["slurm"], scheduler=Squeue(job))
    claim = store.claim("hpc")
    assert claim is not None and (claim.pods, claim.gang, claim.source) == (4, 4, "slurm")
    assert claim.largest_pod == {"cpu": 4000, "memory": 8192 * 2**20}
    assert store.gang_claims() == {"hpc": (4, 4)}
