"""The `scoctl` command: global options, command registration, errors to exit codes.

Start-up stays fast: command modules import their stages (and through them the Kubernetes and
OpenStack clients) only inside the command functions.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Annotated

import typer

from scoctl import __version__
from scoctl.cli.common import Globals
from scoctl.errors import EXIT_FAILURE, EXIT_USAGE, ScoctlError

# Each module has `register(app)`; order is the order of --help.
COMMAND_MODULES = (
    "init",
    "gate",
    "watch",
    "plan",
    "acquire",
    "reconcile",
    "run",
    "status",
    "events",
    "emit",
    "notice",
    "sim",
    "config_cmd",
    "slurm_cmd",
)

app = typer.Typer(rich_markup_mode=None,
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
    state: Annotated[Path | None, typer.Option(
        "--state", help="State file (default: the config's `state`).",
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
    if config is not None and not config.exists():
        # checked here, not only where the config is read: `status --state X` never reads it,
        # and a mistyped --config must not pass silently
        from scoctl.errors import UsageError

        raise UsageError(f"--config {config}: no such file")
    verbosity = -1 if quiet else verbose
    ctx.obj = Globals(config_option=config, state_option=state, json=json_out,
                      verbosity=verbosity)
    from scoctl.logs import setup_logging

    setup_logging(verbosity)


for _name in COMMAND_MODULES:
    try:
        _module = importlib.import_module(f"scoctl.cli.{_name}")
    except ModuleNotFoundError as _exc:  # a command whose module is not shipped yet
        if _exc.name != f"scoctl.cli.{_name}":
            raise
        continue
    _module.register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app and map errors to DESIGN §8's exit codes."""
    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="scoctl", standalone_mode=False)
    except ScoctlError as exc:
        print(f"scoctl: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("scoctl: aborted", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        print("scoctl: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(EXIT_FAILURE)
    except Exception as exc:
        # click's (or typer's vendored click's) usage errors know how to show themselves
        show = getattr(exc, "show", None)
        if show is None or not hasattr(exc, "exit_code"):
            raise
        show()
        sys.exit(EXIT_USAGE if exc.exit_code == EXIT_USAGE else exc.exit_code)
    sys.exit(code if isinstance(code, int) else 0)
