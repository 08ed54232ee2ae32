"""`buffers:` in the config (design: Buffers): read into frozen values; bad input exits 2 naming
it."""

from __future__ import annotations

import pytest

from scoctl.config.schema import Config, parse_config
from scoctl.config.yamlsrc import load_located
from scoctl.core.model.buffers import Buffer
from scoctl.core.model.pools import Limits
from scoctl.errors import EXIT_USAGE, ConfigError
from tests.builders import BOOTSTRAP

BASE = """\
regions: [{name: r1}]
flavors: [{name: f1, vcpus: 4, ram: 16Gi}]
pools: [{name: p1, az: az1, flavor: f1, group: g1, tier: committed, depth: 2}]
ranking: {id: rk, scores: {p1: 1.0}}
workloads: [{name: web}, {name: api}]
"""


def parse(extra: str) -> Config:
    return parse_config(load_located(BASE + extra + BOOTSTRAP, "c.yaml"), path=None)


def test_no_buffers_by_default() -> None:
    assert parse("").buffers == ()


def test_buffers_are_read_into_frozen_values() -> None:
    config = parse("""\
buffers:
  - {workload: web, replicas: 3}
  - workload: api
    chunk: {cpu: 2, memory: 4Gi, accelerators: {nvidia.com/gpu: 1}}
    percentage: "20%"
    limits: {cpu: 16, units: 4}
    schedule: "0 8 * * 1-5"
    duration: 10h
    time_zone: Europe/Berlin
""")
    web, api = config.buffers
    assert web == Buffer("web", replicas=3)
    assert api.chunk == {"cpu": 2000, "memory": 4 * 1024**3, "nvidia.com/gpu": 1}
    assert api.percentage == 20 and api.limits == Limits(resources={"cpu": 16000}, units=4)
    assert api.schedule is not None and api.schedule.text == "0 8 * * 1-5"
    assert (api.duration, api.time_zone) == (36000, "Europe/Berlin")
    assert parse("buffers: [{workload: web, percentage: 12.5}]\n").buffers[0].percentage == 12.5


def test_a_buffers_tier_is_any_unless_it_names_a_pool_tier() -> None:
    config = parse("buffers: [{workload: web, replicas: 1}, "
                   "{workload: api, replicas: 1, tier: reclaimable}]\n")
    assert [b.tier for b in config.buffers] == ["any", "reclaimable"]
    assert parse("buffers: [{workload: web, replicas: 1, tier: committed}]\n"
                 ).buffers[0].tier == "committed"


BAD = {
    "an unknown workload": ("{workload: nope, replicas: 1}", "buffers[0].workload",
                            "unknown workload 'nope'"),
    "no workload": ("{replicas: 1}", "buffers[0].workload", "is required"),
    "nothing wanted": ("{workload: web}", "buffers[0]", "give replicas or percentage"),
    "negative replicas": ("{workload: web, replicas: -1}", "buffers[0].replicas",
                          "whole number"),
    "a bad percentage": ("{workload: web, percentage: 150}", "buffers[0].percentage",
                         "percentage from 0 to 100"),
    "a bad chunk": ("{workload: web, replicas: 1, chunk: {cpu: lots}}", "buffers[0].chunk.cpu",
                    ""),
    "an empty chunk": ("{workload: web, replicas: 1, chunk: {}}", "buffers[0].chunk",
                       "gives no resource"),
    "an unknown chunk key": ("{workload: web, replicas: 1, chunk: {disk: 1}}",
                             "buffers[0].chunk.disk", ""),
    "a bad cron": ("{workload: web, replicas: 1, schedule: '0 25 * * *', duration: 1h}",
                   "buffers[0].schedule", "hour: 25 is outside 0-23"),
    "a bad zone": ("{workload: web, replicas: 1, schedule: '@daily', duration: 1h, "
                   "time_zone: Mars/Olympus}", "buffers[0].time_zone", "unknown time zone"),
    "a bad duration": ("{workload: web, replicas: 1, schedule: '@daily', duration: soon}",
                       "buffers[0].duration", "not a duration"),
    "a schedule without duration": ("{workload: web, replicas: 1, schedule: '@daily'}",
                                    "buffers[0].duration", "is required with schedule"),
    "an unknown key": ("{workload: web, replicas: 1, tiers: any}", "buffers[0].tiers", ""),
    "a bad tier": ("{workload: web, replicas: 1, tier: spot}", "buffers[0].tier",
                   "must be one of any, committed, reclaimable, not 'spot'"),
    "an empty tier": ("{workload: web, replicas: 1, tier: ''}", "buffers[0].tier",
                      "non-empty string"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_buffer_field_is_exit_2_naming_it(case: str) -> None:
    item, field, text = BAD[case]
    with pytest.raises(ConfigError) as caught:
        parse(f"buffers: [{item}]\n")
    assert caught.value.exit_code == EXIT_USAGE
    assert caught.value.field == field, str(caught.value)
    assert text in str(caught.value), str(caught.value)


def test_two_buffers_for_one_workload_exit_2() -> None:
    with pytest.raises(ConfigError) as caught:
        parse("buffers: [{workload: web, replicas: 1}, {workload: web, replicas: 2}]\n")
    assert caught.value.field == "buffers[1].workload" and "first at buffers[0]" in str(
        caught.value)


def test_config_check_exits_2_naming_the_buffers_zone(cli, tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(BASE + BOOTSTRAP + "buffers:\n  - {workload: web, replicas: 1, "
                    "schedule: '@daily', duration: 1h, time_zone: Nowhere/Land}\n")
    result = cli("--config", str(path), "config", "check")
    assert result.code == 2, (result.stdout, result.stderr)
    assert "buffers[0].time_zone: unknown time zone 'Nowhere/Land'" in result.stderr
    assert "Traceback" not in result.stderr


def test_config_check_exits_2_naming_the_buffers_tier(cli, tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(BASE + BOOTSTRAP + "buffers:\n  - {workload: web, replicas: 1, tier: spot}\n")
    result = cli("--config", str(path), "config", "check")
    assert result.code == 2, (result.stdout, result.stderr)
    assert ("buffers[0].tier: must be one of any, committed, reclaimable, not 'spot'"
            in result.stderr), result.stderr
    assert "Traceback" not in result.stderr
