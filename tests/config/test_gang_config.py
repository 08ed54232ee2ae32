"""design: Gangs in the config: the `gang` section and its defaults; a bad value is exit 2 naming
the field."""

from __future__ import annotations

import pytest

from scoctl.config.schema import Config, parse_config
from scoctl.config.yamlsrc import load_located
from scoctl.core.gang import GangPolicy
from scoctl.errors import EXIT_USAGE, ConfigError
from tests.builders import BOOTSTRAP

BASE = """\
regions: [{name: r1}]
flavors: [{name: f1, vcpus: 4, ram: 16Gi}]
pools: [{name: p1, az: az1, flavor: f1, group: g1, tier: committed, depth: 2}]
ranking: {id: rk, scores: {p1: 1.0}}
workloads: [{name: web}]
"""


def parse(extra: str = "") -> Config:
    return parse_config(load_located(BASE + extra + BOOTSTRAP, "c.yaml"), path=None)


def test_gang_defaults_are_the_design_ones() -> None:
    assert parse().gang.policy() == GangPolicy("same_group", 2, 600.0, 3, 1200.0)


def test_gang_settings_are_read() -> None:
    config = parse("gang: {placement: same_az, max_pools: 1, deadline: 5m, retries: 0,"
                   " booking: 1h}\n")
    assert config.gang.policy() == GangPolicy("same_az", 1, 300.0, 0, 3600.0)


@pytest.mark.parametrize(("text", "field"), [
    ("gang: {placement: rack}\n", "gang.placement"),
    ("gang: {max_pools: 0}\n", "gang.max_pools"),
    ("gang: {deadline: 0s}\n", "gang.deadline"),
    ("gang: {retries: -1}\n", "gang.retries"),
    ("gang: {size: 3}\n", "size"),
])
def test_a_bad_gang_setting_names_its_field(text: str, field: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse(text)
    assert field in str(caught.value)
    assert caught.value.exit_code == EXIT_USAGE
