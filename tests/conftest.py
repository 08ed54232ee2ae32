"""Shared test set-up: a deterministic Hypothesis profile and the real-component fixtures."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Derandomised and without deadlines: the same examples on every run, on any machine.
settings.register_profile(
    "ci", derandomize=True, deadline=None, print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=200)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# Every scoctl the tests run (in process or as a subprocess, hooks included) keeps its parsed
# configs (`scoctl.config.parsecache`) in a directory of this run, not in the user's ~/.cache.
os.environ["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="scoctl-test-cache-")
atexit.register(shutil.rmtree, os.environ["XDG_CACHE_HOME"], ignore_errors=True)

_FIXTURES = Path(__file__).parent / "fixtures"
pytest_plugins = [
    f"tests.fixtures.{p.stem}"
    for p in sorted(_FIXTURES.glob("*.py"))
    if p.stem != "__init__"
]


# The suite runs on several workers (`--dist loadgroup`, scripts/test). One worker owns each
# session-wide real component that is costly or host-wide (a Slurm cluster's munged and
# slurmd, Debian's Nova harness): the tests that use it go to that worker, which starts it
# once. The end-to-end stories (tests/e2e) run one after another on one worker: each drives
# a simulated region or several controllers against the clock, and two at once on two cores
# starve each other's timers. Every other test stays with the tests of its file, in file
# order, on one worker: a module-scoped fixture is set up once, and tests that build on the
# one before see what it left.
_GROUPS = {"slurm_cluster": "slurm", "real_nova": "realnova"}
_E2E = "tests/e2e/"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the marks into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    groups: dict[str, str] = {}  # file → group: a file using a shared component goes whole
    for item in items:
        path = item.nodeid.partition("::")[0]
        names = getattr(item, "fixturenames", ())
        found = next((g for fixture, g in _GROUPS.items() if fixture in names), None)
        if found is not None or path not in groups:
            groups[path] = found or groups.get(path) or ("e2e" if path.startswith(_E2E)
                                                         else path)
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[item.nodeid.partition("::")[0]]))
