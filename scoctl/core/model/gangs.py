"""The gang policy (design: Gangs): the config's `gang` section as the decisions take it.

Its own module so that reading a config (the Slurm gate does, before every ``sbatch``) does not
import the gang decisions of `core.gang`, nor the planner they build on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Placement = Literal["same_group", "same_az", "any"]
PLACEMENTS: tuple[Placement, ...] = ("same_group", "same_az", "any")
BACKOFF_BASE = 60.0
BACKOFF_CAP = 1800.0


@dataclass(frozen=True)
class GangPolicy:
    """The config's `gang` section (its defaults live on the config's `Gang`)."""

    placement: Placement
    max_pools: int
    deadline: float  # seconds from the launch to every member Ready
    retries: int  # failures before the gang is unsatisfiable
    booking: float  # seconds a Ready gang is kept for its job, idle or not
    backoff: float = BACKOFF_BASE  # seconds before the first retry (doubling, at most 30 min)


DEFAULT_GANG_POLICY = GangPolicy("same_group", max_pools=2, deadline=600.0, retries=3,
                                 booking=1200.0)  # the config's `gang` defaults
