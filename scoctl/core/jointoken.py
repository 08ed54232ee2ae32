"""Short-lived Kubernetes join credentials (design: Operating), pure.

Each Kubernetes launch gets its own bootstrap token: a ``bootstrap.kubernetes.io/token``
Secret in ``kube-system`` that authenticates (and signs the cluster-info ConfigMap for
kubeadm's discovery) as ``system:bootstrappers:scoctl``, and expires after the launch and
registration timeouts. Only that token goes into the user-data, so what the metadata service
exposes is useless soon after boot. The Secret is deleted as soon as it is no longer needed:

* the launch failed, or there is no record of it (a crash between token and intent);
* every instance of the launch got past registration (ready, or already draining, deleted or
  in error: none is still requested, building or waiting to register);
* it expired (Kubernetes' token cleaner would also remove it; scoctl does not wait).

A launch still in flight keeps its token. The functions below decide; the stage does the API
calls (`services.join_tokens`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from scoctl.core.model import BootstrapToken, InstanceRecord, LaunchRecord, TokenSecret
from scoctl.core.model.vocabulary import (
    LABEL_LAUNCH,
    LABEL_MANAGED,
    LABEL_WORKLOAD,
    InstanceStatus,
    LaunchStatus,
)

TOKEN_TYPE = "bootstrap.kubernetes.io/token"
TOKEN_NAMESPACE = "kube-system"
TOKEN_GROUP = "system:bootstrappers:scoctl"
TOKEN_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
_ID = re.compile(r"^[a-z0-9]{6}$")
_SECRET = re.compile(r"^[a-z0-9]{16}$")
# instance statuses that may still need the token: not yet registered as a node
REGISTERING = frozenset({InstanceStatus.REQUESTED, InstanceStatus.BUILDING, InstanceStatus.ACTIVE})
IN_FLIGHT = frozenset({LaunchStatus.INTENT, LaunchStatus.CALLED})


@dataclass(frozen=True)
class TokenDeletion:
    """Delete the Secret `name` (made for `launch`) because of `reason`."""

    name: str
    launch: str
    reason: str


def token_expiry(launched: datetime, launch_timeout: float,
                 registration_timeout: float) -> datetime:
    """When a token made at `launched` stops working: after the launch and registration
    timeouts, whole seconds (the expiration field is RFC 3339 without fractions)."""
    moment = (launched + timedelta(seconds=launch_timeout + registration_timeout)).astimezone(UTC)
    whole = moment.replace(microsecond=0)
    return whole + timedelta(seconds=1) if whole < moment else whole


def make_token(token_id: str, token_secret: str, expires: datetime) -> BootstrapToken:
    """A token from its two halves (from a secure random source). ValueError when a half is
    not of the ``[a-z0-9]{6}.[a-z0-9]{16}`` form the token authenticator accepts."""
    if not _ID.match(token_id) or not _SECRET.match(token_secret):
        raise ValueError("a bootstrap token is [a-z0-9]{6}.[a-z0-9]{16}")
    return BootstrapToken(token_id=token_id, token_secret=token_secret, expires=expires)


def expiration_text(moment: datetime) -> str:
    """The Secret's ``expiration``: RFC 3339 in UTC, whole seconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def secret_manifest(token: BootstrapToken, *, launch_id: str, workload: str) -> dict[str, Any]:
    """The bootstrap token Secret for `token`, labelled with its launch and workload."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": TOKEN_TYPE,
        "metadata": {"name": token.secret_name, "namespace": TOKEN_NAMESPACE,
                     "labels": {LABEL_MANAGED: "true", LABEL_LAUNCH: launch_id,
                                LABEL_WORKLOAD: workload}},
        "stringData": {
            "description": f"scoctl join token of launch {launch_id} ({workload})",
            "token-id": token.token_id,
            "token-secret": token.token_secret,
            "expiration": expiration_text(token.expires),
            "usage-bootstrap-authentication": "true",
            "usage-bootstrap-signing": "true",
            "auth-extra-groups": TOKEN_GROUP,
        },
    }


def _why_not_needed(secret: TokenSecret, launch: LaunchRecord | None,
                    instances: Sequence[InstanceRecord], now: datetime) -> str | None:
    if secret.expires is not None and secret.expires <= now:
        return "expired"
    if launch is None:
        return "no such launch"
    if launch.status == LaunchStatus.FAILED:
        return "launch failed"
    if launch.status in IN_FLIGHT:
        return None
    if any(i.status in REGISTERING for i in instances):
        return None
    return "nodes registered" if instances else "launch has no instances"


def tokens_to_delete(secrets: Sequence[TokenSecret], launches: Mapping[str, LaunchRecord],
                     instances: Sequence[InstanceRecord], now: datetime) -> list[TokenDeletion]:
    """The bootstrap token Secrets no launch needs any more (see the module docstring)."""
    by_launch: dict[str, list[InstanceRecord]] = {}
    for instance in instances:
        if instance.launch_id:
            by_launch.setdefault(instance.launch_id, []).append(instance)
    out = []
    for secret in sorted(secrets, key=lambda s: s.name):
        reason = _why_not_needed(secret, launches.get(secret.launch),
                                 by_launch.get(secret.launch, []), now)
        if reason is not None:
            out.append(TokenDeletion(secret.name, secret.launch, reason))
    return out
