"""Shared test set-up: a deterministic Hypothesis profile and the real-component fixtures."""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings

# Derandomised and without deadlines: the same examples on every run, on any machine.
settings.register_profile(
    "ci", derandomize=True, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=200)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

_FIXTURES = Path(__file__).parent / "fixtures"
pytest_plugins = [
    f"tests.fixtures.{p.stem}"
    for p in sorted(_FIXTURES.glob("*.py"))
    if p.stem != "__init__"
]
