"""What this host offers beyond the config: a kubeconfig or in-cluster account, a Slurm client.

`Config.sources(host_hints(config))` is the one answer to "which demand sources are in use".
"""

from __future__ import annotations

import os
import shutil

from scoctl.config.schema import Config, HostHints


def host_hints(config: Config) -> HostHints:
    """Kubernetes: $KUBECONFIG, ~/.kube/config or an in-cluster service account
    ($KUBERNETES_SERVICE_HOST). Slurm: the configured ``squeue`` on the PATH and a Slurm
    configuration ($SLURM_CONF or /etc/slurm/slurm.conf)."""
    kube = bool(os.environ.get("KUBECONFIG")
                or os.path.exists(os.path.expanduser("~/.kube/config"))
                or os.environ.get("KUBERNETES_SERVICE_HOST"))
    conf = os.environ.get("SLURM_CONF") or "/etc/slurm/slurm.conf"
    slurm = bool(shutil.which(config.slurm.squeue)) and os.path.exists(conf)
    return HostHints(kubeconfig=kube, slurm_client=slurm)
