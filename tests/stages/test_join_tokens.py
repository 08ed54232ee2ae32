"""Short-lived join credentials end to end through acquire and reconcile (design: Operating): one
bootstrap token Secret per Kubernetes launch (the real client against the Kubernetes emulator,
Nova as the in-package fake), only that token in the user-data, deleted when the launch fails
or its nodes registered, expired leftovers removed by reconcile — and the token never in the
logs, the events or the state file."""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from scoctl.adapters.cloud import Cloud
from scoctl.adapters.fakes import FakeCloud
from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.clock import FixedClock
from scoctl.config.schema import Config, Region, load_config
from scoctl.core.jointoken import make_token, secret_manifest
from scoctl.core.model import InstanceUpdate, PlanUnitRecord, PlanWorkloadRecord
from scoctl.errors import ConfigError, PermanentError
from scoctl.host.budget import TokenBudget
from scoctl.services.join_tokens import JoinTokens, prune
from scoctl.sim.k8s_emulator import K8sEmulator
from scoctl.stages.acquire import AcquireResult, run_acquire
from scoctl.stages.reconcile import run_reconcile
from scoctl.state import Store
from tests.fixtures.state import StateProbe

STATIC = "static-join-secret-never-used-while-tokens-work"
TOKEN_LINE = re.compile(r"SCO_JOIN_TOKEN=([a-z0-9]{6})\.([a-z0-9]{16})\n")
ENDPOINT = "10.0.0.10:6443"
CA_HASH = "sha256:" + "ab" * 32


@pytest.fixture
def config(tmp_path: Path, k8s_kubeconfig: Path) -> Config:
    (tmp_path / "join-token").write_text(STATIC + "\n")
    path = tmp_path / "config.yaml"
    path.write_text(f"""
state: {tmp_path / "state.db"}
budget_dir: {tmp_path / "budget"}
regions:
  - {{name: region-a, mutating_calls_per_second: 1000, launch: {{image: img, networks: [none]}}}}
flavors:
  - {{name: m1.small, vcpus: 1, ram: 2Gi}}
pools:
  - {{name: small.a, region: region-a, az: nova, flavor: m1.small, group: g1,
     tier: reclaimable, depth: 50}}
contracts:
  T1: {{floor: 0, pool_cap: 1.0, group_cap: 1.0, min_pools: 1}}
ranking: {{id: r-1, scores: {{small.a: 0.5}}}}
workloads:
  - {{name: web, contract: T1, source: k8s}}
kubernetes: {{kubeconfig: {k8s_kubeconfig}}}
bootstrap: {{join_secret_file: {tmp_path / "join-token"}, api_endpoint: "{ENDPOINT}",
            ca_cert_hash: "{CA_HASH}"}}
timeouts: {{launch: 5m, registration: 15m}}
""", encoding="utf-8")
    return load_config(path)


@pytest.fixture
def fake() -> Iterator[FakeCloud]:
    cloud = FakeCloud()
    yield cloud
    cloud.reset()


def plan(store: Store, units: int) -> None:
    store.commit_plan(ranking="r-1", full=False, plans=[PlanWorkloadRecord(
        workload="web", generation=0, claim_version=1, contract="T1", ranking="r-1",
        feasible=True, degraded=False, reasons=(),
        pools=(PlanUnitRecord(pool="small.a", tier="reclaimable", group="g1", units=units,
                              share=1.0, score=0.5),))])


def acquire(config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
            tokens: JoinTokens) -> AcquireResult:
    def connect(config: Config, region: Region, budget: TokenBudget) -> Cloud:
        return fake

    return run_acquire(config, store, clock, connect=connect, poll=0.5,
                       watch=0, join_tokens=tokens)


def secrets_of(emulator: K8sEmulator) -> dict[str, dict[str, str]]:
    return {s["metadata"]["name"]: {k: base64.b64decode(v).decode()
                                    for k, v in s.get("data", {}).items()}
            for s in emulator.objects("Secret", "kube-system")}


