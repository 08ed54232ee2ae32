"""``config check --online``: every name the config gives, checked against its region.

Per region with launch settings: its image, networks (not the words ``auto``/``none``) and
security groups, and each of its pools' flavor and availability zone, against what the
region's Nova lists (`adapters.factory.catalog_for`), by `core.catalog.unmet`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from scoctl.config.schema import Config, Region
from scoctl.core.catalog import Catalog, Kind, Unmet, Wanted, unmet
from scoctl.core.discover import Discovered, discover
from scoctl.errors import ApiError

CatalogReader = Callable[[Config, Region], Catalog]


@dataclass(frozen=True)
class OnlineCheck:
    """What the check found: names the regions lack, and the regions it could not read."""

    unmet: tuple[Unmet, ...]
    unreadable: tuple[tuple[str, str], ...]  # (region, error)
    checked: tuple[str, ...]  # the regions read

    @property
    def ok(self) -> bool:
        return not self.unmet and not self.unreadable


def wanted_of(config: Config, index: int, region: Region) -> list[Wanted]:
    """The names `region` (the `index`th of `regions:`) must offer, each with its field."""
    launch = region.launch
    if launch is None:
        return []
    out = [Wanted(Kind.IMAGE, launch.image, f"regions[{index}].launch.image")]
    out += [Wanted(Kind.NETWORK, name, f"regions[{index}].launch.networks")
            for name in launch.networks if name not in ("auto", "none")]
    out += [Wanted(Kind.SECURITY_GROUP, name, f"regions[{index}].launch.security_groups")
            for name in launch.security_groups]
    for at, pool in enumerate(config.pools):
        if pool.region != region.name:
            continue
        out.append(Wanted(Kind.FLAVOR, pool.flavor, f"pools[{at}].flavor"))
        if pool.az:
            out.append(Wanted(Kind.ZONE, pool.az, f"pools[{at}].az"))
    return out


def check_online(config: Config, read: CatalogReader | None = None,
                 regions: Sequence[Region] | None = None) -> OnlineCheck:
    """Read each region's catalog and check the config's names against it."""
    if read is None:
        from scoctl.adapters.factory import catalog_for

        read = catalog_for
    found: list[Unmet] = []
    unreadable: list[tuple[str, str]] = []
    checked: list[str] = []
    chosen = list(regions) if regions is not None else list(config.regions)
    for index, region in enumerate(config.regions):
        if region not in chosen or region.launch is None:
            continue
        try:
            catalog = read(config, region)
        except ApiError as exc:
            unreadable.append((region.name, str(exc)))
            continue
        checked.append(region.name)
        found.extend(unmet(region.name, wanted_of(config, index, region), catalog))
    return OnlineCheck(tuple(found), tuple(unreadable), tuple(checked))


def discover_region(config: Config, region: Region, *, names: Mapping[str, str],
                    only: Sequence[str] = ()) -> tuple[list[Discovered], tuple[str, ...]]:
    """`scoctl config discover`: `region`'s flavors as the config writes them (those named in
    `only`, else all) and its availability zones. Raises ConfigError, TemporaryError,
    PermanentError (a region that cannot be read)."""
    from scoctl.adapters.factory import catalog_for, cloud_for

    flavors = cloud_for(config, region).flavors()
    return discover(flavors, names, only), catalog_for(config, region).zones
