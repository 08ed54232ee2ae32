"""Import contracts (STYLE §1, §3, §7): the layering holds in the code, not only in the docs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "scoctl"


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.add(node.module)
    return out


SEAMS = ("scoctl.adapters.cloud", "scoctl.adapters.batch", "scoctl.adapters.cluster")


def modules(folder: str = "") -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def top(name: str) -> str:
    return name.split(".")[0]


def test_the_checks_see_the_code():
    # an empty parameter list would make the core check below a silent skip
    assert len(modules("core")) >= 5 and len(modules("cli")) >= 1


@pytest.mark.parametrize("path", modules("core"), ids=lambda p: p.name)
def test_core_decisions_import_no_adapter_state_stage_or_io_library(path):
    # state.records holds plain frozen row values (no SQL), and the seam modules hold the value
    # types of our Protocols (no SDK): the reconciler decides over them
    allowed_scoctl = ("scoctl.core", "scoctl.errors", "scoctl.state.records", *SEAMS)
    for name in imports_of(path):
        if top(name) == "scoctl":
            assert name.startswith(allowed_scoctl), f"{path.name} imports {name}"
        assert top(name) not in {"kubernetes", "openstack", "httpx", "sqlite3", "sqlite_utils",
                                 "subprocess", "socket", "rich", "typer", "logging", "random",
                                 "time"}, f"{path.name} imports {name}"


def test_only_adapters_import_the_cloud_and_cluster_clients():
    seen: set[str] = set()
    for path in modules():
        clients = {top(n) for n in imports_of(path)} & {"kubernetes", "openstack",
                                                         "keystoneauth1"}
        if clients:
            assert path.parent.name == "adapters", f"{path.relative_to(ROOT)} imports {clients}"
        seen |= clients
    # positive control: the adapters' lazy imports are seen, so the check above really ran
    assert {"kubernetes", "openstack"} <= seen


def test_only_the_state_package_speaks_sql():
    speakers = [path for path in modules()
                if {top(n) for n in imports_of(path)} & {"sqlite3", "sqlite_utils"}]
    assert speakers  # positive control: the state package is found speaking SQL
    for path in speakers:
        assert path.parent.name == "state", f"{path.relative_to(ROOT)} imports SQLite"


def test_only_render_uses_rich_in_the_cli():
    users = [path.name for path in modules("cli")
             if any(top(n) == "rich" for n in imports_of(path))]
    assert users == ["render.py"], f"rich is imported by {users}"


@pytest.mark.parametrize("seam", SEAMS)
def test_the_seam_modules_import_no_sdk_and_no_io(seam):
    path = ROOT / "adapters" / (seam.rsplit(".", 1)[1] + ".py")
    assert not {top(n) for n in imports_of(path)} & {"kubernetes", "openstack", "httpx",
                                                      "subprocess", "sqlite3"}
