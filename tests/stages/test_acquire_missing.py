"""A name the region lacks fails only the launches that use it (issue 49 item 1).

An image the region does not have, or a flavor, network, security group or zone Nova turns
down (its 400 to the create), is the config's to fix: acquire names it in one ``LAUNCH_FAILED``
per workload and pool (not again within the negative-cache time), returns the workloads in
`held`, reports a ``config`` problem — never a Nova one, which the controller would count as
an outage of the whole region and back off on — and goes on with the other regions. Before,
the image's ConfigError ended the whole stage (every region) and a 400 was a Nova problem.
"""

from __future__ import annotations

from pathlib import Path

from scoctl.adapters.fakes import FakeCloud
from scoctl.clock import FixedClock
from scoctl.config.schema import Config
from scoctl.errors import ConfigError
from scoctl.state import Store, open_store
from tests.stages.test_acquire import (  # noqa: F401  (fixtures)
    acquire,
    config,
    fake,
    make_config,
    set_plan,
    tokens,
)

MISSING = "image: image 'ubuntu-26.04' not found in the cloud"


def test_an_image_the_region_lacks_fails_its_launches_named_and_the_other_region_launches(
    tmp_path: Path, clock: FixedClock, fake: FakeCloud,  # noqa: F811
) -> None:
    two = make_config(tmp_path, regions=2)
    with open_store(tmp_path / "state.db", clock=clock, create=True) as store:
        set_plan(store, "web", {"small.a": 2, "small.b": 1})
        fake.fail_next("image_id", ConfigError("image 'ubuntu-26.04' not found in the cloud",
                                               field="image"))

        result = acquire(two, store, clock, fake)

        assert [(o.region, o.created) for o in result.launches] == [("region-b", 1)]
        assert result.held == ("web",)
        [problem] = result.problems
        assert (problem.api, problem.region) == ("config", "region-a")
        assert "ubuntu-26.04" in problem.error
        [failed] = tokens(store, "LAUNCH_FAILED")
        assert failed["pool"] == "small.a" and failed["region"] == "region-a"
        assert failed["image"] == "img-a" and failed["missing"] == MISSING
        assert not store.launches(status=("intent",))  # nothing in flight: no call was made


def test_the_missing_image_is_named_once_within_the_negative_cache_time(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,  # noqa: F811
) -> None:
    set_plan(store, "web", {"small.a": 2})
    missing = ConfigError("image 'ubuntu-26.04' not found in the cloud", field="image")
    fake.fail_next("image_id", missing, count=3)

    for _ in range(2):
        assert acquire(config, store, clock, fake).held == ("web",)
    assert len(tokens(store, "LAUNCH_FAILED")) == 1
    clock.advance(240)  # past timeouts.negative_cache (3m)
    acquire(config, store, clock, fake)
    assert len(tokens(store, "LAUNCH_FAILED")) == 2
    [launched] = acquire(config, store, clock, fake).launches  # the image is there again
    assert launched.created == 2


def test_a_name_nova_turns_down_fails_that_launch_alone_as_a_config_problem(
    config: Config, store: Store, clock: FixedClock, fake: FakeCloud,  # noqa: F811
) -> None:
    set_plan(store, "web", {"small.a": 2, "medium.a": 1})
    fake.fail_next("launch", ConfigError("Nova refused the launch: Unable to find "
                                         "security_group with name or id 'web-sg'"))

    result = acquire(config, store, clock, fake)

    assert sorted(o.status for o in result.launches) == ["failed", "recorded"]
    assert [p.api for p in result.problems] == ["config"]
    assert result.held == ("web",)
    [failed] = tokens(store, "LAUNCH_FAILED")
    assert "security_group with name or id 'web-sg'" in str(failed["missing"])
