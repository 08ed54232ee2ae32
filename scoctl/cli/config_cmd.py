"""`scoctl config check`: validate a config and summarise it."""

from __future__ import annotations

import typer

from scoctl.cli.common import JsonOption

config_app = typer.Typer(rich_markup_mode=None, help="Work with the config file.",
                         no_args_is_help=True)


@config_app.command("check")
def check(ctx: typer.Context, json_out: JsonOption = False) -> None:
    """Validate the config (exit 2 naming the file, line and field on the first error; every
    region needs the launch settings acquire uses) and summarise regions, flavors, pools,
    groups, contracts, ranking and workloads.

    \b
    Example:
      scoctl --config /etc/scoctl/config.yaml config check
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.cli.config_summary import summarise

    g = globals_of(ctx, json=json_out)
    config = g.config()
    summary = summarise(config)
    if g.json:
        render.print_json(summary)
        return
    render.key_values(f"config {config.source_name}: valid", {
        "state": summary["state"],
        "regions": ", ".join(f"{r['name']} (cloud {r['cloud']}, {r['calls_per_second']}/s)"
                             for r in summary["regions"]),
        "flavors": len(summary["flavors"]),
        "pools": f"{summary['pools']['total']} ({summary['pools']['committed']} committed, "
                 f"{summary['pools']['reclaimable']} reclaimable) in "
                 f"{summary['pools']['groups']} groups",
        "contracts": ", ".join(summary["contracts"]),
        "ranking": summary["ranking"],
        "workloads": ", ".join(w["name"] for w in summary["workloads"]) or "(none)",
        "spool": summary["spool"],
    })
    for warning in summary["warnings"]:
        render.warn(warning)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
