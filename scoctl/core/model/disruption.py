"""The `disruption` settings (design: Disruption), top level and per workload: the budgets, and the
knobs of the reasons that other stages act on (expiry, repair, drift, rebalance).

Core values without config metadata (as `Contract`): `scoctl.config.schema` reads them, and
the defaults here are the only ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction

from scoctl.core.cron import Cron
from scoctl.core.model.vocabulary import DisruptionReason


@dataclass(frozen=True)
class Units:
    """A number of units: a count, or (`percent`) a percentage of a workload's registered
    units, rounded up (``"10%"`` of 11 is 2)."""

    amount: Decimal
    percent: bool = False

    @classmethod
    def count(cls, amount: int) -> Units:
        return cls(Decimal(amount))

    @classmethod
    def share(cls, percent: Decimal | int | str) -> Units:
        return cls(Decimal(percent), percent=True)

    def of(self, registered: int) -> int:
        """How many units this is in a workload of `registered` units: exact, rounded up."""
        if not self.percent:
            return int(self.amount)
        exact = Fraction(max(0, registered)) * Fraction(self.amount) / 100
        return -(-exact.numerator // exact.denominator)

    def __str__(self) -> str:
        text = format(self.amount.normalize(), "f")
        return f"{text}%" if self.percent else text


@dataclass(frozen=True)
class Rate:
    """At most `units` disruptions started within any sliding window of `per` seconds."""

    units: Units
    per: float


@dataclass(frozen=True)
class Budget:
    """At most `units` of a workload's disruptions in flight at once, counting those for
    `reasons` (every reason, reclaim notices included, when it names none); with `schedule`,
    only from each firing for `duration` seconds in `time_zone` (`scoctl.core.budgets.active`);
    with `rate`, also at most that many started per window."""

    units: Units
    reasons: frozenset[DisruptionReason] = frozenset()
    schedule: Cron | None = None
    duration: float | None = None
    time_zone: str = "UTC"
    rate: Rate | None = None

    def counts(self, reason: DisruptionReason) -> bool:
        """Whether a disruption for `reason` counts against this budget."""
        return not self.reasons or reason in self.reasons

    def limit(self, registered: int) -> int:
        """How many disruptions this budget lets be in flight in a workload of `registered`
        units."""
        return self.units.of(registered)


# design: Reconciler: 10 % of a workload's units, rounded up
DEFAULT_BUDGETS = (Budget(Units.share(10)),)


@dataclass(frozen=True)
class Drift:
    """`disruption.drift` (design: Drift): the canary's soak, and failed replacements in a row on
    one spec that halt a rollout."""

    soak: float = 120.0
    halt_after: int = 2


@dataclass(frozen=True)
class Rebalance:
    """`disruption.rebalance` (design: Rebalance): how long a trigger must hold, the youngest unit
    that moves, and the least gain in mean key worth a move."""

    stabilize: float = 600.0
    min_age: float = 3600.0
    min_gain: float = 0.1


@dataclass(frozen=True)
class DisruptionSettings:
    """The `disruption` block: budgets, expiry (`expire_after` seconds, None: never), repair
    (unhealthy for `repair_after`, never where more than `repair_max_unhealthy` of a pool's
    units are unhealthy), drift and rebalance."""

    budgets: tuple[Budget, ...] = DEFAULT_BUDGETS
    expire_after: float | None = None
    repair_after: float = 600.0
    repair_max_unhealthy: Units = Units.share(20)
    drift: Drift = field(default_factory=Drift)
    rebalance: Rebalance = field(default_factory=Rebalance)
