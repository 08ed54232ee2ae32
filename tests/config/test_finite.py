"""Issue 17 item 4: NaN and infinity are refused in every config field, claims file, ranking
document and argument — with exit 2 naming where — instead of passing validation and crashing
(or silently misbehaving) later."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from scoctl.config.claims_file import load_claims
from scoctl.config.schema import FIELDS, parse_config, parse_duration
from scoctl.config.yamlsrc import load_data_file, load_located
from scoctl.core.model import Contract
from scoctl.core.quantity import QuantityError, parse_cpu, parse_memory, parse_slurm_mem_mb
from scoctl.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "configs" / "example.yaml"
NON_FINITE = [math.nan, math.inf, -math.inf]


def every_field() -> list[tuple[str, ...]]:
    return sorted((*section, key) for section, keys in FIELDS.items() for key in keys)


def _set(data: Any, field: tuple[str, ...], value: object) -> str:
    """Set `field` (FIELDS notation) in `data`; returns its dotted name as errors show it."""
    node, shown = data, ""
    for part in field[:-1]:
        if part == "[]":
            node, shown = node[0], shown + "[0]"
        elif part == "*":
            name = next(iter(node))
            node, shown = node[name], f"{shown}.{name}"
        else:
            node, shown = node.setdefault(part, {}), (f"{shown}.{part}" if shown else part)
    node[field[-1]] = value
    return f"{shown}.{field[-1]}" if shown else field[-1]


@pytest.mark.parametrize("value", NON_FINITE, ids=str)
@pytest.mark.parametrize("field", every_field(), ids=".".join)
def test_every_config_field_refuses_nan_and_infinity_naming_the_field(field, value):
    data = yaml.safe_load(EXAMPLE.read_text())
    shown = _set(data, field, value)
    with pytest.raises(ConfigError) as caught:
        parse_config(load_located(yaml.safe_dump(data), "c.yaml"), path=None)
    assert caught.value.field == shown, str(caught.value)


@pytest.mark.parametrize(("line", "field"), [
    ("disruption_budget: .nan", "disruption_budget"),
    ("timeouts: {negative_cache: .inf}", "timeouts.negative_cache"),
    ("contracts: {T1: {floor: .nan}}", "contracts.T1.floor"),
    ("node_reserve: {cpu: .inf}", "node_reserve.cpu"),
    ("node_reserve: {memory: .nan}", "node_reserve.memory"),
])
def test_config_check_refuses_a_non_finite_value_with_exit_2(cli, tmp_path, line, field):
    text = EXAMPLE.read_text()
    config = tmp_path / "c.yaml"
    config.write_text(text + "\n" + line + "\n" if line.split(":")[0] not in yaml.safe_load(text)
                      else _replace_top(text, line))
    result = cli("--config", str(config), "config", "check")
    assert result.code == 2, (result.stdout, result.stderr)
    assert f": {field}:" in result.stderr and "Traceback" not in result.stderr


def _replace_top(text: str, line: str) -> str:
    data = yaml.safe_load(text)
    key, value = line.split(":", 1)
    data[key] = yaml.safe_load(value)
    return yaml.safe_dump(data)


CLAIM = {"workload": "w", "requests": {"cpu": 4, "memory": "16Gi"},
         "largest_pod": {"cpu": 1, "memory": "4Gi"}}


@pytest.mark.parametrize(("field", "value"), [
    (("requests", "cpu"), math.nan), (("requests", "memory"), math.inf),
    (("largest_pod", "cpu"), -math.inf), (("pods",), math.nan), (("pods",), math.inf),
])
def test_a_yaml_claims_file_refuses_non_finite_numbers_naming_the_field(tmp_path, field, value):
    claim = yaml.safe_load(yaml.safe_dump(CLAIM))
    node = claim
    for part in field[:-1]:
        node = node[part]
    node[field[-1]] = value
    path = tmp_path / "claims.yaml"
    path.write_text(yaml.safe_dump({"claims": [claim]}))
    with pytest.raises(ConfigError) as caught:
        load_claims(path, {"T1": Contract(name="T1")})
    assert caught.value.field == "claims[0]." + ".".join(field)


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_json_files_refuse_nan_and_infinity_which_json_does_not_have(tmp_path, constant):
    path = tmp_path / "claims.json"
    text = '{"claims": [{"workload": "w", "requests": {"cpu": CPU}, "largest_pod": {"cpu": 1}}]}'
    path.write_text(text.replace("CPU", constant))
    with pytest.raises(ConfigError) as caught:
        load_data_file(path, "claims")
    assert caught.value.file == str(path) and constant.lstrip("-") in str(caught.value)


@pytest.mark.parametrize("score", [".nan", ".inf", "-.inf", "9.223372036854776e+18", "-2e9"])
def test_a_ranking_file_refuses_a_non_finite_or_absurd_score(tmp_path, score):
    from scoctl.config.ranking import parse_ranking

    path = tmp_path / "ranking.yaml"
    path.write_text(f"id: r-1\nscores: {{p: {score}}}\n")
    with pytest.raises(ConfigError) as caught:
        parse_ranking(load_data_file(path, "ranking"), str(path))
    assert caught.value.field == "scores.p"


def test_a_ranking_score_at_the_bound_is_a_score() -> None:
    from scoctl.config.ranking import MAX_SCORE, parse_ranking

    assert parse_ranking({"id": "r-1", "scores": {"p": -MAX_SCORE, "q": 0.91}}, "r").scores == {
        "p": -MAX_SCORE, "q": 0.91}


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, "nan", "inf", "1e400"])
def test_quantities_and_durations_refuse_non_finite_values(value):
    for parse in (parse_cpu, parse_memory):
        with pytest.raises(QuantityError):
            parse(value)
    with pytest.raises(ValueError):
        parse_duration(value)


@pytest.mark.parametrize("args", [
    ["run", "--once", "--wait", "nan"], ["run", "--once", "--wait", "inf"],
    ["plan", "--wait", "-inf"], ["acquire", "--dry-run", "--watch", "nan"],
    ["init", "--wait", "nan"], ["sim", "down", "--timeout", "inf"],
])
def test_a_non_finite_number_of_seconds_as_an_argument_exits_2_naming_it(cli, tmp_path, args):
    result = cli("--state", str(tmp_path / "s.db"), *args)
    assert result.code == 2, (result.stdout, result.stderr)
    assert f"'{args[-2]}'" in result.stderr and "finite" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_slurm_memory_size_with_absurdly_many_digits_is_refused_fast():
    with pytest.raises(QuantityError):
        parse_slurm_mem_mb("9" * 5000 + "G")
