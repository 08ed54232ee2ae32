"""Build the adapters a config asks for. The SDK imports happen here, lazily, on first use."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from scoctl.config.schema import Config, Region
from scoctl.errors import ConfigError

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cloud import Cloud
    from scoctl.adapters.cluster import Cluster


def cloud_for(config: Config, region: Region, *,
              budget: Callable[[], None] | None = None) -> Cloud:
    """A Nova adapter for `region` (its clouds.yaml entry); mutating calls call `budget` first."""
    from scoctl.adapters.nova import NovaCloud

    if region.clouds_yaml is not None:
        if not region.clouds_yaml.exists():
            raise ConfigError(f"clouds.yaml not found: {region.clouds_yaml}",
                              file=config.source_name, field=f"regions[{region.name}].clouds_yaml")
        os.environ["OS_CLIENT_CONFIG_FILE"] = str(region.clouds_yaml.resolve())
    return NovaCloud.connect(region.cloud, spend_token=budget if budget else None)


def cluster_for(config: Config) -> Cluster:
    """A Kubernetes adapter from the config's kubeconfig/context (else $KUBECONFIG/in-cluster)."""
    from scoctl.adapters.kubernetes import KubernetesCluster

    k = config.kubernetes
    return KubernetesCluster(str(k.kubeconfig) if k.kubeconfig else None, k.context)


def scheduler_for(config: Config) -> BatchScheduler:
    """Slurm through slurmrestd when `slurm.rest_url` is set, else through its commands."""
    from scoctl.adapters.slurm import SlurmCli, SlurmRest

    s = config.slurm
    cli = SlurmCli(sinfo=s.sinfo, squeue=s.squeue, scontrol=s.scontrol, timeout=s.timeout)
    if not s.rest_url:
        return cli
    token = os.environ.get("SLURM_JWT")
    if s.rest_token_file is not None:
        try:
            token = s.rest_token_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError("cannot read the slurmrestd token: "
                              f"{getattr(exc, 'strerror', None) or 'not UTF-8'}",
                              file=config.source_name, field="slurm.rest_token_file") from exc
    return SlurmRest(s.rest_url, user=s.rest_user, token=token, timeout=s.timeout, cli=cli)
