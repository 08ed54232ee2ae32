"""Issue 28 item 12: a config whose Kubernetes nodes cannot join is refused (exit 2, naming the
field), not launched with ``SCO_JOIN_ENDPOINT=`` for the node's join script to fail on.

The config serves Kubernetes when it says where the cluster is (`kubernetes.kubeconfig` or
`kubernetes.context`) or a workload has source k8s; then the bundled user-data template needs
`bootstrap.api_endpoint` and `bootstrap.ca_cert_hash`. An operator's template needs only the
fields whose placeholders (``$join_endpoint``, ``$join_ca_hash``) it uses.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from scoctl.config.schema import Config, load_config, parse_config
from scoctl.config.yamlsrc import load_located
from scoctl.errors import ConfigError
from tests.builders import JOIN_CA_HASH, JOIN_ENDPOINT
from tests.fixtures.state import Cli

BASE = """\
state: ./s.db
regions:
  - {name: r, launch: {image: i}}
flavors: [{name: f, vcpus: 4, ram: 16Gi}]
pools: [{name: p, az: a, flavor: f, group: g, tier: reclaimable, depth: 1}]
ranking: {id: r-1, scores: {p: 1.0}}
"""
K8S_WORKLOAD = "workloads: [{name: web, source: k8s}]\n"
SLURM_WORKLOAD = "workloads: [{name: hpc, source: slurm}]\n"
KUBECONFIG = "kubernetes: {kubeconfig: ./kubeconfig}\n"


def parse(text: str) -> Config:
    return parse_config(load_located(BASE + text, "c.yaml"), path=None)


def refused(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        parse(text)
    return caught.value


@pytest.mark.parametrize("serves", [K8S_WORKLOAD, KUBECONFIG,
                                    "kubernetes: {context: prod}\n",
                                    "workloads: [{name: web}]\n"],  # source k8s is the default
                         ids=["k8s-workload", "kubeconfig", "context", "default-source"])
def test_a_config_serving_kubernetes_without_the_api_endpoint_is_refused(serves: str) -> None:
    error = refused(serves + "bootstrap:\n  join_tokens: true\n")
    assert error.field == "bootstrap.api_endpoint"
    assert (error.file, error.line) == ("c.yaml", 8)
    assert "kubeadm join" in str(error) and "$join_endpoint" in str(error)


def test_the_ca_cert_hash_is_named_once_the_endpoint_is_given() -> None:
    error = refused(K8S_WORKLOAD + f"bootstrap: {{api_endpoint: '{JOIN_ENDPOINT}'}}\n")
    assert (error.field, error.line) == ("bootstrap.ca_cert_hash", 8)
    assert "$join_ca_hash" in str(error)


def test_a_static_join_secret_needs_them_too(tmp_path: Path) -> None:
    # kubeadm join needs the endpoint and the CA hash whatever the credential is
    error = refused(K8S_WORKLOAD + "bootstrap: {join_tokens: false, join_secret_file: ./t}\n")
    assert error.field == "bootstrap.api_endpoint"


def test_a_config_with_both_fields_is_joinable() -> None:
    config = parse(K8S_WORKLOAD + KUBECONFIG + f"bootstrap: {{api_endpoint: '{JOIN_ENDPOINT}', "
                   f"ca_cert_hash: '{JOIN_CA_HASH}'}}\n")
    assert config.bootstrap.api_endpoint == JOIN_ENDPOINT


def test_a_slurm_only_config_needs_neither() -> None:
    parse(SLURM_WORKLOAD + "slurm: {cloud_partitions: [cloud]}\n")
    parse("")  # no workload, no cluster: nothing to join


def test_an_operator_template_without_the_placeholders_needs_neither(tmp_path: Path) -> None:
    template = tmp_path / "user-data.yaml"
    template.write_text("#cloud-config\nruncmd: [[/opt/site/join, '$launch', '$$join_endpoint']]\n")
    parse(K8S_WORKLOAD + f"bootstrap: {{user_data_template: {template}}}\n")


def test_an_operator_template_needs_only_the_fields_it_uses(tmp_path: Path) -> None:
    template = tmp_path / "user-data.yaml"
    template.write_text("#cloud-config\nruncmd: [[/opt/site/join, '${join_endpoint}']]\n")
    parse(K8S_WORKLOAD + f"bootstrap: {{user_data_template: {template}, "
          f"api_endpoint: '{JOIN_ENDPOINT}'}}\n")
    error = refused(K8S_WORKLOAD + f"bootstrap: {{user_data_template: {template}}}\n")
    assert error.field == "bootstrap.api_endpoint"


def test_an_unreadable_template_is_named_when_it_decides(tmp_path: Path) -> None:
    error = refused(K8S_WORKLOAD + f"bootstrap: {{user_data_template: {tmp_path / 'gone'}}}\n")
    assert (error.field, error.line) == ("bootstrap.user_data_template", 8)


def test_config_check_exits_2_naming_the_file_line_and_field(cli: Cli, tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(BASE + K8S_WORKLOAD + KUBECONFIG + "bootstrap: {join_tokens: true}\n")
    result = cli("--config", str(path), "config", "check")
    assert result.code == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert f"{path}:9: bootstrap.api_endpoint: " in result.stderr.strip().splitlines()[-1]


def test_the_bundled_demo_and_the_example_config_are_joinable() -> None:
    demo = load_config(None)
    assert demo.bootstrap.api_endpoint and demo.bootstrap.ca_cert_hash
    example = load_config(Path(__file__).resolve().parents[2] / "configs" / "example.yaml")
    assert example.bootstrap.api_endpoint and example.bootstrap.ca_cert_hash
