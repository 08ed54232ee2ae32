"""Build the adapters a config asks for. The SDK imports happen here, lazily, on first use."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from scoctl.config.schema import Config, Region
from scoctl.errors import ConfigError

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cloud import Cloud
    from scoctl.adapters.cluster import Cluster


def cloud_for(config: Config, region: Region, *,
              budget: Callable[[], None] | None = None) -> Cloud:
    """A Nova adapter for `region` (its clouds.yaml entry); mutating calls call `budget` first.

    A region with `clouds_yaml` reads that file alone; one without it gets openstacksdk's own
    search ($OS_CLIENT_CONFIG_FILE, ./clouds.yaml, ~/.config/openstack, /etc/openstack). The
    process environment is never changed, so regions connect in any order.
    """
    from scoctl.adapters.nova import NovaCloud

    return NovaCloud(nova_connection(config, region), spend_token=budget)


def nova_connection(config: Config, region: Region) -> Any:
    """An openstacksdk `Connection` for `region`'s cloud. Raises ConfigError naming the field."""
    import openstack
    from openstack import exceptions as sdk
    from openstack.config import loader

    where = f"regions[{region.name}]"
    try:
        if region.clouds_yaml is None:
            return openstack.connect(cloud=region.cloud)
        if not region.clouds_yaml.exists():
            raise ConfigError(f"clouds.yaml not found: {region.clouds_yaml}",
                              file=config.source_name, field=f"{where}.clouds_yaml")
        # this file only: neither $OS_CLIENT_CONFIG_FILE nor a secure.yaml found elsewhere
        files = loader.OpenStackConfig(config_files=[str(region.clouds_yaml)], secure_files=[],
                                       load_envvars=False)
        return openstack.connection.Connection(config=files.get_one(cloud=region.cloud))
    except sdk.ConfigException as exc:
        source = region.clouds_yaml or "clouds.yaml"
        raise ConfigError(f"{source}: cloud {region.cloud!r}: {exc}", file=config.source_name,
                          field=f"{where}.cloud") from exc


def cluster_for(config: Config) -> Cluster:
    """A Kubernetes adapter from the config's kubeconfig/context (else $KUBECONFIG/in-cluster)."""
    from scoctl.adapters.kubernetes import KubernetesCluster

    k = config.kubernetes
    return KubernetesCluster(str(k.kubeconfig) if k.kubeconfig else None, k.context)


def scheduler_for(config: Config) -> BatchScheduler:
    """Slurm through slurmrestd when `slurm.rest_url` is set (at `slurm.rest_api_version`, else
    the newest version it offers), else through its commands."""
    from scoctl.adapters.slurm import SlurmCli, SlurmRest

    s = config.slurm
    cli = SlurmCli(sinfo=s.sinfo, squeue=s.squeue, scontrol=s.scontrol, sacct=s.sacct,
                   timeout=s.timeout)
    if not s.rest_url:
        return cli
    token = os.environ.get("SLURM_JWT")
    if s.rest_token_file is not None:
        try:
            token = s.rest_token_file.read_text().strip()
        except OSError as exc:
            raise ConfigError(f"cannot read the slurmrestd token: {exc.strerror}",
                              file=config.source_name, field="slurm.rest_token_file") from exc
    return SlurmRest(s.rest_url, user=s.rest_user, token=token, timeout=s.timeout,
                     api=s.rest_api_version, cli=cli)
