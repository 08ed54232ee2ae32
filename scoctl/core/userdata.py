"""Cloud-init user-data that lets an instance boot knowing its contract (pure).

The template is a `string.Template` (``$name`` placeholders) so operators can edit it without
learning a template language. Variables:

* ``$contract_json``: the contract subset as one JSON line (workload, contract, pool, tier,
  reclaimable, generation, launch, region, az, flavor, labels, taints, slurm)
* ``$node_labels`` / ``$node_taints``: kubelet's ``--node-labels`` / ``--register-with-taints``
  values; ``$kubelet_extra_args``: both flags together
* ``$slurm_node_name`` / ``$slurm_features``: for Slurm CLOUD nodes (empty otherwise)
* ``$workload``, ``$contract``, ``$pool``, ``$generation``, ``$reclaimable``, ``$launch``
* ``$join_secret``: the join credential — a short-lived bootstrap token per Kubernetes launch
  (`core.jointoken`), else the secret read from ``bootstrap.join_secret_file``; empty for a
  Slurm CLOUD node, as are the two below (slurmd joins by its node name). It is in the
  rendered text only: never logged, never stored (`redacted` gives a copy safe to print).
* ``$join_endpoint`` / ``$join_ca_hash``: the Kubernetes API the node joins and the CA hash
  kubeadm's discovery checks (``bootstrap.api_endpoint`` / ``bootstrap.ca_cert_hash``)

The bundled template writes these into files under ``/etc/scoctl`` and runs the image-side
join script shipped in ``configs/node/`` (``scoctl-node-join``): ``kubeadm join`` with the
labels, the taint and ``sco/instance=<server id>``, or ``slurmd`` under the Slurm node name.

Nova limits user_data to 65,535 bytes after base64; `render_user_data` checks it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from string import Template

from scoctl.core.constraints import KUBELET_LABELS, unit_labels, workload_taint
from scoctl.errors import ConfigError

NOVA_USER_DATA_LIMIT = 65535
RECLAIMABLE_TAINT = "reclaimable=true:NoSchedule"
LABEL_PREFIX = "sco/"
# The placeholder that hands a Kubernetes node each of kubeadm's discovery settings, by the
# `bootstrap` field that fills it: a template that uses one needs that field
JOIN_PLACEHOLDERS = {"api_endpoint": "join_endpoint", "ca_cert_hash": "join_ca_hash"}


@dataclass(frozen=True)
class BootContract:
    """What a node must know at boot."""

    workload: str
    contract: str
    pool: str
    tier: str
    generation: int
    launch: str
    region: str
    az: str
    flavor: str
    slurm_node_name: str | None = None
    slurm_features: Sequence[str] = field(default_factory=tuple)
    group: str = ""
    extra_labels: Mapping[str, str] = field(default_factory=dict)  # pools[].labels, node_labels
    # workloads[].isolation exclusive: the Node carries the taint sco/workload=<name>:NoSchedule
    exclusive: bool = False

    @property
    def reclaimable(self) -> bool:
        return self.tier == "reclaimable"

    def labels(self) -> dict[str, str]:
        """The Kubernetes node labels scoctl expects on a ready node (`core.constraints.
        unit_labels`, less what kubelet sets by itself)."""
        labels = unit_labels(workload=self.workload, contract=self.contract, pool=self.pool,
                             tier=self.tier, group=self.group, region=self.region, az=self.az,
                             flavor=self.flavor, extra=self.extra_labels)
        return {k: v for k, v in labels.items()
                if KUBELET_LABELS.get(k) != v or k in self.extra_labels}

    def taints(self) -> list[str]:
        """Reclaimable nodes register with the `reclaimable=true:NoSchedule` taint, the units
        of an exclusive workload with ``sco/workload=<name>:NoSchedule`` (a Slurm CLOUD
        node, which joins no Kubernetes cluster, with neither workload taint)."""
        taints = [RECLAIMABLE_TAINT] if self.reclaimable else []
        if self.exclusive and not self.slurm_node_name:
            taints.append(workload_taint(self.workload))
        return taints

    def as_json(self) -> dict[str, object]:
        return {
            "workload": self.workload, "contract": self.contract, "pool": self.pool,
            "tier": self.tier, "reclaimable": self.reclaimable, "generation": self.generation,
            "launch": self.launch, "region": self.region, "az": self.az, "flavor": self.flavor,
            "labels": self.labels(), "taints": self.taints(),
            "slurm": ({"node_name": self.slurm_node_name, "features": list(self.slurm_features)}
                      if self.slurm_node_name else None),
        }


def template_variables(contract: BootContract, join_secret: str | None, *,
                       join_endpoint: str | None = None,
                       join_ca_hash: str | None = None) -> dict[str, str]:
    """The ``$name`` values of the template for `contract`."""
    labels = ",".join(f"{k}={v}" for k, v in contract.labels().items())
    taints = ",".join(contract.taints())
    kubelet = f"--node-labels={labels}" + (f" --register-with-taints={taints}" if taints else "")
    return {
        "contract_json": json.dumps(contract.as_json(), sort_keys=True, separators=(",", ":")),
        "node_labels": labels,
        "node_taints": taints,
        "kubelet_extra_args": kubelet,
        "slurm_node_name": contract.slurm_node_name or "",
        "slurm_features": ",".join(contract.slurm_features),
        "workload": contract.workload,
        "contract": contract.contract,
        "pool": contract.pool,
        "generation": str(contract.generation),
        "reclaimable": "true" if contract.reclaimable else "false",
        "launch": contract.launch,
        "join_secret": join_secret or "",
        "join_endpoint": join_endpoint or "",
        "join_ca_hash": join_ca_hash or "",
    }


def placeholders(template: str) -> frozenset[str]:
    """The ``$name`` / ``${name}`` placeholders `template` uses (``$$name`` is a literal)."""
    return frozenset(Template(template).get_identifiers())


def render_user_data(template: str, contract: BootContract, join_secret: str | None, *,
                     join_endpoint: str | None = None, join_ca_hash: str | None = None,
                     source: str = "user-data template") -> str:
    """Render `template` for `contract`; ConfigError on an unknown placeholder or over-size."""
    values = template_variables(contract, join_secret, join_endpoint=join_endpoint,
                                join_ca_hash=join_ca_hash)
    try:
        text = Template(template).substitute(values)
    except KeyError as exc:
        raise ConfigError(f"unknown placeholder ${exc.args[0]}", file=source) from exc
    except ValueError as exc:
        raise ConfigError(f"bad placeholder: {exc}", file=source) from exc
    size = len(base64.b64encode(text.encode()))
    if size > NOVA_USER_DATA_LIMIT:
        raise ConfigError(f"rendered user-data is {size} bytes after base64; Nova allows "
                          f"{NOVA_USER_DATA_LIMIT}", file=source)
    return text


def redacted(user_data: str, join_secret: str | None) -> str:
    """`user_data` with the join secret replaced, safe to print in a dry-run."""
    return user_data.replace(join_secret, "***") if join_secret else user_data


def parse_boot_contract(user_data: str) -> Mapping[str, object] | None:
    """The contract JSON written by the bundled template, read back (for the sim node agent)."""
    import yaml

    try:
        doc = yaml.safe_load(user_data)
    except yaml.YAMLError:
        return None
    if not isinstance(doc, Mapping):
        return None
    for entry in doc.get("write_files") or []:
        if isinstance(entry, Mapping) and entry.get("path") == "/etc/scoctl/contract.json":
            try:
                data = json.loads(str(entry.get("content", "")))
            except ValueError:
                return None
            return data if isinstance(data, Mapping) else None
    return None
