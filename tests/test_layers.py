"""Import contracts (design: Decisions, Statuses, Reconciler): the layering holds in the code, not
only in the docs.

The contracts live in pyproject.toml (`[tool.importlinter]`) and `scripts/check` runs them; these
tests run the same `lint-imports`, and show that a deliberately wrong import breaks it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([str(LINT_IMPORTS), "--config", str(tree / "pyproject.toml"),
                           "--no-cache"],
                          cwd=tree, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def copy_of_the_package(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "scoctl", tmp_path / "scoctl",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_every_contract_is_kept_by_the_package():
    result = lint_imports(ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" not in result.stdout.lower().replace("0 broken", "")
    # positive control: the contracts were really read, not an empty list
    assert result.stdout.count("KEPT") >= 12


@pytest.mark.parametrize(("module", "wrong_import", "contract"), [
    ("core/planner.py", "import scoctl.stages.plan", "Layers run one way"),
    ("core/gate.py", "import subprocess", "The core decides and does no I/O"),
    ("stages/watch.py", "import kubernetes", "Only the adapters import the SDKs"),
    ("cli/status.py", "import sqlite3", "Only the state package speaks SQL"),
    ("cli/status.py", "import rich", "Only cli.render uses rich"),
    ("runner/compose.py", "import scoctl.sim.region", "The product never imports the simulated"),
    ("stages/gate.py", "import scoctl.runner.compose", "Layers run one way"),
    ("services/teardown.py", "import scoctl.stages.watch", "Layers run one way"),
    ("services/leadership.py", "import scoctl.runner.loop", "The shared blocks of scoctl.services"),
    ("stages/watch.py", "import scoctl.stages.retention", "Stages never call each other"),
    ("stages/notice.py", "import scoctl.stages.reconcile", "Stages never call each other"),
    ("stages/acquire.py", "import time", "Stages take time from the injected Clock"),
    ("adapters/nova.py", "import scoctl.state.sqlite", "Layers run one way"),
    ("stages/acquire.py", "import scoctl.stages.plan", "Stages never call each other"),
    ("stages/reconcile.py", "import scoctl.stages.slurm_power", "Stages never call each other"),
    ("stages/plan.py", "import scoctl.state.sqlite", "Stages and commands see the Store"),
    ("sim/k8s_scheduler.py", "import scoctl.core.demand", "The simulated kube-scheduler imports"),
    ("sim/k8s_scheduler.py", "import scoctl.sim.k8s_emulator", "The simulated kube-scheduler"),
])
def test_a_wrong_import_breaks_its_contract(copy_of_the_package: Path, module: str,
                                            wrong_import: str, contract: str):
    path = copy_of_the_package / "scoctl" / module
    text = path.read_text()
    marker = "from __future__ import annotations\n"
    assert marker in text
    path.write_text(text.replace(marker, f"{marker}\n{wrong_import}  # noqa\n", 1))
    result = lint_imports(copy_of_the_package)
    assert result.returncode != 0
    broken = [line for line in result.stdout.splitlines() if " BROKEN" in line]
    assert any(line.startswith(contract) for line in broken), result.stdout
