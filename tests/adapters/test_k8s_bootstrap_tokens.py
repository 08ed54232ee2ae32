"""Bootstrap token Secrets through the real `kubernetes` client against the emulator's Secret
API: created as the token authenticator wants them, listed without their secret, deleted."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest

from scoctl.adapters.bootstrap import BootstrapTokens
from scoctl.adapters.kubernetes import KubernetesCluster
from scoctl.core.jointoken import make_token, secret_manifest
from scoctl.core.model import TokenSecret
from scoctl.errors import PermanentError, TemporaryError
from scoctl.sim.k8s_emulator import K8sEmulator

EXPIRES = datetime(2026, 5, 1, 12, 20, tzinfo=UTC)


def manifest(token_id: str, launch_id: str) -> dict[str, object]:
    token = make_token(token_id, "0123456789abcdef", EXPIRES)
    return secret_manifest(token, launch_id=launch_id, workload="web")


def test_a_token_secret_is_stored_listed_without_its_secret_and_deleted(
        k8s_cluster: KubernetesCluster, k8s_emulator: K8sEmulator) -> None:
    assert isinstance(k8s_cluster, BootstrapTokens)
    k8s_cluster.create_bootstrap_token(manifest("abc123", "l-000000000001"))
    stored = k8s_emulator.get("Secret", "kube-system", "bootstrap-token-abc123")
    assert stored["type"] == "bootstrap.kubernetes.io/token" and "stringData" not in stored
    data = {k: base64.b64decode(v).decode() for k, v in stored["data"].items()}
    assert (data["token-id"], data["token-secret"], data["expiration"]) == (
        "abc123", "0123456789abcdef", "2026-05-01T12:20:00Z")
    assert data["auth-extra-groups"] == "system:bootstrappers:scoctl"

    # neither an Opaque Secret nor another tool's bootstrap token is listed
    k8s_emulator.add({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                      "metadata": {"name": "other", "namespace": "kube-system",
                                   "labels": {"sco/managed": "true", "sco/launch": "x"}},
                      "stringData": {"password": "hunter2"}})
    k8s_emulator.add({"apiVersion": "v1", "kind": "Secret", "type": "bootstrap.kubernetes.io/token",
                      "metadata": {"name": "bootstrap-token-kubead", "namespace": "kube-system"},
                      "stringData": {"token-id": "kubead", "token-secret": "0" * 16}})
    listed = k8s_cluster.bootstrap_tokens()
    assert listed == [TokenSecret(name="bootstrap-token-abc123", launch="l-000000000001",
                                  expires=EXPIRES)]
    assert "0123456789abcdef" not in repr(listed)

    assert k8s_cluster.delete_bootstrap_token("bootstrap-token-abc123") is True
    assert k8s_cluster.delete_bootstrap_token("bootstrap-token-abc123") is False
    assert k8s_cluster.bootstrap_tokens() == []


def test_api_failures_map_to_scoctl_errors_without_the_secret(
        k8s_cluster: KubernetesCluster, k8s_emulator: K8sEmulator) -> None:
    k8s_emulator.fail_next(status=403, path_contains="/secrets", method="POST")
    with pytest.raises(PermanentError) as denied:
        k8s_cluster.create_bootstrap_token(manifest("abc123", "l-1"))
    assert "0123456789abcdef" not in str(denied.value)
    k8s_cluster.create_bootstrap_token(manifest("abc123", "l-1"))
    with pytest.raises(TemporaryError, match="409"):  # the id is taken: another one will do
        k8s_cluster.create_bootstrap_token(manifest("abc123", "l-2"))
    k8s_emulator.fail_next(status=503, path_contains="/secrets", method="GET")
    with pytest.raises(TemporaryError):
        k8s_cluster.bootstrap_tokens()
    k8s_emulator.fail_next(status=500, path_contains="/secrets", method="DELETE")
    with pytest.raises(TemporaryError):
        k8s_cluster.delete_bootstrap_token("bootstrap-token-abc123")


def test_the_emulator_refuses_secret_data_that_is_not_base64(k8s_emulator: K8sEmulator) -> None:
    from scoctl.sim.k8s_emulator import StatusError

    with pytest.raises(StatusError) as caught:
        k8s_emulator.add({"apiVersion": "v1", "kind": "Secret",
                          "metadata": {"name": "bad", "namespace": "default"},
                          "data": {"key": "not base64!"}})
    assert caught.value.code == 422 and "illegal base64" in caught.value.message