def test_each_launch_gets_its_own_expiring_token_and_only_that_token_reaches_the_node(
        config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
        k8s_cluster: KubernetesCluster, k8s_emulator: K8sEmulator,
        caplog: pytest.LogCaptureFixture, probe: StateProbe) -> None:
    caplog.set_level(logging.DEBUG)
    plan(store, 2)
    result = acquire(config, store, clock, fake, JoinTokens(config, clock, api=k8s_cluster))
    [launch] = result.launches
    [(name, data)] = secrets_of(k8s_emulator).items()
    stored = k8s_emulator.get("Secret", "kube-system", name)
    assert stored["type"] == "bootstrap.kubernetes.io/token"
    assert stored["metadata"]["labels"]["sco/launch"] == launch.launch_id
    assert name == f"bootstrap-token-{data['token-id']}"
    assert data["expiration"] == "2026-01-01T00:20:00Z"  # launch + 5m + 15m
    assert data["auth-extra-groups"] == "system:bootstrappers:scoctl"
    token = f"{data['token-id']}.{data['token-secret']}"

    servers = fake.servers(tags=[f"sco:launch={launch.launch_id}"])
    assert len(servers) == 2
    for server in servers:
        user_data = base64.b64decode(fake.user_data_of(server.id) or "").decode()
        assert TOKEN_LINE.findall(user_data) == [(data["token-id"], data["token-secret"])]
        assert f"SCO_JOIN_ENDPOINT={ENDPOINT}\n" in user_data
        assert f"SCO_JOIN_CA_HASH={CA_HASH}\n" in user_data
        assert STATIC not in user_data

    # a second launch gets another token
    plan(store, 3)
    second = acquire(config, store, clock, fake, JoinTokens(config, clock, api=k8s_cluster))
    assert len(second.launches) == 1 and len(secrets_of(k8s_emulator)) == 2

    state_bytes = probe.raw()  # the SQLite file and its WAL, or every PostgreSQL row
    assert launch.launch_id.encode() in state_bytes  # we look where the launch went
    assert data["token-secret"].encode() not in state_bytes
    assert all(data["token-secret"] not in str(e.detail) for e in store.events())
    assert token not in caplog.text and data["token-secret"] not in caplog.text
    assert token not in repr(result) and token not in repr(second)


def test_a_failed_launch_deletes_its_token_at_once(
        config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
        k8s_cluster: KubernetesCluster, k8s_emulator: K8sEmulator) -> None:
    plan(store, 2)
    fake.fail_next("launch", PermanentError("Nova refused the request"))
    result = acquire(config, store, clock, fake, JoinTokens(config, clock, api=k8s_cluster))
    assert result.errors and secrets_of(k8s_emulator) == {}
    deletes = [r for r in k8s_emulator.requests if r.startswith("DELETE ") and "/secrets/" in r]
    assert len(deletes) == 1


