"""Issue 23 item 2: the `disruption` block (design: Disruption), top level and per workload, parsed
into
`scoctl.core.model.disruption`; a bad cron, zone, duration, percentage, reason or key is exit 2
naming the field; legacy `disruption_budget` is one budget."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from scoctl.config.schema import Config, parse_config
from scoctl.config.yamlsrc import load_located
from scoctl.core.cron import parse_cron
from scoctl.core.model.disruption import (
    Budget,
    DisruptionSettings,
    Drift,
    Rate,
    Rebalance,
    Units,
)
from scoctl.core.model.vocabulary import DisruptionReason
from scoctl.errors import EXIT_USAGE, ConfigError
from tests.builders import BOOTSTRAP

BASE = """\
regions: [{name: r1}]
flavors: [{name: f1, vcpus: 4, ram: 16Gi}]
pools: [{name: p1, az: az1, flavor: f1, group: g1, tier: committed, depth: 2}]
ranking: {id: rk, scores: {p1: 1.0}}
"""
WORKLOADS = "workloads: [{name: web}, {name: api}]\n"


def parse(extra: str, workloads: str = WORKLOADS) -> Config:
    return parse_config(load_located(BASE + workloads + extra + BOOTSTRAP, "c.yaml"), path=None)


def test_a_config_without_either_keeps_ten_percent_of_registered_units() -> None:
    config = parse("")
    assert config.disruption == DisruptionSettings()
    assert config.disruption.budgets == (Budget(Units.share(10)),)
    assert [config.disruption.budgets[0].limit(n) for n in (0, 1, 10, 11, 30)] == [0, 1, 1, 2, 3]
    assert config.disruption_budget is None


def test_legacy_disruption_budget_is_one_budget_of_that_percentage() -> None:
    config = parse("disruption_budget: 0.5\n")
    assert config.disruption.budgets == (Budget(Units.share(50)),)
    assert str(config.disruption.budgets[0].units) == "50%"
    # the share of the old rule, rounded up and at least one, for any workload size
    tiny = parse("disruption_budget: 0.0001\n").disruption.budgets[0]
    assert [tiny.limit(n) for n in (0, 1, 10000, 10001)] == [0, 1, 1, 2]
    # the other keys of the block still apply beside it
    both = parse("disruption_budget: 0.25\ndisruption: {expire_after: 720h}\n")
    assert both.disruption.budgets == (Budget(Units.share(25)),)
    assert both.disruption.expire_after == 720 * 3600


def test_legacy_and_budgets_together_exit_2_naming_both() -> None:
    with pytest.raises(ConfigError) as caught:
        parse("disruption_budget: 0.5\ndisruption: {budgets: [{units: 2}]}\n")
    assert caught.value.field == "disruption_budget" and caught.value.exit_code == EXIT_USAGE
    assert "disruption.budgets" in str(caught.value)


def test_the_whole_block_is_read_into_frozen_values() -> None:
    config = parse("""\
disruption:
  budgets:
    - {reasons: [empty], units: 2}
    - {reasons: [drifted], units: 2, rate: {units: 3, per: 10m}}
    - {reasons: [drifted, expired], units: 0, schedule: "0 9 * * 1-5", duration: 9h,
       time_zone: Europe/Berlin}
    - {units: "25%"}
  expire_after: 720h
  repair_after: 5m
  repair_max_unhealthy: 30%
  drift: {soak: 1m, halt_after: 4}
  rebalance: {stabilize: 20m, min_age: 2h, min_gain: 0.3}
