"""`scoctl config check --online` (issue 49 item 1): every image, flavor, network, security
group and zone the config names, checked against its region's Nova (the emulator, over
openstacksdk). Before, ``config check`` passed a config whose image the region lacks; the
controller then took the first launch's failure for a Nova outage."""

from __future__ import annotations

from pathlib import Path

import pytest

from scoctl.sim.nova_emulator import IMAGE_ID, NovaEmulator
from tests.builders import nova_config
from tests.fixtures.nova import write_clouds_yaml
from tests.fixtures.state import Cli

pytestmark = pytest.mark.nova


def config_with(tmp_path: Path, emulator: NovaEmulator, *, image: str = IMAGE_ID,
                az: str = "nova", groups: str = "[default]") -> Path:
    write_clouds_yaml(tmp_path, "online", emulator.url, "p-online")
    path = nova_config(tmp_path, "online")
    text = path.read_text().replace(f"image: {IMAGE_ID}, networks: [none]",
                                    f"image: {image}, networks: [private], "
                                    f"security_groups: {groups}")
    path.write_text(text.replace("az: nova,", f"az: {az},"))
    return path


def test_a_config_whose_names_the_region_has_passes_online(
        cli: Cli, tmp_path: Path, nova_emulator: NovaEmulator) -> None:
    done = cli("--config", str(config_with(tmp_path, nova_emulator)), "config", "check",
               "--online")
    assert done.code == 0, done.stderr
    assert "every name the config gives is in its region (region-a)" in done.stdout


def test_each_name_the_region_lacks_is_named_with_its_field_and_exit_2(
        cli: Cli, tmp_path: Path, nova_emulator: NovaEmulator) -> None:
    config = config_with(tmp_path, nova_emulator, image="ubuntu-26.04", az="az9",
                         groups="[default, web-sg]")
    offline = cli("--config", str(config), "config", "check")
    assert offline.code == 0, offline.stderr  # nothing to see without asking Nova
    done = cli("--config", str(config), "config", "check", "--online")
    assert done.code == 2, (done.stdout, done.stderr)
    assert "regions[0].launch.image: image 'ubuntu-26.04' not found in region region-a " \
           "(it has: fakeimage123456)" in done.stderr
    assert "regions[0].launch.security_groups: security group 'web-sg' not found" in done.stderr
    assert "pools[0].az: availability zone 'az9' not found" in done.stderr
    assert "network" not in done.stderr  # `private` is there
