"""The typer command tree: global options, and the commands built only when they are used.

typer turns a command function into a click command by inspecting its signature, which for all
of scoctl's commands costs more than the rest of ``scoctl --help``. `CommandTree` (the root
group) therefore registers each command module on first use: ``scoctl plan`` and ``scoctl plan
--help`` build only `plan`; ``scoctl --help`` lists every command from its help text alone,
in click's layout. Walking ``commands`` (shell completion, the documentation test) builds them
all, exactly as typer would have.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Annotated, Any

import click
import typer
import typer.main
from typer.core import TyperGroup
from typer.models import CommandInfo, TyperInfo

from scoctl import __version__

# command -> module (`scoctl.cli.<module>.register(app)` adds it); the order of --help
COMMAND_MODULES = {
    "init": "init",
    "gate": "gate",
    "watch": "watch",
    "plan": "plan",
    "acquire": "acquire",
    "reconcile": "reconcile",
    "run": "run",
    "status": "status",
    "top": "top",
    "events": "events",
    "emit": "emit",
    "notice": "notice",
    "drift": "drift",
    "pause": "pause",
    "resume": "pause",
    "cost": "cost",
    "sim": "sim",
    "config": "config_cmd",
    "slurm": "slurm_cmd",
}


def _registered(name: str) -> CommandInfo | TyperInfo:
    """What the module of command `name` registers for it, on a Typer of its own."""
    staging = typer.Typer()
    importlib.import_module(f"scoctl.cli.{COMMAND_MODULES[name]}").register(staging)
    infos: list[CommandInfo | TyperInfo] = [*staging.registered_commands,
                                            *staging.registered_groups]
    for info in infos:
        if info.name == name:
            return info
    raise LookupError(f"scoctl.cli.{COMMAND_MODULES[name]} does not register {name!r}")


def _build(info: CommandInfo | TyperInfo) -> click.Command:
    """The click command typer makes of `info` (as `typer.main.get_group` does for each)."""
    if isinstance(info, TyperInfo):
        return typer.main.get_group_from_info(info, pretty_exceptions_short=True,
                                              suggest_commands=True, rich_markup_mode=None)
    return typer.main.get_command_from_info(info, pretty_exceptions_short=True,
                                            rich_markup_mode=None)


def _summary(name: str, info: CommandInfo | TyperInfo) -> click.Command:
    """A stand-in with the help texts of `info` and nothing else (for the command list)."""
    if isinstance(info, TyperInfo):
        solved = typer.main.solve_typer_info_defaults(info)
        return click.Command(name, help=solved.help, short_help=solved.short_help,
                             hidden=bool(solved.hidden), deprecated=bool(solved.deprecated))
    text = (inspect.getdoc(info.callback) if info.help is None
            else inspect.cleandoc(info.help))
    return click.Command(name, help=text, short_help=info.short_help, hidden=info.hidden,
                         deprecated=info.deprecated)


class _Commands(MutableMapping[str, click.Command]):
    """The root's commands by name, each built on first access."""

    def __init__(self) -> None:
        self._built: dict[str, click.Command] = {}
        self._names = list(COMMAND_MODULES)

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._built:
            if name not in COMMAND_MODULES:
                raise KeyError(name)
            self._built[name] = _build(_registered(name))
        return self._built[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._built[name] = command
        if name not in self._names:
            self._names.append(name)

    def __delitem__(self, name: str) -> None:
        self._names.remove(name)
        self._built.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


class CommandTree(TyperGroup):
    """The root group: commands are built when used (see the module docstring)."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _Commands()

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        summaries = [_summary(name, _registered(name)) for name in self.commands]
        TyperGroup(commands=summaries).format_commands(ctx, formatter)


app = typer.Typer(
    cls=CommandTree,
    rich_markup_mode=None,  # plain click help: rich stays unimported
    name="scoctl",
    help=(
        "Spot Capacity Orchestrator: pending Kubernetes pods and Slurm jobs into a diversified "
        "fleet of Nova instances.\n\n"
        "Stages: gate → watch → plan → acquire → reconcile (`scoctl run` chains the last four)."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"scoctl {__version__}")
        raise typer.Exit()


@app.callback()
def root(
    ctx: typer.Context,
    config: Annotated[Path | None, typer.Option(
        "--config", help="Config file (default $SCOCTL_CONFIG, then /etc/scoctl/config.yaml, "
        "then the bundled demo config).", show_default=False)] = None,
    state: Annotated[str | None, typer.Option(
        "--state", help="State file or postgresql:// URL (default: the config's `state`).",
        show_default=False)] = None,
    json_out: Annotated[bool, typer.Option(
        "--json", help="Machine output on stdout; logs stay on stderr.")] = False,
    verbose: Annotated[int, typer.Option(
        "-v", "--verbose", count=True, help="More log output (repeat for debug).")] = 0,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="Only errors on stderr.")] = False,
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    """Global options apply to every command."""
    from scoctl.cli.context import start

    ctx.obj = start(config=config, state=state, json=json_out, verbose=verbose, quiet=quiet)
