"""Values of the node join: a per-launch Kubernetes bootstrap token and the Secrets found."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class BootstrapToken:
    """A bootstrap token (``<id>.<secret>``: 6 and 16 of ``[a-z0-9]``) and when it expires.

    The secret half is the credential: it is never in a repr, a log, an event or the state.
    """

    token_id: str
    token_secret: str = field(repr=False)
    expires: datetime = field(compare=False)

    @property
    def token(self) -> str:
        """What a node passes to ``kubeadm join --token``."""
        return f"{self.token_id}.{self.token_secret}"

    @property
    def secret_name(self) -> str:
        """The Secret the token authenticator looks it up by (``bootstrap-token-<id>``)."""
        return f"bootstrap-token-{self.token_id}"


@dataclass(frozen=True)
class TokenSecret:
    """A bootstrap token Secret scoctl created, as listed (never with its secret): its name,
    the launch it was made for (``sco/launch``) and its expiration (None when unreadable)."""

    name: str
    launch: str
    expires: datetime | None
