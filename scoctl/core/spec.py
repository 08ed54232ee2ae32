"""A unit's launch spec and its hash (design: Drift), pure: 12 hex digits of SHA-256 over a
canonical form (sorted-key JSON, with a version) of what a server is launched from — flavor,
image, networks, security groups, key name, server group, availability zone, the user-data
template's text and the node taints. Per-launch secrets never enter it (the template, not the
rendered user data). Recorded at launch on the instance and in the tag ``sco:spec=<hash>``.

Versioned: `CANONICAL` holds every canonical form scoctl has recorded hashes under, newest
last. A unit is on the current spec when its recorded hash is the spec's hash under *any*
known version (`matches`), so a new canonical form never rolls the fleet by itself: only a
change of what the spec says does (Karpenter's ``ec2nodeclass-hash-version`` answers the same
problem by re-stamping the hash; here the versions are kept instead).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# the spec fields, in the order `UNIT_DRIFTED {fields}` names them
FIELDS = ("flavor", "image", "networks", "security_groups", "key_name", "server_group", "az",
          "user_data", "taints")


@dataclass(frozen=True)
class LaunchSpec:
    """What one unit is launched from. `image_id` is the image's id when it was resolved at
    launch (the name otherwise stands for it); `networks` keep their order (Nova attaches them
    in order), security groups and taints are sets."""

    flavor: str
    image: str
    networks: tuple[str, ...] = ()
    security_groups: tuple[str, ...] = ()
    key_name: str | None = None
    server_group: str | None = None
    az: str | None = None
    user_data_template: str = ""
    taints: tuple[str, ...] = ()
    image_id: str | None = None

    def values(self) -> dict[str, Any]:
        """The spec's fields in canonical form (`FIELDS`)."""
        return {"flavor": self.flavor, "image": self.image_id or self.image,
                "networks": list(self.networks),
                "security_groups": sorted(set(self.security_groups)),
                "key_name": self.key_name or None, "server_group": self.server_group or None,
                "az": self.az or None, "user_data": self.user_data_template,
                "taints": sorted(set(self.taints))}


def _by_name(spec: LaunchSpec) -> dict[str, Any]:
    """Versions 1 and 2: the image by its configured name (what releases up to 0.2 and the
    first drift release recorded: they never resolved the id)."""
    return {**spec.values(), "image": spec.image}


def _by_id(spec: LaunchSpec) -> dict[str, Any]:
    """Version 3: the image by the id it resolved to at launch (its name when not resolved),
    so an image uploaded again under the same name is a new spec."""
    return spec.values()


CANONICAL: Mapping[int, Callable[[LaunchSpec], dict[str, Any]]] = {
    1: _by_name, 2: _by_name, 3: _by_id}
SPEC_VERSION = max(CANONICAL)


def hash_of(spec: LaunchSpec, version: int = SPEC_VERSION) -> str:
    """The hash of `spec` under canonical form `version`."""
    canonical = {"version": version, **CANONICAL[version](spec)}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def hashes_of(spec: LaunchSpec) -> frozenset[str]:
    """The hash of `spec` under every known version."""
    return frozenset(hash_of(spec, version) for version in CANONICAL)


def matches(recorded: str | None, spec: LaunchSpec) -> bool:
    """Whether a unit recorded with hash `recorded` runs `spec` (under any known version); a
    unit with no recorded hash (launched before hashes were recorded) is taken as current."""
    return not recorded or recorded in hashes_of(spec)


def stored(spec: LaunchSpec) -> dict[str, Any]:
    """What the state keeps of a recorded spec (`FIELDS`, the template as the SHA-256 of its
    text: a template may hold what the state should not), enough to name changed fields."""
    values = spec.values()
    values["user_data"] = hashlib.sha256(spec.user_data_template.encode()).hexdigest()
    return values


def changed_fields(old: LaunchSpec | Mapping[str, Any], new: LaunchSpec) -> tuple[str, ...]:
    """The fields in which `new` differs from `old` (a spec, or what `stored` kept of one), in
    `FIELDS` order; a field `old` did not keep counts as changed."""
    a = stored(old) if isinstance(old, LaunchSpec) else old
    b = stored(new)
    return tuple(name for name in FIELDS if name not in a or a[name] != b[name])


RECLAIMABLE_TAINT = "reclaimable=true:NoSchedule"  # the taint a reclaimable pool's Nodes carry


def pool_spec(*, flavor: str, az: str | None, tier: str, image: str, networks: Iterable[str],
              security_groups: Iterable[str], key_name: str | None, server_group: str | None,
              user_data_template: str, image_id: str | None = None,
              workload_taints: Iterable[str] = ()) -> LaunchSpec:
    """The spec a pool's units are launched from (its flavor, AZ and tier's taints, the
    workload's isolation taint in `workload_taints`, the region's launch settings, the
    template's text): one rule for acquire, which records it,
    and reconcile, which compares against it."""
    return LaunchSpec(flavor=flavor, image=image, networks=tuple(networks),
                      security_groups=tuple(security_groups), key_name=key_name,
                      server_group=server_group, az=az or None,
                      user_data_template=user_data_template,
                      taints=((RECLAIMABLE_TAINT,) if tier == "reclaimable" else ())
                      + tuple(workload_taints),
                      image_id=image_id if image_id and image_id != image else None)
