"""design: Constraints in the config: `pools[].labels`, `workloads[].node_labels` and
`workloads[].limits` parsed into the core values; a bad limit is exit 2 naming the field."""

from __future__ import annotations

import pytest

from scoctl.config.schema import Config, parse_config
from scoctl.config.yamlsrc import load_located
from scoctl.core.model import Limits
from scoctl.errors import EXIT_USAGE, ConfigError
from tests.builders import BOOTSTRAP

BASE = """\
regions: [{name: r1}]
flavors: [{name: f1, vcpus: 4, ram: 16Gi}]
pools: [{name: p1, az: az1, flavor: f1, group: g1, tier: committed, depth: 2,
         labels: {accelerator: a100}}]
ranking: {id: rk, scores: {p1: 1.0}}
"""


def parse(workload: str) -> Config:
    text = BASE + f"workloads: [{workload}]\n" + BOOTSTRAP
    return parse_config(load_located(text, "c.yaml"), path=None)


def test_labels_and_limits_are_read_into_the_core_values() -> None:
    config = parse("{name: web, node_labels: {team: shop}, limits: {cpu: '64', memory: 256Gi,"
                   " accelerators: {nvidia.com/gpu: 8}, units: 10}}")
    assert config.pools[0].labels == {"accelerator": "a100"}
    (web,) = config.workloads
    assert web.node_labels == {"team": "shop"}
    assert web.limits == Limits(resources={"cpu": 64_000, "memory": 256 * 2**30,
                                           "nvidia.com/gpu": 8}, units=10)


def test_no_limits_limit_nothing() -> None:
    (web,) = parse("{name: web}").workloads
    assert not web.limits


@pytest.mark.parametrize(("limits", "field"), [
    ("{cpu: lots}", "workloads[0].limits.cpu"),
    ("{memory: -1Gi}", "workloads[0].limits.memory"),
    ("{units: -1}", "workloads[0].limits.units"),
    ("{units: 2.5}", "workloads[0].limits.units"),
    ("{gpus: 8}", "workloads[0].limits.gpus"),
    ("{accelerators: {nvidia.com/gpu: half}}", "workloads[0].limits.accelerators.nvidia.com/gpu"),
])
def test_a_bad_limit_is_exit_2_naming_the_field(limits: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(f"{{name: web, limits: {limits}}}")
    assert caught.value.exit_code == EXIT_USAGE and caught.value.field == field


def test_pool_limits_are_read_into_the_pool() -> None:
    text = BASE.replace("labels: {accelerator: a100}}]",
                        "labels: {accelerator: a100}, limits: {cpu: '32', units: 6}}]")
    config = parse_config(load_located(text + "workloads: [{name: web}]\n" + BOOTSTRAP,
                                       "c.yaml"), path=None)
    assert config.pools[0].limits == Limits(resources={"cpu": 32_000}, units=6)
    assert not parse("{name: web}").pools[0].limits


@pytest.mark.parametrize(("limits", "field"), [
    ("{cpu: lots}", "pools[0].limits.cpu"),
    ("{units: -1}", "pools[0].limits.units"),
    ("{vcpus: 8}", "pools[0].limits.vcpus"),
])
def test_a_bad_pool_limit_is_exit_2_naming_the_field(limits: str, field: str) -> None:
    text = BASE.replace("labels: {accelerator: a100}}]",
                        f"labels: {{accelerator: a100}}, limits: {limits}}}]")
    with pytest.raises(ConfigError) as caught:
        parse_config(load_located(text + "workloads: [{name: web}]\n" + BOOTSTRAP, "c.yaml"),
                     path=None)
    assert caught.value.exit_code == EXIT_USAGE and caught.value.field == field
