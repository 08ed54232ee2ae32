"""The disruption seam (DESIGN §16), pure: candidates per reason, one budget, replace first."""

from __future__ import annotations

import pytest

from scoctl.core.disruption import disruption_allowance


@pytest.mark.parametrize(("units", "share", "allowed"), [
    (0, 0.1, 0), (1, 0.1, 1), (10, 0.1, 1), (11, 0.1, 2), (22, 0.5, 11), (30, 0.1, 3)])
def test_the_disruption_budget_rounds_up_and_allows_at_least_one(units, share, allowed):
    assert disruption_allowance(units, share) == allowed
