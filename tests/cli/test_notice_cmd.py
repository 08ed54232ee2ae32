"""`scoctl notice`: a reclaim announced through the spool; bad input is exit 2 and no file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scoctl.adapters.nova import NovaCloud
from scoctl.clock import FixedClock
from scoctl.config.schema import load_config
from scoctl.core.model import InstanceRecord, LaunchRequest
from scoctl.host.spool import NOTICE_KIND, notice_dir, pending_events
from scoctl.sim.nova_emulator import IMAGE_ID, NovaEmulator
from scoctl.stages.notice import ingest_spool
from scoctl.state import open_store
from tests.builders import nova_config
from tests.fixtures.nova import write_clouds_yaml
from tests.fixtures.state import Cli


@pytest.fixture
def world(tmp_path: Path) -> Path:
    config = nova_config(tmp_path, "nowhere", extra=f"spool: {tmp_path / 'spool'}\n")
    with open_store(tmp_path / "state.db", create=True) as store:
        for sid, status in (("srv-1", "ready"), ("srv-2", "deleted")):
            store.upsert_instance(InstanceRecord(
                id=sid, name=f"sco-web-{sid}", region="region-a", workload="web",
                pool="tiny.a", generation=1, launch_id="l-1", status=status,
                created=store.now(), updated=store.now()))
    return config


def spooled(tmp_path: Path) -> list[dict[str, object]]:
    return [dict(e.detail) for e in pending_events(notice_dir(tmp_path / "spool"), NOTICE_KIND)]


def test_a_server_notice_is_spooled_and_the_next_pass_records_it(cli: Cli, world: Path,
                                                                 tmp_path: Path) -> None:
    done = cli("--config", str(world), "notice", "--server", "sco-web-srv-1",
               "--at", "2026-05-01T12:00:00+02:00", "--reason", "lease ends", "--json")
    assert done.code == 0, done.stderr
    body = json.loads(done.stdout)
    assert (body["kind"], body["target"], body["region"], body["deadline"]) == (
        "server", "srv-1", "region-a", "2026-05-01T10:00:00.000000Z")
    assert spooled(tmp_path) == [{"kind": "server", "target": "srv-1", "name": "sco-web-srv-1",
                                  "region": "region-a", "at": "2026-05-01T10:00:00.000000Z",
                                  "reason": "lease ends"}]
    with open_store(tmp_path / "state.db", clock=FixedClock()) as store:
        assert ingest_spool(load_config(world), store) == 1
        [notice] = store.notices()
        assert (notice.kind, notice.target, notice.reason) == ("server", "srv-1", "lease ends")
    assert spooled(tmp_path) == []  # consumed once committed


def test_a_pool_notice_takes_a_relative_time(cli: Cli, world: Path, tmp_path: Path) -> None:
    done = cli("--config", str(world), "notice", "--pool", "tiny.a", "--at", "+90s")
    assert done.code == 0, done.stderr
    assert "every server of pool tiny.a" in done.stdout
    [detail] = spooled(tmp_path)
    assert (detail["kind"], detail["target"], detail["region"]) == ("pool", "tiny.a", "region-a")


def test_withdraw_spools_a_withdrawal_that_forgets_the_notice_it_follows(
        cli: Cli, world: Path, tmp_path: Path) -> None:
    given = cli("--config", str(world), "notice", "--pool", "tiny.a", "--at", "+90s")
    assert given.code == 0, given.stderr
    taken = cli("--config", str(world), "notice", "--pool", "tiny.a", "--withdraw", "--json")
    assert taken.code == 0, taken.stderr
    body = json.loads(taken.stdout)
    assert (body["withdraw"], body["kind"], body["target"], body["deadline"]) == (
        True, "pool", "tiny.a", "")
    assert [d.get("at") is None for d in spooled(tmp_path)] == [False, True]
    with open_store(tmp_path / "state.db", clock=FixedClock()) as store:
        assert ingest_spool(load_config(world), store) == 2
        assert store.notices() == []  # given, then taken back, in the order spooled
    assert spooled(tmp_path) == []


@pytest.mark.parametrize(("args", "message"), [
    (["--pool", "nope", "--at", "+60s"], "--pool nope: no such pool"),
    (["--server", "srv-1", "--at", "tomorrow noon"], "--at 'tomorrow noon': not an RFC 3339"),
    (["--server", "srv-1", "--at", "2026-05-01T12:00:00"], "not an RFC 3339 time"),
    (["--server", "srv-2", "--at", "+60s"], "is deleted: nothing is left to reclaim"),
    (["--pool", "tiny.a", "--server", "srv-1", "--at", "+60s"], "one of them"),
    (["--pool", "tiny.a"], "--at is required"),
    (["--pool", "tiny.a", "--withdraw", "--at", "+60s"], "--withdraw takes no --at"),
    (["--pool", "nope", "--withdraw"], "--pool nope: no such pool"),
    (["--pool", "tiny.a", "--at", "9999-12-31T23:59:59Z"], "--at '9999-12-31T23:59:59Z'"),
    (["--pool", "tiny.a", "--at", "0001-01-01T00:00:00+01:00"], "--at '0001-01-01"),
    (["--pool", "tiny.a", "--at", "+999999999999d"], "--at '+999999999999d'"),
    (["--pool", "tiny.a", "--at", "+400d"], "more than 366 days from now"),
    (["--pool", "tiny.a", "--at", "+60s", "--reason", "x" * 70_000], "--reason"),
])
def test_bad_input_is_exit_2_with_the_option_named_and_nothing_spooled(
        cli: Cli, world: Path, tmp_path: Path, args: list[str], message: str) -> None:
    done = cli("--config", str(world), "notice", *args)
    assert done.code == 2, (done.stdout, done.stderr)
    assert message in done.stderr
    assert spooled(tmp_path) == []


def test_an_unknown_server_and_one_scoctl_does_not_manage_are_told_apart(
        cli: Cli, tmp_path: Path, nova_emulator: NovaEmulator,
        monkeypatch: pytest.MonkeyPatch) -> None:
    clouds = write_clouds_yaml(tmp_path, "sim", nova_emulator.url, "p-notice-cli")
    config = nova_config(tmp_path, "sim", extra=f"spool: {tmp_path / 'spool'}\n")
    open_store(tmp_path / "state.db", create=True).close()
    monkeypatch.setenv("OS_CLIENT_CONFIG_FILE", str(clouds))
    cloud = NovaCloud.connect("sim")
    foreign = cloud.launch(LaunchRequest(name="not-ours", flavor="m1.tiny", image=IMAGE_ID))
    other = cli("--config", str(config), "notice", "--server", foreign.servers[0].id,
                "--at", "+60s")
    assert other.code == 2 and "not one scoctl manages" in other.stderr, other.stderr
    unknown = cli("--config", str(config), "notice", "--server", "no-such-id", "--at", "+60s")
    assert unknown.code == 2 and "unknown server" in unknown.stderr, unknown.stderr
    assert spooled(tmp_path) == []
    cloud.delete(foreign.servers[0].id)


def test_control_characters_in_the_reason_are_escaped_in_the_spool_and_the_output(
        cli: Cli, world: Path, tmp_path: Path) -> None:
    done = cli("--config", str(world), "notice", "--pool", "tiny.a", "--at", "+60s",
               "--reason", "lease\x1b[2J ends\nnow\u202e", "--json")
    assert done.code == 0, done.stderr
    escaped = "lease\\x1b[2J ends\\nnow\\u202e"
    assert json.loads(done.stdout)["reason"] == escaped
    assert "\x1b" not in done.stdout
    [detail] = spooled(tmp_path)
    assert detail["reason"] == escaped
