"""Config builders shared by stage tests (one small world each, written into tmp_path)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from scoctl.core.fleet import IN_FLIGHT_LAUNCHES, units_of
from scoctl.runner.compose import Deps, PassReport, Regions, run_once
from scoctl.sim.nova_emulator import IMAGE_ID
from scoctl.state import Store

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cloud import Cloud
    from scoctl.adapters.cluster import Cluster
    from scoctl.clock import Clock
    from scoctl.config.schema import Config
    from scoctl.core.model import Source

# What a config that serves Kubernetes with the bundled user-data template must give
# (`bootstrap.api_endpoint` / `bootstrap.ca_cert_hash`, design: Operating): the API a node's kubeadm
# join reaches and the CA hash its discovery checks. Tests never run kubeadm: any well-formed
# pair will do.
JOIN_ENDPOINT = "127.0.0.1:6443"
JOIN_CA_HASH = "sha256:" + "ab" * 32
JOIN_FIELDS = f"api_endpoint: '{JOIN_ENDPOINT}', ca_cert_hash: '{JOIN_CA_HASH}'"
BOOTSTRAP = f"bootstrap: {{{JOIN_FIELDS}}}\n"


def nova_config(tmp_path: Path, cloud: str, *, extra: str = "", bootstrap: str = "") -> Path:
    """One region on the `cloud` entry of tmp_path/clouds.yaml, one m1.tiny pool, workload
    `web`; `extra` is appended YAML, `bootstrap` more fields of the `bootstrap` mapping."""
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(f"""\
        state: {tmp_path / "state.db"}
        budget_dir: {tmp_path / "budget"}
        regions:
          - name: region-a
            cloud: {cloud}
            clouds_yaml: {tmp_path / "clouds.yaml"}
            launch: {{image: {IMAGE_ID}, networks: [none]}}
        flavors:
          - {{name: m1.tiny, vcpus: 1, ram: 512Mi}}
        pools:
          - {{name: tiny.a, region: region-a, az: nova, flavor: m1.tiny, group: g1,
             tier: reclaimable, depth: 20}}
        ranking: {{id: r-1, scores: {{tiny.a: 0.5}}}}
        workloads:
          - {{name: web, contract: T1, source: k8s}}
        bootstrap: {{{JOIN_FIELDS}{", " + bootstrap if bootstrap else ""}}}
        """) + extra, encoding="utf-8")
    return path


def slurm_config(tmp_path: Path, slurm: str) -> Path:
    """One c4.xlarge pool and a spool in tmp_path; `slurm` is the YAML flow mapping of the
    `slurm:` section."""
    path = tmp_path / "config.yaml"
    path.write_text(textwrap.dedent(f"""\
        state: {tmp_path / "state.db"}
        spool: {tmp_path / "spool"}
        regions:
          - name: r1
            launch: {{image: img, networks: [net]}}
        flavors:
          - {{name: c4.xlarge, vcpus: 16, ram: 64Gi}}
        pools:
          - {{name: c4.xlarge.az1, region: r1, az: az1, flavor: c4.xlarge, group: g1,
             tier: reclaimable, depth: 4}}
        ranking: {{id: r-1, scores: {{c4.xlarge.az1: 0.9}}}}
        """) + f"slurm: {slurm}\n", encoding="utf-8")
    return path


def held_units(store: Store) -> dict[str, dict[str, int]]:
    """Units each workload holds per pool in `store`: live instances plus in-flight launches."""
    return units_of(store.instances(), store.launches(status=IN_FLIGHT_LAUNCHES))


@dataclass
class Systems:
    """The outside systems a test's pass talks to (clouds by region name: given, never built)."""

    cluster: Cluster | None = None
    scheduler: BatchScheduler | None = None
    clouds: Mapping[str, Cloud] | None = None
    sources: tuple[Source, ...] = ()


def one_pass(config: Config, store: Store, clock: Clock, systems: Systems, *,
             acquire_watch: float = 0.0,
             leads: Callable[[str], bool] | None = None) -> PassReport:
    """One `run_once` pass of the composer over `systems`, as ``scoctl run --once`` runs it."""
    return run_once(Deps(config, store, clock, regions=Regions(clouds=systems.clouds),
                         cluster=systems.cluster, scheduler=systems.scheduler,
                         sources=systems.sources, leads=leads, acquire_watch=acquire_watch))
