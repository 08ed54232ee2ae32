"""What a region offers by name, and a launch of a name it lacks (issue 49 item 1), against
BOTH backends (the emulator and Nova's own harness, `tests.fixtures.nova`).

`NovaCloud.catalog` reads Nova's image, network and security group proxies (microversion 2.35,
`nova/api/openstack/compute/{images,networks,security_groups}.py`), the flavors and
``/os-availability-zone`` (`availability_zone.py`): what ``config check --online`` checks the
config's names against. A create naming a security group or zone the region lacks is Nova's
400 (`servers.py` ``create``: SecurityGroupNotFound / InvalidRequest → HTTPBadRequest): the
adapter raises ConfigError (nothing was created; the config's to fix), not a PermanentError
the controller would count as an outage of the region. The security groups are read in the
project Nova's Neutron fake keeps its ``default`` group in (`NEUTRON_PROJECT`), as a real
Neutron gives every project one — on the emulator: the harness's Neutron fake fails Nova's
security group proxy and a create naming an unknown group alike (500, a TypeError and an
AttributeError inside the fake), so there the catalog leaves the groups unchecked (None) and
the unknown-group create is tried on the emulator only; the zone case runs on both.
"""

from __future__ import annotations

import pytest

from scoctl.core.catalog import Kind, Wanted, unmet
from scoctl.core.model import LaunchRequest
from scoctl.errors import ConfigError
from tests.fixtures.nova import NEUTRON_PROJECT, NovaBackend

pytestmark = pytest.mark.nova


@pytest.mark.parametrize("nova_project", [NEUTRON_PROJECT])
def test_the_catalog_lists_images_flavors_networks_groups_and_zones(
        nova_cloud: NovaBackend) -> None:
    catalog = nova_cloud.cloud.catalog()

    assert nova_cloud.image in {i.id for i in catalog.images}
    assert nova_cloud.network in {n.id for n in catalog.networks}
    assert {"m1.tiny", "m1.xlarge"} <= {f.name for f in catalog.flavors}
    groups = catalog.security_groups
    if nova_cloud.kind == "emulator":
        assert groups is not None and "default" in {g.name for g in groups}
    assert "nova" in catalog.zones
    wanted = [Wanted(Kind.IMAGE, nova_cloud.image, "regions[0].launch.image"),
              Wanted(Kind.IMAGE, "ubuntu-26.04", "regions[0].launch.image"),
              Wanted(Kind.FLAVOR, "m1.tiny", "pools[0].flavor"),
              Wanted(Kind.FLAVOR, "c9.huge", "pools[1].flavor"),
              Wanted(Kind.NETWORK, nova_cloud.network, "regions[0].launch.networks"),
              Wanted(Kind.SECURITY_GROUP, "default", "regions[0].launch.security_groups"),
              Wanted(Kind.SECURITY_GROUP, "web-sg", "regions[0].launch.security_groups"),
              Wanted(Kind.ZONE, "nova", "pools[0].az"),
              Wanted(Kind.ZONE, "az9", "pools[1].az")]
    lacking = [(Kind.IMAGE, "ubuntu-26.04"), (Kind.FLAVOR, "c9.huge"),
               (Kind.SECURITY_GROUP, "web-sg"), (Kind.ZONE, "az9")]
    if groups is None:  # not listed: not checked
        lacking.remove((Kind.SECURITY_GROUP, "web-sg"))
    assert [(u.wanted.kind, u.wanted.name) for u in unmet("r", wanted, catalog)] == lacking


def lacking(backend: NovaBackend, overrides: dict[str, object]) -> None:
    fields: dict[str, object] = {"name": "lack", "flavor": backend.small_flavor,
                                 "image": backend.image, "networks": "none",
                                 "tags": ("t:lack",), **overrides}
    with pytest.raises(ConfigError, match="Nova refused the launch"):
        backend.cloud.launch(LaunchRequest(**fields))  # type: ignore[arg-type]
    assert backend.cloud.servers(tags=["t:lack"]) == []


def test_a_launch_into_a_zone_the_region_lacks_is_a_config_error_creating_nothing(
        nova_cloud: NovaBackend) -> None:
    lacking(nova_cloud, {"az": "az9"})


@pytest.mark.parametrize("nova_cloud", ["emulator"], indirect=True)
def test_a_launch_with_a_security_group_the_region_lacks_is_a_config_error(
        nova_cloud: NovaBackend) -> None:
    lacking(nova_cloud, {"security_groups": ("web-sg",)})
