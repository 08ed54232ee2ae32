"""The `Cloud` interface: what scoctl needs from an IaaS, in scoctl's words, and its values.

The Nova adapter (`scoctl.adapters.nova`) implements it over openstacksdk; stage tests may use
an in-package fake. Every method documents the errors it raises (see `scoctl.errors`):

    ConfigError           the request breaks a rule we can check before calling (tag, user_data)
    QuotaExceeded         Nova said over quota (403); the pool stays eligible
    InsufficientCapacity  (never raised by a call: NoValidHost shows as ERROR servers, see
                          `ServerInfo.fault_error`)
    TemporaryError        429/503 (with `delay` = Retry-After), 5xx, timeouts, after retries
    PermanentError        any other refusal: 400, 401, 403 without quota, 404 on a launch

The pure rule checks (`check_tags`, `encode_user_data`) live here so planners and `--dry-run`
can apply them without a cloud.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Sequence
from typing import Protocol

from scoctl.core.model import (
    FlavorInfo,
    Headroom,
    LaunchRequest,
    LaunchResult,
    ServerInfo,
)
from scoctl.errors import ConfigError

MAX_TAGS = 50
MAX_TAG_LENGTH = 60
MAX_USER_DATA = 65535  # bytes of base64 text, Nova's schema limit
MAX_METADATA_VALUE = 255


class Cloud(Protocol):
    """The IaaS as scoctl sees it: one project in one region."""

    def flavors(self) -> list[FlavorInfo]:
        """Every flavor visible to the project. Raises TemporaryError, PermanentError."""
        ...

    def headroom(self) -> Headroom:
        """Quota left for instances, cores and RAM. Advisory: Nova rechecks asynchronously.

        Raises TemporaryError, PermanentError.
        """
        ...

    def launch(self, request: LaunchRequest) -> LaunchResult:
        """Start `min_count`..`max_count` servers in ONE call; Nova may build fewer (quota).

        Raises ConfigError (tags or user_data break Nova's rules, or a flavor, image, network,
        security group or zone the region lacks — Nova's 400: nothing was created),
        QuotaExceeded (403 over quota), Refused (turned away before any work on every
        attempt: nothing was created), TemporaryError (the call may have reached Nova: the
        servers may exist), PermanentError (other 4xx: 401, 403 without quota, 404).
        Servers that fail later show as ERROR (see `ServerInfo.fault_error`).
        """
        ...

    def servers(
        self,
        tags: Iterable[str] = (),
        any_tags: Iterable[str] = (),
        reservation_id: str | None = None,
    ) -> list[ServerInfo]:
        """Servers carrying all `tags` (and at least one of `any_tags`), newest first.

        List views may lack faults: call `server(id)` for ERROR ones.
        Raises TemporaryError, PermanentError.
        """
        ...

    def server(self, server_id: str) -> ServerInfo | None:
        """One server read by id, with its fault; None when it is gone.

        Raises TemporaryError, PermanentError.
        """
        ...

    def delete(self, server_id: str) -> None:
        """Delete a server; a server already gone is not an error.

        Raises TemporaryError, PermanentError.
        """
        ...

    def image_id(self, ref: str) -> str:
        """The id of the image `ref` names now (an id is its own answer): what a launch of
        `ref` boots and what its spec hash names (design: Drift), so an image uploaded again under
        the same name is a new spec. Answers may be up to a minute old.

        Raises ConfigError (no image, or several, of that name), TemporaryError, PermanentError.
        """
        ...


def check_tags(tags: Sequence[str]) -> None:
    """Nova's tag rules: at most 50 tags, each 1-60 characters without `/` or `,`.

    Raises ConfigError naming the first offending tag.
    """
    if len(tags) > MAX_TAGS:
        raise ConfigError(f"{len(tags)} tags, Nova allows at most {MAX_TAGS}", field="tags")
    for tag in tags:
        if not 1 <= len(tag) <= MAX_TAG_LENGTH:
            raise ConfigError(f"tag {tag!r} must be 1-{MAX_TAG_LENGTH} characters long",
                              field="tags")
        if "/" in tag or "," in tag:
            raise ConfigError(f"tag {tag!r} must not contain '/' or ','", field="tags")


def encode_user_data(text: str) -> str:
    """Base64 of the user data, checked against Nova's 65,535-byte limit.

    Raises ConfigError (without echoing the content: it may hold secrets).
    """
    encoded = base64.b64encode(text.encode("utf-8")).decode("ascii")
    if len(encoded) > MAX_USER_DATA:
        raise ConfigError(f"user_data is {len(encoded)} bytes after base64, Nova allows at most "
                          f"{MAX_USER_DATA}", field="user_data")
    return encoded
