"""What every typer command shares: the Globals on the click context, and common options.

`Globals` itself lives in `cli.context`, which the gate's fast entry uses without typer.
"""

from __future__ import annotations

import math
from typing import Annotated

import typer

from scoctl.cli.context import Globals


def globals_of(ctx: typer.Context, *, json: bool = False) -> Globals:
    """The Globals object the root callback stored on the context.

    `json` is the command's own ``--json`` flag: ``scoctl status --json`` and
    ``scoctl --json status`` mean the same.
    """
    obj = ctx.find_root().obj
    if not isinstance(obj, Globals):
        obj = Globals()
        ctx.find_root().obj = obj
    if json:
        obj.json = True
    return obj


JsonOption = Annotated[bool, typer.Option("--json", help="Machine output (JSON) on stdout.")]


WAIT_HELP = "Seconds to wait for another scoctl run to release the lock (then exit 75)."


def finite_seconds(value: float | None) -> float | None:
    """Option callback: a number of seconds, finite and not negative (``nan``, ``inf`` and
    ``-1`` are refused with exit 2 naming the option)."""
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise typer.BadParameter(f"must be a finite number of seconds ≥ 0, not {value}")
    return value


WaitOption = Annotated[float | None, typer.Option("--wait", help=WAIT_HELP,
                                                  callback=finite_seconds)]
