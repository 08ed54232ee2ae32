"""`config discover`'s pure part: accelerators read from Nova's extra specs (PCI aliases and
placement resource classes), and a `flavors:` section the config parser reads back as the same
flavors."""

from __future__ import annotations

from pathlib import Path

import yaml

from scoctl.config.schema import parse_config
from scoctl.config.yamlsrc import load_located
from scoctl.core.discover import accelerators_of, discover, flavors_yaml
from scoctl.core.model import FlavorInfo


def test_pci_aliases_and_gpu_resource_classes_are_counted_as_their_resource():
    specs = {"pci_passthrough:alias": "a100:2, t4:1", "resources:VGPU": "1",
             "resources:CUSTOM_FPGA": "2", "resources:VCPU": "8", "hw:numa_nodes": "1"}
    found, skipped = accelerators_of(specs, {"CUSTOM_FPGA": "xilinx.com/fpga"})
    assert found == {"nvidia.com/gpu": 4, "xilinx.com/fpga": 2}
    assert skipped == {}


def test_an_unreadable_spec_is_reported_not_guessed():
    found, skipped = accelerators_of({"pci_passthrough:alias": "a100:two",
                                      "resources:PGPU": "lots"}, {})
    assert found == {}
    assert set(skipped) == {"pci_passthrough:alias", "resources:PGPU"}


def test_the_section_parses_back_to_the_flavors_nova_reported(tmp_path: Path):
    flavors = [FlavorInfo("2", "g1.4xa100", 32, 262144, 100,
                          {"pci_passthrough:alias": "a100:4"}),
               FlavorInfo("1", "m1.tiny", 1, 512, 1, {}),
               FlavorInfo("3", "odd name: yes", 2, 4096, 1, {})]
    text = flavors_yaml(discover(flavors), zones=["az2", "az1"])
    assert text.startswith("# availability zones: az1, az2\nflavors:\n")
    listed = yaml.safe_load(text)["flavors"]
    assert [f["name"] for f in listed] == ["g1.4xa100", "m1.tiny", "odd name: yes"]
    config = ("regions: [{name: r, cloud: r}]\n" + text +
              "pools: [{name: p, region: r, az: az1, flavor: g1.4xa100, group: g, "
              "tier: reclaimable, depth: 1}]\nranking: {id: x, scores: {p: 1}}\n")
    parsed = parse_config(load_located(config, "c.yaml"), path=tmp_path / "c.yaml")
    gpu = parsed.flavors["g1.4xa100"]
    assert (gpu.vcpus, gpu.ram, dict(gpu.accelerators)) == (32, 256 * 2**30,
                                                            {"nvidia.com/gpu": 4})
    assert parsed.flavors["m1.tiny"].ram == 512 * 2**20
