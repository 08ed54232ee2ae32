"""`Problem`: one thing that went wrong in a stage, as a value the caller can count.

Results carry problems, not strings: the controller counts an outage by `api` (never by
looking for a word in a message), and a person reads `str(problem)`, which keeps the words the
stages always printed (``region: what: error``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from scoctl.errors import StateUnavailable

# ``config``: an API answered that it lacks something the config names (an image, a flavor,
# a network, a security group, a zone): no outage, and nothing to retry with back-off
Api = Literal["nova", "kubernetes", "slurm", "state", "spool", "scoctl", "config"]
APIS: tuple[Api, ...] = ("nova", "kubernetes", "slurm", "state", "spool", "scoctl", "config")


@dataclass(frozen=True)
class Problem:
    """`api` failed (``scoctl`` itself: a deadline passed, a limit held) in `region` (None:
    no one region) while scoctl did `what`; `error` is what it answered."""

    api: Api
    region: str | None
    what: str
    error: str

    def __str__(self) -> str:
        return ": ".join(part for part in (self.region, self.what, self.error) if part)

    @classmethod
    def of(cls, exc: BaseException, *, api: Api = "scoctl", region: str | None = None,
           what: str = "") -> Problem:
        """The problem an exception raised by `api` stands for; the state's own outage
        (`StateUnavailable`, met in a step that called `api`) is the state's, never `api`'s."""
        return cls("state" if isinstance(exc, StateUnavailable) else api, region, what, str(exc))


def first_of(problems: Iterable[Problem], api: Api) -> Problem | None:
    """The first of `problems` that `api` caused, or None: that API answered."""
    return next((p for p in problems if p.api == api), None)
