"""configs/example.yaml documents every field the config accepts (design: Schemas, issue 2 item 5).

The parser's own table of fields (`scoctl.config.schema.FIELDS`) is walked: a field added
to the parser without an example line fails here, and so does an example key the parser would
not accept.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from scoctl.config.schema import FIELDS, TOP_LEVEL, load_config, parse_config
from scoctl.config.yamlsrc import load_located
from scoctl.errors import ConfigError

EXAMPLE = Path(__file__).resolve().parents[2] / "configs" / "example.yaml"


def example_keys(data: Any, section: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    """Every (section, key) path in the example, list items as "[]", contracts as "*"."""
    found: set[tuple[str, ...]] = set()
    if isinstance(data, dict):
        for key, value in data.items():
            found.add((*section, str(key)))
            child = (*section, str(key))
            if (*child, "*") in {s[:len(child) + 1] for s in FIELDS}:
                for item in value.values():
                    found |= example_keys(item, (*child, "*"))
            else:
                found |= example_keys(value, child)
    elif isinstance(data, list):
        for item in data:
            found |= example_keys(item, (*section, "[]"))
    return found


def commented_keys(text: str) -> set[str]:
    """Keys shown only in comments (``# file: …`` for the alternatives of one field)."""
    return set(re.findall(r"#\s*([a-z_]+):", text))


def all_fields() -> list[tuple[str, ...]]:
    return sorted((*section, key) for section, keys in FIELDS.items() for key in keys)


def test_the_field_table_covers_every_section_the_parser_reads():
    assert FIELDS[()] == TOP_LEVEL
    # a section with fields is a field of its parent section
    for section in FIELDS:
        if section:
            wrapped = section[-1] in ("[]", "*")
            name = section[-2] if wrapped else section[-1]
            parent = section[:-2] if wrapped else section[:-1]
            assert name in FIELDS[parent], section


@pytest.mark.parametrize("field", all_fields(), ids=".".join)
def test_every_config_field_is_documented_in_the_example(field):
    text = EXAMPLE.read_text()
    present = example_keys(yaml.safe_load(text))
    assert field in present or field[-1] in commented_keys(text), (
        f"configs/example.yaml does not show {'.'.join(field)}")


def test_every_example_key_is_a_field_the_parser_accepts():
    data = yaml.safe_load(EXAMPLE.read_text())
    free = {("flavors", "[]", "accelerators"), ("flavors", "[]", "allocatable"),
            ("node_reserve",), ("ranking", "scores"), ("slurm", "gres_map"),
            # the user's own label keys and accelerator names (design: Constraints)
            ("pools", "[]", "labels"), ("workloads", "[]", "node_labels"),
            ("pools", "[]", "limits", "accelerators"),
            ("workloads", "[]", "limits", "accelerators"),
            ("buffers", "[]", "limits", "accelerators"), ("buffers", "[]", "chunk", "accelerators")}
    keys = example_keys(data)
    assert keys
    for path in keys:
        section, key = path[:-1], path[-1]
        if section in free or (section and section[:-1] in free) or section == ("contracts",):
            continue
        assert section in FIELDS and key in FIELDS[section], ".".join(path)
    load_config(EXAMPLE)  # and the whole example is valid


def _first_mapping(data: Any, section: tuple[str, ...]) -> dict[str, Any]:
    node = data
    for part in section:
        if part == "[]":
            node = node[0]
        elif part == "*":
            node = next(iter(node.values()))
        else:
            node = node.setdefault(part, {})
    assert isinstance(node, dict)
    return node


@pytest.mark.parametrize("section", sorted(FIELDS), ids=lambda s: ".".join(s) or "top")
def test_the_parser_refuses_a_field_its_table_does_not_name(section):
    data = yaml.safe_load(EXAMPLE.read_text())
    _first_mapping(data, section)["no_such_field"] = 1
    with pytest.raises(ConfigError) as caught:
        parse_config(load_located(yaml.safe_dump(data), "c.yaml"), path=None)
    assert caught.value.field is not None and caught.value.field.endswith("no_such_field")
    assert "unknown field" in str(caught.value)
