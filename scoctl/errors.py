"""scoctl's exception tree and the exit code each one maps to.

    ScoctlError                  base; carries an exit code
    ├── ConfigError              bad config or input: fix it, exit 2 (names file, line, field)
    ├── UsageError               bad command-line use, exit 2
    ├── LockHeld                 another scoctl run holds the state lock, exit 75
    │   └── NotLeader            another runner leads the region (or took it over), exit 75
    ├── StateError               the state file cannot be used (newer schema, corrupt), exit 2
    └── ApiError                 an outside API failed after bounded retries, exit 1
        ├── TemporaryError       retry on the next tick (timeouts, 5xx, 429/503)
        │   ├── Refused          a create turned away before any work (429 to the last attempt)
        │   ├── DeadlineExceeded the pass's deadline (timeouts.run) passed: nothing was sent
        │   ├── Unanswered       no answer within timeouts.api (or not sent: the API stalls)
        │   ├── StateUnavailable the state's database cannot be reached now (a restart)
        │   ├── StillTerminating a drain's evicted pods outlived its wait: the node is not empty
        │   └── EvictionRefused  a drain's evictions still refused by PodDisruptionBudgets (429)
        └── PermanentError       needs a person (403 that is not quota, 400, auth)
    Domain errors the planner and acquirer handle themselves (never reach the CLI):
    ├── QuotaExceeded            Nova said over quota (403, or an ERROR server with a 413 fault)
    └── InsufficientCapacity     NoValidHost or another capacity fault: exclude the pool

The gate's over-capacity verdict is a result, not an error: its command exits 3
(`EXIT_OVER_CAPACITY`). Adapters map third-party exceptions to these once, at the boundary
(`raise ... from exc`).
Messages never carry secrets.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_OVER_CAPACITY = 3
EXIT_PLAN_CHECK = 4
EXIT_TEMPFAIL = 75


class ScoctlError(Exception):
    """Base of every error scoctl raises on purpose."""

    exit_code = EXIT_FAILURE


class ConfigError(ScoctlError):
    """Invalid configuration or input file; the message names the file, line and field."""

    exit_code = EXIT_USAGE

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file = file
        self.line = line
        self.field = field
        where = ""
        if file:
            where = file + (f":{line}" if line else "")
        if field:
            where = f"{where}: {field}" if where else field
        super().__init__(f"{where}: {message}" if where else message)


class UsageError(ScoctlError):
    """The command line asks for something that cannot be done; exit 2."""

    exit_code = EXIT_USAGE


class StateError(ScoctlError):
    """The state file cannot be used as it is (written by a newer scoctl, unreadable)."""

    exit_code = EXIT_USAGE


class LockHeld(ScoctlError):
    """Another scoctl process holds the run lock of this state file."""

    exit_code = EXIT_TEMPFAIL


class NotLeader(LockHeld):
    """Another runner holds the region's lease (design: Runners): this one makes no mutating call.

    Raised before an `acquire` or `reconcile` for a region led elsewhere, and by a fenced write
    (a launch intent, a delete) of a runner whose term ended: a deposed leader's write fails.
    """

    def __init__(self, region: str, holder: str | None, generation: int | None = None) -> None:
        self.region = region
        self.holder = holder
        self.generation = generation
        who = (f"{holder} (term {generation})" if generation is not None else holder) \
            if holder else "nobody (the lease is not held)"
        super().__init__(f"region {region}: not the leader; the region is led by {who}")


class ApiError(ScoctlError):
    """An outside API (Nova, Kubernetes, Slurm, a ranking URL) failed after bounded retries."""

    exit_code = EXIT_FAILURE


class TemporaryError(ApiError):
    """A failure that may pass: retry later. `delay` is a hint in seconds (Retry-After)."""

    def __init__(self, message: str, delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = delay


class StateUnavailable(TemporaryError):
    """The state's database cannot be reached now (restarting, the connection lost): the
    runner reconnects with back-off. Counted as a ``state`` outage, never as a cloud's."""


class Refused(TemporaryError):
    """A create call refused for sure before any work was done (rate limited on every attempt,
    none of them ambiguous): nothing was created, so the launch is failed at once and its
    units are free to be launched again (after a 5xx or a timeout they may exist: that is a
    plain `TemporaryError`)."""
class DeadlineExceeded(TemporaryError):
    """The pass ran out of time (`timeouts.run`): the call was not made (nothing was sent)."""


class Unanswered(TemporaryError):
    """A call got no answer within `timeouts.api` (the API is stalled: paused, overloaded, a
    dead link), or — `sent` False — was not made at all because another call to the same API
    had just gone unanswered (`adapters.guard`). Never retried in the same pass: the API is
    reported unavailable at once and the rest of the pass goes on without it. A call that was
    sent may still have reached the API (a create may have happened)."""

    def __init__(self, message: str, *, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


class StillTerminating(TemporaryError):
    """A drain's wait ended with evicted pods still Terminating on the node (`pods`, as
    ``namespace/name``, after `waited` seconds). The API answered: no outage, but the node is
    not empty, so its server must not be deleted yet. `cut_short`: the wait ended early
    because the caller asked it to (the pods may still be within their grace period)."""

    def __init__(self, message: str, pods: tuple[str, ...], waited: float, *,
                 cut_short: bool = False) -> None:
        super().__init__(message)
        self.pods = pods
        self.waited = waited
        self.cut_short = cut_short


class EvictionRefused(TemporaryError):
    """A drain's evictions of `pods` (``namespace/name``) were still refused by their
    PodDisruptionBudgets (429) when its wait ended; `delay` is the longest Retry-After the
    refusals asked for (a budget still being processed), if any. The API answered: no outage,
    but the node is not empty, so its server must not be deleted yet."""

    def __init__(self, message: str, pods: tuple[str, ...], delay: float | None = None) -> None:
        super().__init__(message, delay)
        self.pods = pods


class PermanentError(ApiError):
    """A failure retrying will not fix: a person has to look."""


class QuotaExceeded(ScoctlError):
    """Nova refused or failed a launch for quota; the pool stays eligible."""


class InsufficientCapacity(ScoctlError):
    """Nova could not place the instances (NoValidHost or another capacity fault)."""