""")
    drifted, expired = DisruptionReason.DRIFTED, DisruptionReason.EXPIRED
    assert config.disruption == DisruptionSettings(
        budgets=(Budget(Units.count(2), frozenset({DisruptionReason.EMPTY})),
                 Budget(Units.count(2), frozenset({drifted}),
                        rate=Rate(Units.count(3), 600.0)),
                 Budget(Units.count(0), frozenset({drifted, expired}),
                        schedule=parse_cron("0 9 * * 1-5"), duration=9 * 3600.0,
                        time_zone="Europe/Berlin"),
                 Budget(Units.share(25))),
        expire_after=720 * 3600.0, repair_after=300.0, repair_max_unhealthy=Units.share(30),
        drift=Drift(soak=60.0, halt_after=4),
        rebalance=Rebalance(stabilize=1200.0, min_age=7200.0, min_gain=0.3))


def test_the_defaults_of_the_block() -> None:
    settings = parse("disruption: {}\n").disruption
    assert settings == DisruptionSettings()
    assert (settings.expire_after, settings.repair_after, str(settings.repair_max_unhealthy)) == (
        None, 600.0, "20%")
    assert settings.drift == Drift(soak=120.0, halt_after=2)
    assert settings.rebalance == Rebalance(stabilize=600.0, min_age=3600.0, min_gain=0.1)


def test_a_workload_overrides_the_top_level_key_by_key() -> None:
    config = parse(
        "disruption: {budgets: [{units: 3}], repair_after: 2m, drift: {soak: 5m}}\n",
        workloads="workloads:\n  - name: web\n  - name: api\n    disruption:\n"
                  "      budgets: [{units: '50%', reasons: [empty]}]\n"
                  "      drift: {halt_after: 5}\n")
    top = config.disruption
    assert config.disruption_of("web") == top == config.disruption_of("not-configured")
    api = config.disruption_of("api")
    assert api.budgets == (Budget(Units.share(50), frozenset({DisruptionReason.EMPTY})),)
    assert api.repair_after == 120.0  # from the top level
    assert api.drift == Drift(soak=300.0, halt_after=5)  # soak from the top, halt_after its own
    assert config.workload("web") is not None and config.workload("web").disruption is None


def test_a_workloads_block_sits_over_the_legacy_budget_too() -> None:
    config = parse("disruption_budget: 0.5\n",
                   workloads="workloads: [{name: web, disruption: {repair_after: 1m}}]\n")
    assert config.disruption_of("web").budgets == (Budget(Units.share(50)),)
    assert config.disruption_of("web").repair_after == 60.0


@pytest.mark.parametrize(("units", "count", "percent"), [
    (0, 0, None), (7, 7, None), ("7", 7, None), ("0%", None, "0"), ("12.5%", None, "12.5"),
    ("100%", None, "100"), (" 5 % ", None, "5")])
def test_units_are_a_count_or_a_percentage(units: object, count: int | None,
                                           percent: str | None) -> None:
    budget = parse(f"disruption: {{budgets: [{{units: {units!r}}}]}}\n").disruption.budgets[0]
    want = Units.count(count) if count is not None else Units.share(Decimal(str(percent)))
    assert budget.units == want


def test_a_scheduled_budget_keeps_its_zone_and_defaults_to_utc() -> None:
    budgets = parse("disruption: {budgets: [{units: 0, schedule: '@daily', duration: 1h},"
                    " {units: 0, schedule: '0 22 * * *', duration: 8h,"
                    " time_zone: America/New_York}]}\n").disruption.budgets
    assert [b.time_zone for b in budgets] == ["UTC", "America/New_York"]
    assert budgets[0].schedule is not None
    assert budgets[0].schedule.next_after(datetime(2026, 1, 1, 0, 0, 1, tzinfo=UTC),
                                          ZoneInfo("UTC")) == datetime(2026, 1, 2, tzinfo=UTC)


BAD = {
    # name: (the disruption block, the field the error names, text in the message)
    "a cron of four fields": ("{budgets: [{units: 0, schedule: '0 9 * *', duration: 1h}]}",
                              "disruption.budgets[0].schedule", "4 fields"),
    "a minute of 60": ("{budgets: [{units: 1}, {units: 0, schedule: '60 9 * * *', duration: 1h}]}",
                       "disruption.budgets[1].schedule", "minute"),
    "a backwards range": ("{budgets: [{units: 0, schedule: '0 9 * * fri-mon', duration: 1h}]}",
                          "disruption.budgets[0].schedule", "backwards"),
    "a step of 0": ("{budgets: [{units: 0, schedule: '*/0 * * * *', duration: 1h}]}",
                    "disruption.budgets[0].schedule", "step"),
    "an unknown month name": ("{budgets: [{units: 0, schedule: '0 0 1 foo *', duration: 1h}]}",
                              "disruption.budgets[0].schedule", "month"),
    "a schedule that never fires": ("{budgets: [{units: 0, schedule: '0 0 30 2 *', "
                                    "duration: 1h}]}",
                                    "disruption.budgets[0].schedule", "never fires"),
    "an unknown macro": ("{budgets: [{units: 0, schedule: '@fortnightly', duration: 1h}]}",
                         "disruption.budgets[0].schedule", "macro"),
    "a schedule without a duration": ("{budgets: [{units: 0, schedule: '@daily'}]}",
                                      "disruption.budgets[0].duration", "required"),
    "a duration without a schedule": ("{budgets: [{units: 0, duration: 1h}]}",
                                      "disruption.budgets[0].schedule", "required"),
    "a bad duration": ("{budgets: [{units: 0, schedule: '@daily', duration: 9 hours}]}",
                       "disruption.budgets[0].duration", "not a duration"),
    "a zero duration": ("{budgets: [{units: 0, schedule: '@daily', duration: 0s}]}",
                        "disruption.budgets[0].duration", "more than 0"),
    "an unknown zone": ("{budgets: [{units: 0, schedule: '@daily', duration: 1h, "
                        "time_zone: Europe/Atlantis}]}",
                        "disruption.budgets[0].time_zone", "unknown time zone"),
    "a zone path": ("{budgets: [{units: 0, schedule: '@daily', duration: 1h, "
                    "time_zone: ../../etc/passwd}]}",
                    "disruption.budgets[0].time_zone", "unknown time zone"),
    "a zone without a schedule": ("{budgets: [{units: 0, time_zone: UTC}]}",
                                  "disruption.budgets[0].time_zone", "only with schedule"),
    "a percentage above 100": ("{budgets: [{units: '150%'}]}", "disruption.budgets[0].units",
                               "percentage"),
    "a negative count": ("{budgets: [{units: -1}]}", "disruption.budgets[0].units", "count"),
    "a fraction": ("{budgets: [{units: 0.5}]}", "disruption.budgets[0].units", "count"),
    "a percentage without digits": ("{budgets: [{units: '%'}]}", "disruption.budgets[0].units",
                                    "percentage"),
    "no units": ("{budgets: [{reasons: [empty]}]}", "disruption.budgets[0].units", "required"),
    "an unknown reason": ("{budgets: [{units: 1, reasons: [empty, bored]}]}",
                          "disruption.budgets[0].reasons[1]", "unknown reason"),
    "noticed named": ("{budgets: [{units: 1, reasons: [noticed]}]}",
                      "disruption.budgets[0].reasons[0]", "never held back"),
    "reasons not a list": ("{budgets: [{units: 1, reasons: empty}]}",
                           "disruption.budgets[0].reasons", "list"),
    "an unknown budget key": ("{budgets: [{units: 1, nodes: 2}]}",
                              "disruption.budgets[0].nodes", "unknown field"),
    "an unknown block key": ("{budget: [{units: 1}]}", "disruption.budget", "unknown field"),
    "a rate without per": ("{budgets: [{units: 1, rate: {units: 3}}]}",
                           "disruption.budgets[0].rate.per", "required"),
    "a rate of zero seconds": ("{budgets: [{units: 1, rate: {units: 3, per: 0s}}]}",
                               "disruption.budgets[0].rate.per", "more than 0"),
    "a bad rate count": ("{budgets: [{units: 1, rate: {units: many, per: 1m}}]}",
                         "disruption.budgets[0].rate.units", "count"),
    "an unknown rate key": ("{budgets: [{units: 1, rate: {units: 1, per: 1m, burst: 2}}]}",
                            "disruption.budgets[0].rate.burst", "unknown field"),
    "a bad expire_after": ("{expire_after: soon}", "disruption.expire_after", "not a duration"),
    "a zero expire_after": ("{expire_after: 0s}", "disruption.expire_after", "more than 0"),
    "a zero repair_after": ("{repair_after: 0}", "disruption.repair_after", "more than 0"),
    "a bad repair_max_unhealthy": ("{repair_max_unhealthy: lots}",
                                   "disruption.repair_max_unhealthy", "percentage"),
    "a bad drift soak": ("{drift: {soak: -1m}}", "disruption.drift.soak", "duration"),
    "a halt_after of 0": ("{drift: {halt_after: 0}}", "disruption.drift.halt_after", "whole"),
    "an unknown drift key": ("{drift: {canary: 1}}", "disruption.drift.canary", "unknown field"),
    "a negative min_gain": ("{rebalance: {min_gain: -0.1}}", "disruption.rebalance.min_gain",
                            "between"),
    "a bad stabilize": ("{rebalance: {stabilize: later}}", "disruption.rebalance.stabilize",
                        "duration"),
    "budgets not a list": ("{budgets: {units: 1}}", "disruption.budgets", "list"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_bad_disruption_field_is_exit_2_naming_it(case: str) -> None:
    block, field, text = BAD[case]
    with pytest.raises(ConfigError) as caught:
        parse(f"disruption: {block}\n")
    assert caught.value.exit_code == EXIT_USAGE
    assert caught.value.field == field, str(caught.value)
    assert text in str(caught.value), str(caught.value)


@pytest.mark.parametrize("case", ["a cron of four fields", "an unknown zone", "noticed named",
                                  "a bad drift soak"])
def test_a_workloads_bad_disruption_field_is_named_under_the_workload(case: str) -> None:
    block, field, text = BAD[case]
    with pytest.raises(ConfigError) as caught:
        parse("", workloads=f"workloads: [{{name: web}}, {{name: api, disruption: {block}}}]\n")
    assert caught.value.field == "workloads[1]." + field, str(caught.value)
    assert text in str(caught.value)


def test_config_check_exits_2_naming_the_schedule(cli, tmp_path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(BASE + WORKLOADS + BOOTSTRAP + "disruption:\n  budgets:\n"
                    "    - {units: 1}\n    - {units: 0, schedule: '0 25 * * *', duration: 1h}\n")
    result = cli("--config", str(path), "config", "check")
    assert result.code == 2, (result.stdout, result.stderr)
    assert "c.yaml:10: disruption.budgets[1].schedule: hour: 25 is outside 0-23" in result.stderr
    assert "Traceback" not in result.stderr
