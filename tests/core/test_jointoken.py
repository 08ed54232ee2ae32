"""The join-token decisions (design: Operating, `core.jointoken`): the token, its Secret, its
expiry,
and which Secrets no launch needs any more."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from scoctl.core.jointoken import (
    TOKEN_GROUP,
    make_token,
    secret_manifest,
    token_expiry,
    tokens_to_delete,
)
from scoctl.core.model import InstanceRecord, LaunchRecord, TokenSecret

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=UTC)
LATER = NOW + timedelta(minutes=20)


def launch(launch_id: str, status: str) -> LaunchRecord:
    return LaunchRecord(launch_id=launch_id, region="r", workload="web", pool="p", generation=1,
                        count=2, status=status, created="", updated="")


def instance(launch_id: str, status: str, n: int = 0) -> InstanceRecord:
    return InstanceRecord(id=f"{launch_id}-{n}", name=f"{launch_id}-{n}", region="r",
                          workload="web", pool="p", generation=1, launch_id=launch_id,
                          status=status, created="", updated="")


def secret(launch_id: str, expires: datetime | None = LATER) -> TokenSecret:
    return TokenSecret(name=f"bootstrap-token-{launch_id[-6:]}", launch=launch_id,
                       expires=expires)


def test_the_token_expires_after_the_launch_and_registration_timeouts() -> None:
    assert token_expiry(NOW, 300, 900) == NOW + timedelta(minutes=20)
    odd = NOW + timedelta(microseconds=250)
    assert token_expiry(odd, 300, 900) == NOW + timedelta(minutes=20, seconds=1)  # never early


def test_a_token_is_six_and_sixteen_lowercase_alphanumerics() -> None:
    token = make_token("abc123", "0123456789abcdef", LATER)
    assert token.token == "abc123.0123456789abcdef"
    assert token.secret_name == "bootstrap-token-abc123"
    assert "0123456789abcdef" not in repr(token)
    for bad in (("ABC123", "0123456789abcdef"), ("abc12", "0123456789abcdef"),
                ("abc123", "0123456789abcde!")):
        with pytest.raises(ValueError):
            make_token(*bad, LATER)


def test_the_secret_is_a_bootstrap_token_for_the_scoctl_group_labelled_with_its_launch() -> None:
    manifest = secret_manifest(make_token("abc123", "0123456789abcdef", LATER),
                               launch_id="l-000000000001", workload="web")
    assert (manifest["type"], manifest["metadata"]["namespace"], manifest["metadata"]["name"]) \
        == ("bootstrap.kubernetes.io/token", "kube-system", "bootstrap-token-abc123")
    assert manifest["metadata"]["labels"] == {"sco/managed": "true",
                                              "sco/launch": "l-000000000001",
                                              "sco/workload": "web"}
    data = manifest["stringData"]
    assert (data["token-id"], data["token-secret"], data["expiration"]) == \
        ("abc123", "0123456789abcdef", "2026-05-01T12:20:00Z")
    assert data["usage-bootstrap-authentication"] == data["usage-bootstrap-signing"] == "true"
    assert data["auth-extra-groups"] == TOKEN_GROUP == "system:bootstrappers:scoctl"


def test_a_token_is_kept_while_its_launch_is_in_flight_or_a_node_still_registers() -> None:
    launches = {"l-1": launch("l-1", "intent"), "l-2": launch("l-2", "called"),
                "l-3": launch("l-3", "recorded")}
    instances = [instance("l-3", "ready", 0), instance("l-3", "active", 1)]
    assert tokens_to_delete([secret("l-1"), secret("l-2"), secret("l-3")], launches, instances,
                            NOW) == []


def test_a_token_goes_once_its_launch_no_longer_needs_it() -> None:
    launches = {"l-fail": launch("l-fail", "failed"), "l-done": launch("l-done", "recorded"),
                "l-gone": launch("l-gone", "recorded"), "l-late": launch("l-late", "intent")}
    instances = [instance("l-done", "ready", 0), instance("l-done", "error", 1),
                 instance("l-late", "building")]
    found = [secret("l-fail"), secret("l-done"), secret("l-gone"), secret("l-orphan"),
             secret("l-late", expires=NOW)]
    assert {(d.launch, d.reason) for d in tokens_to_delete(found, launches, instances, NOW)} == {
        ("l-fail", "launch failed"), ("l-done", "nodes registered"),
        ("l-gone", "launch has no instances"), ("l-orphan", "no such launch"),
        ("l-late", "expired")}
