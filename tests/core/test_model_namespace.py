"""`scoctl.core.model` gathers every value type, importing each submodule on first use."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import scoctl.core.model as model


def test_every_exported_name_is_its_submodules_own_object() -> None:
    assert set(model._HOME) == set(model.__all__)
    for name in model.__all__:
        home = importlib.import_module(f"scoctl.core.model.{model._HOME[name]}")
        assert getattr(model, name) is getattr(home, name), name


def test_the_typed_imports_name_the_same_homes_as_the_lazy_table() -> None:
    # mypy reads the TYPE_CHECKING imports; the running code reads `_NAMES`: they must agree
    tree = ast.parse(Path(model.__file__).read_text(encoding="utf-8"))
    typed: dict[str, tuple[str, ...]] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module
                typed[stmt.module.rsplit(".", 1)[1]] = tuple(a.name for a in stmt.names)
    assert typed == model._NAMES


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nothing'"):
        model.Nothing  # noqa: B018 - the look-up is the test
    with pytest.raises(ImportError):
        exec("from scoctl.core.model import Nothing", {})


def test_importing_the_namespace_or_one_name_imports_only_its_home() -> None:
    code = ("import sys\nimport scoctl.core.model\n"
            "before = sorted(m for m in sys.modules if m.startswith('scoctl.core.model.'))\n"
            "from scoctl.core.model import SlurmNode\n"
            "after = sorted(m for m in sys.modules if m.startswith('scoctl.core.model.'))\n"
            "print(before, after)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[] ['scoctl.core.model.slurm']"
