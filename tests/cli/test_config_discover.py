"""`scoctl config discover` against a Nova (our emulator, through openstacksdk): the printed
`flavors:` section holds the region's flavors with their accelerators, and a config built on
it passes `config check --online`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from scoctl.sim.nova_emulator import IMAGE_ID, NovaEmulator
from tests.builders import nova_config
from tests.fixtures.nova import RealNova, write_clouds_yaml
from tests.fixtures.state import Cli

pytestmark = pytest.mark.nova

GPU_FLAVORS = [
    {"id": "g1", "name": "g1.4xa100", "vcpus": 32, "ram": 262144, "disk": 100,
     "extra_specs": {"pci_passthrough:alias": "a100:4"}},
    {"id": "g2", "name": "v1.vgpu", "vcpus": 8, "ram": 32768, "disk": 40,
     "extra_specs": {"resources:VGPU": "1"}},
]


@pytest.fixture
def gpu_nova() -> Iterator[NovaEmulator]:
    from scoctl.sim.nova_emulator import DEFAULT_SEED

    emulator = NovaEmulator({"flavors": [*DEFAULT_SEED["flavors"], *GPU_FLAVORS],
                             "availability_zones": ["az1", "az2"]}).start()
    try:
        yield emulator
    finally:
        emulator.stop()


def test_discover_prints_the_flavors_and_a_config_on_them_passes_online(
        cli: Cli, tmp_path: Path, gpu_nova: NovaEmulator) -> None:
    write_clouds_yaml(tmp_path, "disc", gpu_nova.url, "p-disc")
    config = nova_config(tmp_path, "disc")
    done = cli("--config", str(config), "config", "discover")
    assert done.code == 0, done.stderr
    section = yaml.safe_load(done.stdout)["flavors"]
    by_name = {f["name"]: f for f in section}
    assert by_name["g1.4xa100"] == {"name": "g1.4xa100", "vcpus": 32, "ram": "256Gi",
                                    "accelerators": {"nvidia.com/gpu": 4}}
    assert by_name["v1.vgpu"]["accelerators"] == {"nvidia.com/gpu": 1}
    assert "# availability zones: az1, az2" in done.stdout
    # the discovered section in a config whose pools use it: the online check accepts it
    text = config.read_text()
    start = text.index("flavors:")
    end = text.index("pools:")
    text = (text[:start] + done.stdout.split("\n", 1)[1] + text[end:]).replace(
        "flavor: m1.tiny, group: g1", "flavor: g1.4xa100, group: g1").replace(
        "az: nova,", "az: az2,").replace(f"image: {IMAGE_ID}, networks: [none]",
                                         f"image: {IMAGE_ID}, networks: [private]")
    config.write_text(text)
    checked = cli("--config", str(config), "config", "check", "--online")
    assert checked.code == 0, (checked.stdout, checked.stderr)


def test_discover_json_with_a_named_accelerator_and_an_unknown_flavor(
        cli: Cli, tmp_path: Path, gpu_nova: NovaEmulator) -> None:
    write_clouds_yaml(tmp_path, "disc", gpu_nova.url, "p-disc")
    config = nova_config(tmp_path, "disc")
    done = cli("--config", str(config), "config", "discover", "--flavor", "g1.4xa100",
               "--accelerator", "a100=nvidia.com/a100", "--json")
    assert done.code == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["zones"] == ["az1", "az2"]
    assert body["flavors"] == [{"name": "g1.4xa100", "vcpus": 32, "ram": "262144Mi",
                                "accelerators": {"nvidia.com/a100": 4}, "skipped": {}}]
    missing = cli("--config", str(config), "config", "discover", "--flavor", "nosuch")
    assert missing.code == 2 and "nosuch" in missing.stderr
    bad = cli("--config", str(config), "config", "discover", "--accelerator", "a100")
    assert bad.code == 2 and "--accelerator" in bad.stderr


@pytest.mark.realnova
def test_discover_against_novas_own_harness_gives_a_section_online_accepts(
        cli: Cli, tmp_path: Path, real_nova: RealNova) -> None:
    """Nova's own service harness (python3-nova: its DefaultFlavorsFixture, one with extra
    specs): the section lists its flavors, and a pool on one passes `config check --online`."""
    write_clouds_yaml(tmp_path, "real", real_nova.url, "p-discover")
    config = nova_config(tmp_path, "real")
    done = cli("--config", str(config), "config", "discover")
    assert done.code == 0, done.stderr
    by_name = {f["name"]: f for f in yaml.safe_load(done.stdout)["flavors"]}
    assert by_name["m1.small"] == {"name": "m1.small", "vcpus": 1, "ram": "2Gi",
                                   "accelerators": {}}
    assert "m1.tiny.specs" in by_name  # extra specs that are no accelerator: none counted
    text = config.read_text()
    text = (text[:text.index("flavors:")] + done.stdout + text[text.index("pools:"):])
    config.write_text(text.replace("flavor: m1.tiny, group: g1", "flavor: m1.small, group: g1"))
    checked = cli("--config", str(config), "config", "check", "--online")
    assert checked.code == 0, (checked.stdout, checked.stderr)
