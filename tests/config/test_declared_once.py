"""Issue 21 item 6: each config field is declared once, on its dataclass with its default; the
field table and the parser both read it from there."""

from __future__ import annotations

import dataclasses

import pytest

from scoctl.config.fields import Spec, default_of, keys_of, setting, spec_of
from scoctl.config.schema import (
    CONTRACT_SPECS,
    FIELDS,
    SECTIONS,
    Bootstrap,
    Config,
    GateSettings,
    Intake,
    KubernetesSettings,
    Lease,
    Retention,
    SlurmSettings,
    Timeouts,
    WorkloadSpec,
    parse_config,
)
from scoctl.config.yamlsrc import load_located
from scoctl.core.model import Contract
from scoctl.core.planner import DEFAULT_DEPTH_PREMIUM
from scoctl.errors import ConfigError
from tests.builders import BOOTSTRAP, JOIN_CA_HASH, JOIN_ENDPOINT

SMALLEST = """\
regions: [{name: r1}]
flavors: [{name: f1, vcpus: 4, ram: 16Gi}]
pools: [{name: p1, az: az1, flavor: f1, group: g1, tier: committed, depth: 2}]
contracts: {T1: {}}
ranking: {id: rk, scores: {p1: 1.0}}
workloads: [{name: w1}]
"""


def smallest(extra: str = "") -> Config:
    # w1 serves Kubernetes (source k8s by default), so the bundled user-data template needs
    # the two join fields: the only settings the smallest config must give
    return parse_config(load_located(SMALLEST + extra + BOOTSTRAP, "c.yaml"), path=None)


def test_a_config_that_sets_nothing_gets_every_dataclass_default():
    config = smallest()
    sections = {"timeouts": Timeouts, "retention": Retention, "intake": Intake,
                "gate": GateSettings, "lease": Lease, "kubernetes": KubernetesSettings,
                "slurm": SlurmSettings, "bootstrap": Bootstrap}
    given = {"bootstrap": {"api_endpoint": JOIN_ENDPOINT, "ca_cert_hash": JOIN_CA_HASH}}
    for section, settings in sections.items():
        assert getattr(config, section) == settings(**given.get(section, {})), section
    slurm_only = SMALLEST.replace("{name: w1}", "{name: w1, source: slurm}")
    assert parse_config(load_located(slurm_only, "c.yaml"), path=None).bootstrap == Bootstrap()
    assert config.contracts["T1"] == Contract(name="T1")
    assert config.workloads == (WorkloadSpec(name="w1"),)
    defaults = {f.name: default_of(f) for f in dataclasses.fields(Config) if spec_of(f)}
    assert {name: getattr(config, name) for name in defaults} == defaults
    assert config.depth_premium == DEFAULT_DEPTH_PREMIUM
    region = config.regions[0]
    assert (region.cloud, region.mutating_calls_per_second, region.launch) == ("r1", 10, None)


def test_the_field_table_is_each_sections_dataclass_fields():
    assert FIELDS[("timeouts",)] == {f.name for f in dataclasses.fields(Timeouts)}
    assert FIELDS[("contracts", "*")] == {f.name for f in dataclasses.fields(Contract)} - {"name"}
    assert "path" not in FIELDS[()]  # where the config came from, never a key in it
    assert {"planner", "metrics"} <= FIELDS[()]
    assert FIELDS[("planner",)] == {"depth_premium"} and FIELDS[("metrics",)] == {"textfile"}
    for section, cls in SECTIONS.items():
        assert FIELDS[section] <= keys_of(cls), section


def test_every_contract_rule_has_a_spec_and_contracts_default():
    assert set(CONTRACT_SPECS) == FIELDS[("contracts", "*")]


def test_a_field_written_once_is_a_key_the_parser_reads_with_its_default():
    @dataclasses.dataclass(frozen=True)
    class Section:
        grace: float = setting(42.0, "duration")
        label: str = setting("x", "string")

    assert keys_of(Section) == {"grace", "label"}
    assert [spec_of(f) for f in dataclasses.fields(Section)] == [Spec("duration"), Spec("string")]
    assert [default_of(f) for f in dataclasses.fields(Section)] == [42.0, "x"]


@pytest.mark.parametrize(("extra", "field", "message"), [
    ("planner: {depth_premium: 2}\n", "planner.depth_premium", "must be between 0 and 1"),
    ("planner: {depth: 1}\n", "planner.depth", "unknown field (expected one of: depth_premium)"),
    ("metrics: {textfile: ''}\n", "metrics.textfile", "must be a non-empty string"),
    ("quota_block: later\n", "quota_block", "must be fail or queue"),
    ("timeouts: {api: 0}\n", "timeouts.api", "must be more than 0"),
    ("slurm: {rest_api_version: v0.0.1}\n", "slurm.rest_api_version",
     "'v0.0.1': give a slurmrestd data-parser version v0.0.38 or later"),
])
def test_a_field_read_from_its_declaration_names_file_line_and_field(extra, field, message):
    with pytest.raises(ConfigError) as caught:
        smallest(extra)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"c.yaml:7: {field}: {message}"), str(caught.value)


def test_metrics_and_planner_fields_land_on_the_config():
    config = smallest("planner: {depth_premium: 0.2}\nmetrics: {textfile: /tmp/m.prom}\n")
    assert config.depth_premium == 0.2 and str(config.metrics_file) == "/tmp/m.prom"
