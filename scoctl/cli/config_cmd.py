"""`scoctl config check`: validate a config and summarise it (`--online`: against Nova)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated

import typer

from scoctl.cli.common import JsonOption

if TYPE_CHECKING:
    from scoctl.services.catalog import OnlineCheck

OnlineOption = Annotated[bool, typer.Option(
    "--online", help="Also check every image, flavor, network, security group and zone the "
                     "config names against its region's Nova (exit 2 naming each missing one, "
                     "1 when a region cannot be read).")]

config_app = typer.Typer(rich_markup_mode=None, help="Work with the config file.",
                         no_args_is_help=True)


@config_app.command("check")
def check(ctx: typer.Context, json_out: JsonOption = False, online: OnlineOption = False,
          ) -> None:
    """Validate the config (exit 2 naming the file, line and field on the first error; every
    region needs the launch settings acquire uses) and summarise regions, flavors, pools,
    groups, contracts, ranking and workloads. With --online, also ask each region's Nova
    for every image, flavor, network, security group and availability zone the config names
    (read-only calls): each one it lacks is named with its field (exit 2).

    \b
    Example:
      scoctl --config /etc/scoctl/config.yaml config check --online
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.cli.config_summary import summarise

    g = globals_of(ctx, json=json_out)
    config = g.config()
    summary = summarise(config)
    found = None
    if online:
        from scoctl.services.catalog import check_online

        found = check_online(config)
        summary["online"] = {"regions": list(found.checked),
                             "missing": [str(u) for u in found.unmet],
                             "unreadable": [f"{r}: {e}" for r, e in found.unreadable]}
    if g.json:
        render.print_json(summary)
        _exit_for(found)
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
    if found is not None:
        for missing in found.unmet:
            print(f"scoctl: error: {config.source_name}: {missing}", file=sys.stderr)
        for region, error in found.unreadable:
            print(f"scoctl: error: region {region}: Nova could not be read: {error}",
                  file=sys.stderr)
        if found.ok:
            print(f"online: every name the config gives is in its region "
                  f"({', '.join(found.checked) or 'no region launches'})")
    _exit_for(found)


@config_app.command("discover")
def discover(
    ctx: typer.Context,
    region: Annotated[str | None, typer.Option(
        "--region", help="The configured region to read (default: the first).",
        show_default=False)] = None,
    flavor: Annotated[list[str] | None, typer.Option(
        "--flavor", help="Only this flavor (repeat for more; default: every flavor).",
        show_default=False)] = None,
    accelerator: Annotated[list[str] | None, typer.Option(
        "--accelerator", help="ALIAS=RESOURCE: count a PCI alias or placement resource class "
        "(VGPU, PGPU, CUSTOM_*) under this Kubernetes resource name (default nvidia.com/gpu).",
        show_default=False)] = None,
    json_out: JsonOption = False,
) -> None:
    """Read the region's flavors (vCPUs, RAM, and accelerators from their extra specs:
    pci_passthrough:alias, resources:VGPU, resources:PGPU, resources:CUSTOM_*) and
    availability zones from Nova, and print the `flavors:` section of a config, so nobody
    types them by hand. Read-only calls; exit 1 when the region cannot be read.

    \b
    Examples:
      scoctl config discover --region region-a > flavors.yaml
      scoctl config discover --accelerator a100=nvidia.com/gpu --flavor g1.4xa100 --json
    """
    from scoctl.cli import render
    from scoctl.cli.common import globals_of
    from scoctl.core.discover import flavors_yaml
    from scoctl.errors import UsageError
    from scoctl.services.catalog import discover_region

    g = globals_of(ctx, json=json_out)
    config = g.config()
    target = config.region(region) if region else config.regions[0]
    names = {}
    for item in accelerator or ():
        source, sep, resource = item.partition("=")
        if not sep or not source.strip() or not resource.strip():
            raise UsageError(f"--accelerator {item!r}: give ALIAS=RESOURCE "
                             "(e.g. a100=nvidia.com/gpu)")
        names[source.strip()] = resource.strip()
    found, zones = discover_region(config, target, names=names, only=flavor or ())
    missing = sorted(set(flavor or ()) - {d.name for d in found})
    if missing:
        raise UsageError(f"--flavor: region {target.name} has no flavor "
                         f"{', '.join(missing)}")
    if g.json:
        render.print_json({"region": target.name, "zones": sorted(set(zones)), "flavors": [
            {"name": d.name, "vcpus": d.vcpus, "ram": f"{d.ram_mib}Mi",
             "accelerators": dict(d.accelerators), "skipped": dict(d.skipped)}
            for d in found]})
        return
    sys.stdout.write(flavors_yaml(found, zones))


def _exit_for(found: OnlineCheck | None) -> None:
    """2 when a region lacks a name the config gives, 1 when a region could not be read."""
    from scoctl.errors import EXIT_FAILURE, EXIT_USAGE

    if found is not None and found.unmet:
        raise typer.Exit(EXIT_USAGE)
    if found is not None and found.unreadable:
        raise typer.Exit(EXIT_FAILURE)


def register(app: typer.Typer) -> None:
    app.add_typer(config_app, name="config")
