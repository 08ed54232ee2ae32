"""Build the adapters a config asks for. The SDK imports happen here, lazily, on first use."""

from __future__ import annotations

import atexit
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scoctl.config.schema import Config, Region
from scoctl.errors import ConfigError
from scoctl.secrets import is_secret_key, remember

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.cloud import Cloud
    from scoctl.adapters.cluster import Cluster
    from scoctl.core.catalog import Catalog


def cloud_for(config: Config, region: Region, *,
              budget: Callable[[], None] | None = None,
              deadline: float | None = None) -> Cloud:
    """A Nova adapter for `region` (its clouds.yaml entry); mutating calls call `budget` first.

    A region with `clouds_yaml` reads that file and the ``secure.yaml`` beside it alone
    (`secure_yaml`); one without it gets openstacksdk's own
    search ($OS_CLIENT_CONFIG_FILE, ./clouds.yaml, ~/.config/openstack, /etc/openstack). The
    process environment is never changed, so regions connect in any order.

    Every call is bounded: `timeouts.api` as the connect and read timeout, the retries of all
    calls together by `timeouts.retry_budget`, and nothing starts after `deadline` (monotonic;
    default: `timeouts.run` from now).
    """
    from scoctl.adapters.nova import NovaCloud
    from scoctl.adapters.retry import RetryBudget, RetryPolicy

    if deadline is None:
        deadline = time.monotonic() + config.timeouts.run
    retry = RetryPolicy(budget=RetryBudget(config.timeouts.retry_budget, deadline=deadline))
    return NovaCloud(nova_connection(config, region), retry=retry, spend_token=budget,
                     api_timeout=config.timeouts.api)


def catalog_for(config: Config, region: Region) -> Catalog:
    """What `region`'s Nova offers by name (`NovaCloud.catalog`), read with the same bounds
    as `cloud_for`'s calls. Raises ConfigError (an unusable clouds.yaml entry), TemporaryError,
    PermanentError."""
    from scoctl.adapters.nova import NovaCloud

    cloud = cloud_for(config, region)
    assert isinstance(cloud, NovaCloud)
    return cloud.catalog()


# One openstacksdk Connection per region per process (`run --interval` and the controller
# reuse it pass after pass), closed at exit; a changed clouds.yaml or timeout opens a new one.
_connections: dict[str, tuple[tuple[object, ...], Any]] = {}


def nova_connection(config: Config, region: Region) -> Any:
    """The openstacksdk Connection of `region` in this process (opened on first use): its own
    clouds.yaml when given (the process environment is neither read for it nor changed), else
    openstacksdk's usual search."""
    if region.clouds_yaml is not None and not region.clouds_yaml.exists():
        raise ConfigError(f"clouds.yaml not found: {region.clouds_yaml}",
                          file=config.source_name, field=f"regions[{region.name}].clouds_yaml")
    path = region.clouds_yaml.resolve() if region.clouds_yaml is not None else None
    # without its own file, openstacksdk follows OS_* variables: they are part of what it opens
    where = tuple((str(p), p.stat().st_mtime_ns) for p in (path, secure_yaml(path)) if p) \
        if path else tuple(sorted((k, v) for k, v in os.environ.items() if k.startswith("OS_")))
    signature = (region.cloud, where, config.timeouts.api)
    known = _connections.get(region.name)
    if known is not None and known[0] == signature:
        return known[1]
    connection = _open_connection(config, region)
    if known is not None:
        _close(known[1])
    if not _connections:
        atexit.register(close_connections)
    _connections[region.name] = (signature, connection)
    return connection


def secure_yaml(clouds_yaml: Path | None) -> Path | None:
    """The ``secure.yaml`` beside a region's own clouds.yaml, when there is one: openstacksdk's
    convention keeps the entry's secrets (passwords, application credential secrets) there."""
    if clouds_yaml is None:
        return None
    secure = clouds_yaml.with_name("secure.yaml")
    return secure if secure.is_file() else None


def close_connections() -> None:
    """Close every Connection `nova_connection` opened (at exit, or when a loop stops)."""
    while _connections:
        _, (_, connection) = _connections.popitem()
        _close(connection)


def _close(connection: Any) -> None:
    # The proxies share the keystoneauth session of the connection's config; Connection.close()
    # closes it only when something asked for `connection.session` first, so close it here.
    connection.session.close()
    connection.close()


def _open_connection(config: Config, region: Region) -> Any:
    import openstack.config
    import openstack.connection
    from openstack import exceptions as sdk

    try:
        if region.clouds_yaml is not None:
            path = region.clouds_yaml.resolve()
            secure = secure_yaml(path)
            loader = openstack.config.OpenStackConfig(
                config_files=[str(path)], secure_files=[str(secure)] if secure else [],
                vendor_files=[], load_envvars=False)
        else:
            loader = openstack.config.OpenStackConfig()
        cloud = loader.get_one(cloud=region.cloud, api_timeout=config.timeouts.api)
    except (sdk.ConfigException, OSError, ValueError) as exc:
        raise ConfigError(f"clouds.yaml entry {region.cloud!r}: {exc}",
                          file=str(region.clouds_yaml) if region.clouds_yaml else None,
                          field=f"regions[{region.name}].cloud") from exc
    for key, value in (cloud.config.get("auth") or {}).items():
        if is_secret_key(str(key)) and isinstance(value, str):
            remember(value)
    return openstack.connection.Connection(config=cloud)


def cluster_for(config: Config, *, timeout: float | None = None) -> Cluster:
    """A Kubernetes adapter from the config's kubeconfig/context (else $KUBECONFIG/in-cluster);
    `timeout` (default `timeouts.api`) bounds the connect and the read of every call."""
    from scoctl.adapters.kubernetes import KubernetesCluster

    k = config.kubernetes
    bound = config.timeouts.api if timeout is None else timeout
    return KubernetesCluster(str(k.kubeconfig) if k.kubeconfig else None, k.context,
                             connect_timeout=bound, read_timeout=bound)


def scheduler_for(config: Config, *, timeout: float | None = None) -> BatchScheduler:
    """Slurm through slurmrestd when `slurm.rest_url` is set (at `slurm.rest_api_version`, else
    the newest version it offers), else through its commands; every command or request is
    bounded by `slurm.timeout` (or `timeout` when smaller)."""
    from scoctl.adapters.slurm import SlurmCli, SlurmRest

    s = config.slurm
    bound = s.timeout if timeout is None else min(s.timeout, timeout)
    cli = SlurmCli(sinfo=s.sinfo, squeue=s.squeue, scontrol=s.scontrol, sacct=s.sacct,
                   timeout=bound)
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
    return SlurmRest(s.rest_url, user=s.rest_user, token=token, timeout=bound,
                     api=s.rest_api_version, cli=cli)
