"""`adapters.factory.cloud_for` with several regions, each reached through its own clouds.yaml,
against the Nova emulator: the real openstacksdk, one connection per region, and the process
environment left as the operator set it."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from scoctl.adapters.factory import cloud_for
from scoctl.config.schema import load_config
from scoctl.errors import ConfigError
from scoctl.sim.nova_emulator import IMAGE_ID, NovaEmulator
from tests.fixtures.nova import write_clouds_yaml


def _project(emulator: NovaEmulator, instances: int) -> str:
    """A fresh project whose instance quota tells the connections apart."""
    project = "p" + uuid.uuid4().hex[:12]
    emulator.set_quota(project, instances=instances)
    return project


def _config(tmp_path: Path, regions: str) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(f"""
state: {tmp_path / "state.db"}
budget_dir: {tmp_path / "budget"}
regions:
{regions}
flavors:
  - {{name: m1.tiny, vcpus: 1, ram: 512Mi}}
pools:
  - {{name: tiny.a, region: region-a, az: nova, flavor: m1.tiny, group: g1, tier: reclaimable,
     depth: 20}}
ranking: {{id: r-1, scores: {{tiny.a: 0.5}}}}
""", encoding="utf-8")
    return path


def test_each_region_connects_through_its_own_clouds_yaml_and_leaves_the_environment(
        nova_emulator: NovaEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files = {name: tmp_path / name for name in ("a", "b", "env")}
    for directory in files.values():
        directory.mkdir()
    projects = {"a": _project(nova_emulator, 3), "b": _project(nova_emulator, 5),
                "env": _project(nova_emulator, 7)}
    write_clouds_yaml(files["a"], "alpha", nova_emulator.url, projects["a"])
    write_clouds_yaml(files["b"], "beta", nova_emulator.url, projects["b"])
    # region-c has no clouds_yaml: openstacksdk's own search, here the operator's variable
    operator_file = write_clouds_yaml(files["env"], "gamma", nova_emulator.url, projects["env"])
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(operator_file))
    launch = f"launch: {{image: {IMAGE_ID}, networks: [none]}}"
    config = load_config(_config(tmp_path, f"""
  - {{name: region-a, cloud: alpha, clouds_yaml: {files['a'] / 'clouds.yaml'}, {launch}}}
  - {{name: region-c, cloud: gamma, {launch}}}
  - {{name: region-b, cloud: beta, clouds_yaml: {files['b'] / 'clouds.yaml'}, {launch}}}
"""))
    before = dict(os.environ)

    quotas = {}
    for region in config.regions:  # a file, then the search, then another file
        cloud = cloud_for(config, region)
        quotas[region.name] = cloud.headroom().instances
        cloud.connection.close()  # type: ignore[attr-defined]

    assert quotas == {"region-a": 3, "region-c": 7, "region-b": 5}
    assert dict(os.environ) == before


def test_a_clouds_yaml_without_the_cloud_names_the_region_field(
        nova_emulator: NovaEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OS_CLIENT_CONFIG_FILE", raising=False)
    write_clouds_yaml(tmp_path, "alpha", nova_emulator.url, "p1")
    config = load_config(_config(tmp_path, f"""
  - {{name: region-a, cloud: nosuch, clouds_yaml: {tmp_path / 'clouds.yaml'},
     launch: {{image: {IMAGE_ID}, networks: [none]}}}}
"""))
    with pytest.raises(ConfigError) as caught:
        cloud_for(config, config.regions[0])
    assert "nosuch" in str(caught.value)
    assert caught.value.field == "regions[region-a].cloud"
    missing = load_config(_config(tmp_path, f"""
  - {{name: region-a, cloud: alpha, clouds_yaml: {tmp_path / 'none.yaml'},
     launch: {{image: {IMAGE_ID}, networks: [none]}}}}
"""))
    with pytest.raises(ConfigError, match="clouds.yaml not found"):
        cloud_for(missing, missing.regions[0])
    assert "OS_CLIENT_CONFIG_FILE" not in os.environ


def test_a_regions_own_clouds_yaml_takes_its_secrets_from_the_secure_yaml_beside_it(
        nova_emulator: NovaEmulator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 28 item 14: openstacksdk's convention keeps the secrets of clouds.yaml in a
    secure.yaml beside it; a region's own clouds_yaml ignored it (the token never came)."""
    monkeypatch.delenv("OS_CLIENT_CONFIG_FILE", raising=False)
    project = _project(nova_emulator, 4)
    (tmp_path / "clouds.yaml").write_text(
        "clouds:\n  alpha:\n    auth_type: admin_token\n"
        f"    auth: {{endpoint: {nova_emulator.url}}}\n    region_name: RegionOne\n",
        encoding="utf-8")
    (tmp_path / "secure.yaml").write_text(
        f'clouds:\n  alpha:\n    auth: {{token: "admin:{project}"}}\n', encoding="utf-8")
    (tmp_path / "secure.yaml").chmod(0o600)
    config = load_config(_config(tmp_path, f"""
  - {{name: region-a, cloud: alpha, clouds_yaml: {tmp_path / 'clouds.yaml'},
     launch: {{image: {IMAGE_ID}, networks: [none]}}}}
"""))
    cloud = cloud_for(config, config.regions[0])
    try:
        assert cloud.headroom().instances == 4
    finally:
        cloud.connection.close()  # type: ignore[attr-defined]
