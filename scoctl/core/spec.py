"""A unit's launch spec hash (DESIGN §17), pure: 12 hex digits of SHA-256 over a canonical form
(sorted-key JSON, with a version) of what a server is launched from — flavor, image, networks,
security groups, key name, server group, availability zone, the user-data template's text and
the node taints. Per-launch secrets never enter it (the template, not the rendered user data).
Recorded at launch on the instance and in the tag ``sco:spec=<hash>``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable

SPEC_VERSION = 1


def spec_hash(*, flavor: str, image: str, networks: Iterable[str],
              security_groups: Iterable[str], key_name: str | None,
              server_group: str | None, az: str | None, user_data_template: str,
              taints: Iterable[str]) -> str:
    """The spec hash of one launch (networks and groups in their order: Nova attaches
    networks in order; taints and groups as sets)."""
    canonical = {"version": SPEC_VERSION, "flavor": flavor, "image": image,
                 "networks": list(networks), "security_groups": sorted(set(security_groups)),
                 "key_name": key_name or None, "server_group": server_group or None,
                 "az": az or None, "user_data": user_data_template,
                 "taints": sorted(set(taints))}
    text = json.dumps(canonical, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
