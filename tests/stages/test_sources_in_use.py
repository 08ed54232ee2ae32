"""Which demand sources are in use: one rule (`Config.sources`), asked by watch, reconcile, run
and acquire, with what the host offers (`host.discovery.host_hints`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from scoctl.config.schema import Config, HostHints, parse_config
from scoctl.config.yamlsrc import load_located
from scoctl.host.discovery import host_hints
from scoctl.stages.watch import available_sources, resolve_sources
from tests.builders import BOOTSTRAP


def config_of(tmp: Path, extra: str) -> Config:
    text = f"""
state: {tmp}/state.db
regions:
  - {{name: r1, cloud: r1, launch: {{image: img}}}}
flavors:
  - {{name: small, vcpus: 2, ram: 4Gi}}
pools:
  - {{name: small.spot, region: r1, az: az1, flavor: small, group: g1, tier: reclaimable,
     depth: 4}}
ranking: {{id: r-1, scores: {{small.spot: 0.9}}}}
{BOOTSTRAP}{extra}
"""
    return parse_config(load_located(text, str(tmp / "config.yaml")), path=tmp / "config.yaml")


@pytest.mark.parametrize(("extra", "sources"), [
    ("", ()),
    ("kubernetes: {context: prod}", ("k8s",)),  # the context alone names a cluster
    ("kubernetes: {kubeconfig: /etc/scoctl/kubeconfig}", ("k8s",)),
    ("workloads:\n  - {name: web, contract: T1, source: k8s}", ()),  # says nothing of where
    ("workloads:\n  - {name: hpc, contract: T1, source: slurm, kind: job}", ("slurm",)),
    ("slurm: {rest_url: 'http://127.0.0.1:6820'}", ("slurm",)),
    ("slurm: {cloud_partitions: [cloud]}", ("slurm",)),
])
def test_the_config_alone_says_which_sources_are_in_use(tmp_path: Path, extra: str,
                                                       sources: tuple[str, ...]) -> None:
    config = config_of(tmp_path, extra)
    assert config.sources() == sources


def test_what_the_host_offers_adds_its_sources(tmp_path: Path) -> None:
    config = config_of(tmp_path, "")
    assert config.sources(HostHints(kubeconfig=True)) == ("k8s",)
    assert config.sources(HostHints(slurm_client=True)) == ("slurm",)
    assert config.sources(HostHints(kubeconfig=True, slurm_client=True)) == ("k8s", "slurm")


def test_host_hints_read_the_kubeconfig_the_in_cluster_account_and_slurm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = config_of(tmp_path, f"slurm: {{squeue: {tmp_path / 'squeue'}}}")
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "SLURM_CONF"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    assert host_hints(config) == HostHints(kubeconfig=False, slurm_client=False)
    (tmp_path / ".kube").mkdir()
    (tmp_path / ".kube" / "config").write_text("{}")
    (tmp_path / "squeue").write_text("#!/bin/sh\n")
    (tmp_path / "squeue").chmod(0o755)
    assert host_hints(config) == HostHints(kubeconfig=True, slurm_client=False)
    (tmp_path / "slurm.conf").write_text("")
    assert host_hints(config) == HostHints(kubeconfig=True, slurm_client=True)
    monkeypatch.setenv("HOME", str(tmp_path / "nowhere"))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    assert host_hints(config).kubeconfig
    # watch --source all asks the same rule
    assert available_sources(config) == ["k8s", "slurm"] == resolve_sources(config, "all")
