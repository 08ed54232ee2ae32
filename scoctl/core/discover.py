"""The `flavors:` section from what Nova reports (`scoctl config discover`), pure.

A flavor's vCPUs and RAM are Nova's; its accelerators come from its extra specs: a PCI
passthrough alias (`pci_passthrough:alias` = ``a100:2`` or ``a100:2,t4:1``) or a placement
resource request (`resources:VGPU`, `resources:PGPU`, ``resources:CUSTOM_*``), each counted under
the Kubernetes resource name the node's device plugin advertises: `nvidia.com/gpu` unless
`names` maps the alias or resource class to another (``--accelerator a100=nvidia.com/a100``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from scoctl.core.model import FlavorInfo

DEFAULT_ACCELERATOR = "nvidia.com/gpu"
PCI_ALIAS = "pci_passthrough:alias"
RESOURCE_CLASSES = ("VGPU", "PGPU")  # placement's standard classes for GPUs
_NOT_ACCELERATORS = ("VCPU", "MEMORY_MB", "DISK_GB", "PCPU")
_PLAIN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$")  # a YAML plain scalar as it stands


def _scalar(text: str) -> str:
    """`text` as a YAML scalar: plain where it reads back as itself, else quoted."""
    return text if _PLAIN.match(text) and text.lower() not in {"null", "true", "false",
                                                              "yes", "no", "on", "off"} \
        else json.dumps(text)


@dataclass(frozen=True)
class Discovered:
    """One flavor as the config writes it (`ram` in MiB), and what in its extra specs could
    not be read (`skipped`: spec key → why)."""

    name: str
    vcpus: int
    ram_mib: int
    accelerators: Mapping[str, int] = field(default_factory=dict)
    skipped: Mapping[str, str] = field(default_factory=dict)


def _count(text: str) -> int | None:
    try:
        value = int(text.strip())
    except ValueError:
        return None
    return value if value >= 0 else None


def accelerators_of(specs: Mapping[str, str], names: Mapping[str, str],
                    ) -> tuple[dict[str, int], dict[str, str]]:
    """The accelerators `specs` ask for, by Kubernetes resource name, and the spec keys that
    could not be read (with why)."""
    found: dict[str, int] = {}
    skipped: dict[str, str] = {}

    def add(source: str, count: int) -> None:
        if count:
            resource = names.get(source, DEFAULT_ACCELERATOR)
            found[resource] = found.get(resource, 0) + count

    alias = specs.get(PCI_ALIAS)
    if alias is not None:
        for item in (part.strip() for part in alias.split(",") if part.strip()):
            label, _, amount = item.partition(":")
            count = _count(amount or "1")
            if not label or count is None:
                skipped[PCI_ALIAS] = f"not alias:count: {alias!r}"
                continue
            add(label, count)
    for key, value in specs.items():
        if not key.startswith("resources") or ":" not in key:
            continue
        resource_class = key.split(":", 1)[1]
        if resource_class in _NOT_ACCELERATORS or not (
                resource_class in RESOURCE_CLASSES or resource_class.startswith("CUSTOM_")):
            continue
        count = _count(value)
        if count is None:
            skipped[key] = f"not a count: {value!r}"
            continue
        add(resource_class, count)
    return found, skipped


def discover(flavors: Iterable[FlavorInfo], names: Mapping[str, str] | None = None,
             only: Iterable[str] = ()) -> list[Discovered]:
    """The config's view of `flavors` (those named in `only`, else all), sorted by name."""
    wanted = set(only)
    out = []
    for f in sorted(flavors, key=lambda f: f.name):
        if wanted and f.name not in wanted:
            continue
        accelerators, skipped = accelerators_of(f.extra_specs, names or {})
        out.append(Discovered(f.name, f.vcpus, f.ram_mb, accelerators, skipped))
    return out


def ram_text(mib: int) -> str:
    """RAM in the config's notation: whole GiB where it is one, else MiB."""
    return f"{mib // 1024}Gi" if mib % 1024 == 0 else f"{mib}Mi"


def flavors_yaml(found: Iterable[Discovered], zones: Iterable[str] = ()) -> str:
    """The `flavors:` section (flow mappings, one flavor a line), with the region's zones as a
    comment for the pools that follow."""
    lines = []
    listed = sorted(set(zones))
    if listed:
        lines.append(f"# availability zones: {', '.join(listed)}")
    lines.append("flavors:")
    for d in found:
        acc = ", ".join(f"{_scalar(k)}: {v}" for k, v in sorted(d.accelerators.items()))
        lines.append(f"  - {{name: {_scalar(d.name)}, vcpus: {d.vcpus}, "
                     f"ram: {ram_text(d.ram_mib)}, "
                     f"accelerators: {{{acc}}}}}")
        lines += [f"    # {key} not read: {why}" for key, why in sorted(d.skipped.items())]
    return "\n".join(lines) + "\n"