def test_reconcile_deletes_tokens_once_nodes_registered_and_expired_leftovers(
        config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
        k8s_cluster: KubernetesCluster, k8s_emulator: K8sEmulator) -> None:
    plan(store, 2)
    [launch] = acquire(config, store, clock, fake,
                       JoinTokens(config, clock, api=k8s_cluster)).launches
    # a token from a crash between token and intent: no launch record; not expired yet
    leftover = make_token("zzz999", "0123456789abcdef", clock.now() + timedelta(minutes=20))
    k8s_cluster.create_bootstrap_token(secret_manifest(leftover, launch_id="l-crashed00000",
                                                       workload="web"))
    run_reconcile(config, store, clock, clouds={"region-a": fake}, cluster=k8s_cluster,
                  discover=False)
    # the leftover is gone; the servers are ACTIVE but no Node registered yet: the launch
    # keeps its token
    names = set(secrets_of(k8s_emulator))
    assert "bootstrap-token-zzz999" not in names and len(names) == 1
    assert {e.detail["reason"] for e in store.events() if e.token == "JOIN_TOKEN_DELETED"} == \
        {"no such launch"}

    for instance in store.instances():
        store.update_instance(InstanceUpdate(instance.id, status="ready"))
    assert prune(store, k8s_cluster, clock) == [f"{launch.launch_id}: nodes registered"]
    assert secrets_of(k8s_emulator) == {}

    expired = make_token("old111", "0123456789abcdef", clock.now() - timedelta(seconds=1))
    k8s_cluster.create_bootstrap_token(secret_manifest(expired, launch_id=launch.launch_id,
                                                       workload="web"))
    for instance in store.instances():
        store.update_instance(InstanceUpdate(instance.id, status="building"))
    assert prune(store, k8s_cluster, clock, dry_run=True) == [f"{launch.launch_id}: expired"]
    assert len(secrets_of(k8s_emulator)) == 1  # a dry run deletes nothing
    assert prune(store, k8s_cluster, clock) == [f"{launch.launch_id}: expired"]
    assert secrets_of(k8s_emulator) == {}


def test_without_a_reachable_cluster_the_static_secret_stands_in(
        config: Config, store: Store, clock: FixedClock, fake: FakeCloud,
        caplog: pytest.LogCaptureFixture) -> None:
    def no_cluster(config: Config) -> KubernetesCluster:
        raise ConfigError("cannot load the Kubernetes configuration: nowhere")

    plan(store, 1)
    tokens = JoinTokens(config, clock, connect=no_cluster)
    [launch] = acquire(config, store, clock, fake, tokens).launches
    [server] = fake.servers(tags=[f"sco:launch={launch.launch_id}"])
    user_data = base64.b64decode(fake.user_data_of(server.id) or "").decode()
    assert f"SCO_JOIN_TOKEN={STATIC}\n" in user_data
    assert "no bootstrap token" in caplog.text and STATIC not in caplog.text
    assert tokens.credential("l-slurm0000000", "hpc", slurm_node=True) is None


def test_tokens_can_be_switched_off(config: Config, clock: FixedClock,
                                    k8s_cluster: KubernetesCluster,
                                    k8s_emulator: K8sEmulator) -> None:
    from dataclasses import replace

    off = replace(config, bootstrap=replace(config.bootstrap, join_tokens=False))
    assert JoinTokens(off, clock, api=k8s_cluster).credential("l-1", "web",
                                                              slurm_node=False) is None
    assert JoinTokens(config, clock, api=k8s_cluster).credential("l-1", "web",
                                                                 slurm_node=True) is None
    assert secrets_of(k8s_emulator) == {}


def test_one_prune_deletes_at_most_its_limit_and_the_next_the_rest(
        store: Store, clock: FixedClock, k8s_cluster: KubernetesCluster,
        k8s_emulator: K8sEmulator) -> None:
    # 2,000 nodes that just joined must not hold one pass (and the demand behind it) for
    # 2,000 DELETEs: each pass takes its share, by Secret name, until none is left
    for n in range(7):
        token = make_token(f"old{n:03d}", "0123456789abcdef", clock.now() - timedelta(seconds=1))
        k8s_cluster.create_bootstrap_token(secret_manifest(token, launch_id=f"l-{n:011d}",
                                                           workload="web"))
    assert len(prune(store, k8s_cluster, clock, limit=3)) == 3
    assert sorted(secrets_of(k8s_emulator)) == [f"bootstrap-token-old{n:03d}" for n in (3, 4, 5, 6)]
    assert len(prune(store, k8s_cluster, clock, limit=3)) == 3
    assert len(prune(store, k8s_cluster, clock, limit=3)) == 1
    assert secrets_of(k8s_emulator) == {}
    assert prune(store, k8s_cluster, clock, limit=3) == []
