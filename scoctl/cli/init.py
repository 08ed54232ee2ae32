"""`scoctl init`: create or migrate the state file."""

from __future__ import annotations

import typer

from scoctl.cli.common import JsonOption, WaitOption, globals_of


def init(
    ctx: typer.Context,
    json_out: JsonOption = False,
    wait: WaitOption = 10.0,
) -> None:
    """Create the state file (mode 0600, WAL) or migrate it to this scoctl's schema.

    Also creates the event spool directory. Safe to run again: an up-to-date file is left as
    it is; a file from a newer scoctl is refused untouched.

    \b
    Example:
      scoctl --config /etc/scoctl/config.yaml init
    """
    from scoctl.cli import render
    from scoctl.host.spool import ensure_spool, notice_dir
    from scoctl.state import SCHEMA_VERSION

    g = globals_of(ctx, json=json_out)
    config = g.config()
    from scoctl.config.schema import is_url

    path = g.state_path()
    existed = not is_url(path) and g.state_exists()
    with g.writer(wait, create=True) as store:
        version = store.schema_version()
        existed = existed or (is_url(path) and store.migrated_from != 0)  # a scoctl schema
        migrated_from = store.migrated_from if existed else None
    spool_note = None
    try:
        ensure_spool(config.spool)
        ensure_spool(notice_dir(config.spool))
    except OSError as exc:
        spool_note = f"spool {config.spool} not created: {exc.strerror}"
        render.warn(spool_note)
    result = {"state": str(path), "schema_version": version, "created": not existed,
              "migrated_from": migrated_from, "spool": str(config.spool)}
    if g.json:
        render.print_json(result)
    else:
        verb = ("created" if not existed else
                f"migrated from schema {migrated_from} to" if migrated_from is not None else
                "up to date at")
        render.line(f"state {path}: {verb} schema {version} (this scoctl: {SCHEMA_VERSION})")


def register(app: typer.Typer) -> None:
    app.command("init")(init)
