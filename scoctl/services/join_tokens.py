"""Per-launch Kubernetes join tokens (design: Operating): create, revoke, prune.

`JoinTokens` is what acquire asks for a launch's join credential: with
``bootstrap.join_tokens`` on and a Kubernetes launch (not a Slurm CLOUD node) it creates a
bootstrap token Secret (`core.jointoken`) and returns the token for the user-data; when the
token cannot be made (no cluster configured, no RBAC, the API down) it says why once and
returns None, and acquire falls back to ``bootstrap.join_secret_file``. A launch that fails
gets its token deleted at once (`revoke`); `prune` (run by reconcile) deletes every token no
launch needs any more. The token is only ever in the Secret and the user-data: never logged,
never in an event or the state (events name the launch, not the token).
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from scoctl.adapters.bootstrap import BootstrapTokens
from scoctl.clock import Clock
from scoctl.config.schema import Config
from scoctl.core.jointoken import (
    TOKEN_ALPHABET,
    make_token,
    secret_manifest,
    token_expiry,
    tokens_to_delete,
)
from scoctl.core.model import NewEvent
from scoctl.core.model.problems import Problem
from scoctl.errors import ApiError, ConfigError
from scoctl.secrets import remember
from scoctl.state import Store

log = logging.getLogger(__name__)

TokenApiFactory = Callable[[Config], BootstrapTokens]
# token Secrets one reconcile pass deletes at most: the rest wait for the next pass (a fleet of
# 2,000 nodes that just joined would otherwise hold that pass — and a demand change behind it —
# for 2,000 DELETEs; each left token expires on its own at `token_expiry` regardless)
PRUNE_PER_PASS = 50


def _random(length: int) -> str:
    return "".join(secrets.choice(TOKEN_ALPHABET) for _ in range(length))


def _cluster_tokens(config: Config) -> BootstrapTokens:
    from scoctl.adapters.factory import cluster_for

    cluster = cluster_for(config)
    if not isinstance(cluster, BootstrapTokens):
        raise ConfigError("the Kubernetes adapter cannot create bootstrap tokens")
    return cluster


@dataclass
class JoinTokens:
    """The join credentials of one acquire run. `api` is the Kubernetes API (made from the
    config on first use when not given)."""

    config: Config
    clock: Clock
    api: BootstrapTokens | None = None
    connect: TokenApiFactory = _cluster_tokens
    issued: dict[str, str] = field(default_factory=dict)  # launch id -> Secret name
    unavailable: str | None = None  # why tokens cannot be made in this run

    def credential(self, launch_id: str, workload: str, *, slurm_node: bool) -> str | None:
        """The bootstrap token for `launch_id`, or None: tokens are off, the launch is a Slurm
        node, or the token could not be made (the static secret stands in, with a warning)."""
        if slurm_node or not self.config.bootstrap.join_tokens or self.unavailable:
            return None
        t = self.config.timeouts
        token = make_token(_random(6), _random(16),
                           token_expiry(self.clock.now(), t.launch, t.registration))
        remember(token.token)  # scoctl.secrets: an error that echoes it never prints it
        try:
            if self.api is None:
                self.api = self.connect(self.config)
            self.api.create_bootstrap_token(
                secret_manifest(token, launch_id=launch_id, workload=workload))
        except (ApiError, ConfigError) as exc:
            self.unavailable = str(exc)
            log.warning("no bootstrap token for launch %s (%s): the nodes get "
                        "bootstrap.join_secret_file's secret, if any", launch_id, exc)
            return None
        self.issued[launch_id] = token.secret_name
        return token.token

    def revoke(self, launch_id: str) -> None:
        """Delete the token of a launch that failed (reconcile's `prune` retries a failure)."""
        name = self.issued.pop(launch_id, None)
        if name is None or self.api is None:
            return
        try:
            self.api.delete_bootstrap_token(name)
        except ApiError as exc:
            log.warning("bootstrap token of failed launch %s not deleted (%s): reconcile "
                        "deletes it", launch_id, exc)


def prune(store: Store, api: BootstrapTokens, clock: Clock, *,
          dry_run: bool = False, limit: int = PRUNE_PER_PASS) -> list[str]:
    """Delete the bootstrap token Secrets no launch needs any more (`core.jointoken`), at most
    `limit` of them (by Secret name; the next pass deletes the next ones); returns the
    "launch: reason" of each. Raises TemporaryError / PermanentError from the API."""
    found = api.bootstrap_tokens()
    if not found:
        return []
    launches = {launch.launch_id: launch for launch in store.launches()}
    doomed = tokens_to_delete(found, launches, store.instances(), clock.now())[:limit]
    done = []
    for deletion in doomed:
        if not dry_run:
            api.delete_bootstrap_token(deletion.name)
            store.append_event(NewEvent(launches[deletion.launch].workload
                                        if deletion.launch in launches else None,
                                        "JOIN_TOKEN_DELETED", "info",
                                        {"launch": deletion.launch, "reason": deletion.reason}))
        done.append(f"{deletion.launch}: {deletion.reason}")
    return done


def prune_or_report(store: Store, api: object, clock: Clock, *,
                    dry_run: bool = False) -> list[Problem]:
    """`prune` for reconcile: nothing when `api` cannot hold bootstrap tokens, and an API
    failure as one problem (the next pass retries) instead of an exception."""
    if not isinstance(api, BootstrapTokens):
        return []
    try:
        prune(store, api, clock, dry_run=dry_run)
    except ApiError as exc:
        return [Problem.of(exc, api="kubernetes", what="bootstrap tokens")]
    return []
