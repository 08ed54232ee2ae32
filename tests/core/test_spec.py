"""The launch spec hash (design: Drift), pure: canonical (key order, set-like lists), secrets
never in it, versioned so a new canonical form does not roll the fleet."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.spec import (
    CANONICAL,
    FIELDS,
    SPEC_VERSION,
    LaunchSpec,
    changed_fields,
    hash_of,
    hashes_of,
    matches,
    pool_spec,
    stored,
)
from scoctl.core.userdata import BootContract, render_user_data

SPEC = LaunchSpec(flavor="g1.large", image="ubuntu-24.04", networks=("net-a", "net-b"),
                  security_groups=("ssh", "k8s"), key_name="ops", server_group=None,
                  az="nova", user_data_template="#!/bin/sh\necho $contract_json\n",
                  taints=("reclaimable=true:NoSchedule", "gpu=true:NoSchedule"))


def test_the_hash_is_twelve_hex_digits_of_sha256_over_sorted_key_json_with_its_version() -> None:
    # the canonical form written out by hand, keys in a different order than `values` gives
    body = {"version": SPEC_VERSION, "user_data": SPEC.user_data_template, "taints":
            ["gpu=true:NoSchedule", "reclaimable=true:NoSchedule"], "server_group": None,
            "security_groups": ["k8s", "ssh"], "networks": ["net-a", "net-b"],
            "key_name": "ops", "image": "ubuntu-24.04", "flavor": "g1.large", "az": "nova"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    assert hash_of(SPEC) == hashlib.sha256(text.encode()).hexdigest()[:12]


@given(st.permutations(["ssh", "k8s", "web"]), st.permutations(["a=1:NoSchedule", "b=2:NoExecute"]))
def test_security_groups_and_taints_are_sets_their_order_and_repeats_do_not_matter(
        groups: list[str], taints: list[str]) -> None:
    base = replace(SPEC, security_groups=("k8s", "ssh", "web"),
                   taints=("a=1:NoSchedule", "b=2:NoExecute"))
    other = replace(SPEC, security_groups=(*groups, groups[0]), taints=tuple(taints))
    assert hash_of(other) == hash_of(base)


def test_network_order_matters_nova_attaches_networks_in_order() -> None:
    assert hash_of(replace(SPEC, networks=("net-b", "net-a"))) != hash_of(SPEC)


def test_every_field_changes_the_hash_and_is_named_as_changed() -> None:
    changes = {"flavor": {"flavor": "g1.small"}, "image": {"image": "ubuntu-26.04"},
               "networks": {"networks": ("net-a",)}, "security_groups": {"security_groups": ()},
               "key_name": {"key_name": "other"}, "server_group": {"server_group": "aff"},
               "az": {"az": "az2"}, "user_data": {"user_data_template": "#!/bin/sh\n"},
               "taints": {"taints": ()}}
    assert set(changes) == set(FIELDS)
    for name, change in changes.items():
        new = replace(SPEC, **change)
        assert hash_of(new) != hash_of(SPEC), name
        assert changed_fields(SPEC, new) == (name,)


def test_empty_key_name_server_group_and_az_are_the_same_as_unset() -> None:
    assert hash_of(replace(SPEC, key_name="", az="")) == hash_of(
        replace(SPEC, key_name=None, az=None))


def test_per_launch_secrets_never_enter_the_hash_only_the_template_text_does() -> None:
    # two launches render different user data (their join secrets) from one template; the
    # pool's spec, and so its hash, is the same for both
    template = "#!/bin/sh\nkubeadm join --token $join_secret\n"
    contract = BootContract(workload="web", contract="T1", pool="p", tier="committed",
                            generation=1, launch="l-1", region="r", az="nova", flavor="f")
    one = render_user_data(template, contract, "abcdef.0123456789abcdef")
    two = render_user_data(template, replace(contract, launch="l-2"), "fedcba.fedcba9876543210")
    assert one != two and "abcdef.0123456789abcdef" in one
    spec = pool_spec(flavor="f", az="nova", tier="committed", image="img", networks=(),
                     security_groups=(), key_name=None, server_group=None,
                     user_data_template=template)
    assert "abcdef" not in json.dumps(spec.values())
    assert hash_of(spec) == hash_of(replace(spec))


def test_a_reclaimable_pool_spec_carries_the_reclaimable_taint() -> None:
    args = {"flavor": "f", "az": "nova", "image": "img", "networks": (), "security_groups": (),
            "key_name": None, "server_group": None, "user_data_template": "t"}
    assert pool_spec(tier="reclaimable", **args).taints == ("reclaimable=true:NoSchedule",)
    assert pool_spec(tier="committed", **args).taints == ()


def test_a_new_version_does_not_roll_the_fleet() -> None:
    # versions 1 and 2 named the image by its configured name (0.2 and the first drift release
    # never resolved it), version 3 by the id it resolved to; units recorded under the older
    # versions still match the same spec under version 3
    resolved = replace(SPEC, image_id="7d3c0d4e-0000-4000-8000-000000000001")
    v1, v2 = hash_of(resolved, 1), hash_of(resolved, 2)
    assert SPEC_VERSION == 3 and set(CANONICAL) == {1, 2, 3}
    assert len({v1, v2, hash_of(resolved)}) == 3
    assert {v1, v2} <= hashes_of(resolved)
    assert matches(v1, resolved) and matches(v2, resolved) and matches(hash_of(resolved), resolved)
    # what was recorded before the id was resolved (the name-only spec) still matches
    assert v1 == hash_of(SPEC, 1) and v2 == hash_of(SPEC, 2)
    # but a real change does roll, under every version
    newer = replace(resolved, image="ubuntu-26.04", image_id="7d3c0d4e-0000-4000-8000-0000000002")
    assert not any(matches(h, newer) for h in (v1, v2, hash_of(resolved)))


def test_an_image_uploaded_again_under_its_name_is_a_new_spec_from_version_3() -> None:
    old = replace(SPEC, image_id="7d3c0d4e-0000-4000-8000-000000000001")
    again = replace(SPEC, image_id="7d3c0d4e-0000-4000-8000-000000000009")
    assert not matches(hash_of(old), again)
    assert changed_fields(old, again) == ("image",)
    # a unit recorded by name only (version 2) cannot tell: it is taken as current
    assert matches(hash_of(old, 2), again)


def test_the_stored_spec_names_changed_fields_and_keeps_no_template_text() -> None:
    secretive = replace(SPEC, user_data_template="#cloud-config\npassword: hunter2\n")
    kept = stored(secretive)
    assert "hunter2" not in json.dumps(kept)
    assert set(kept) == set(FIELDS)
    assert changed_fields(kept, secretive) == ()
    assert changed_fields(kept, replace(secretive, flavor="m1.xlarge")) == ("flavor",)
    assert changed_fields(kept, replace(secretive, user_data_template="#cloud-config\n")) == (
        "user_data",)
    assert changed_fields({"flavor": secretive.flavor}, secretive) == FIELDS[1:]


def test_a_unit_recorded_without_a_hash_is_taken_as_current() -> None:
    assert matches(None, SPEC) and matches("", SPEC)
