"""The typer command tree builds only the command a line uses, and its --help is typer's own."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import typer.main
from typer.core import TyperGroup

from scoctl.cli.root import COMMAND_MODULES, app


def test_the_command_list_of_scoctl_help_is_what_typer_prints_for_built_commands():
    group = typer.main.get_command(app)
    ctx = click.Context(group, info_name="scoctl")
    listed = click.HelpFormatter()
    group.format_commands(ctx, listed)
    built = click.HelpFormatter()
    TyperGroup(commands=[group.commands[name] for name in group.commands]).format_commands(
        ctx, built)
    assert listed.getvalue() == built.getvalue()
    assert [line.split()[0] for line in listed.getvalue().splitlines()[1:]] == list(
        COMMAND_MODULES)


def test_a_command_line_loads_only_the_module_of_its_command():
    code = ("import json, sys\nfrom scoctl.cli.app import main\n"
            "try:\n    main(['plan', '--help'])\nexcept SystemExit as exc:\n    print(exc.code)\n"
            "print(json.dumps(sorted(m for m in sys.modules if m.startswith('scoctl.cli.'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()
    assert out[-2] == "0"
    loaded = {name.removeprefix("scoctl.cli.") for name in json.loads(out[-1])}
    assert "plan" in loaded
    assert not loaded & (set(COMMAND_MODULES.values()) - {"plan"})
