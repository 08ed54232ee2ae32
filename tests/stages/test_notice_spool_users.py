"""`scoctl notice` as an operator and the notice stage as the runner's own user, neither root
(design: State, Notices): the spool is root-owned, setgid and writable by a group both users share,
as
`scoctl init` and an operator make it. Whoever spools the first notice creates the spool's
`notices/` folder; the runner must still be able to take the notice in and remove its file.

The suite runs as root, so the module creates a group and two system users in it, and runs
each side through ``setpriv`` as its user.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from scoctl.host.spool import notice_dir
from scoctl.state import open_store
from tests.builders import nova_config
from tests.fixtures.users import HookUser, python_for, system_users

INGEST = """
import json, sys
from scoctl.config.schema import load_config
from scoctl.stages.notice import ingest_spool
from scoctl.state import open_store
from pathlib import Path
config = load_config(Path(sys.argv[1]))
with open_store(config.state) as store:
    taken = ingest_spool(config, store)
    print(json.dumps({"taken": taken, "notices": [n.target for n in store.notices()]}))
"""


@pytest.fixture(scope="module")
def users() -> Iterator[tuple[HookUser, HookUser]]:
    if os.geteuid() != 0:
        pytest.skip("needs root to create the users")
    tag = f"{os.getpid() % 100000}"
    with system_users(f"scoop{tag}", f"scorun{tag}", group=f"scospool{tag}") as made:
        operator, runner = made
        yield operator, runner


def test_a_notice_an_operator_spools_first_is_taken_in_and_removed_by_the_runner(
        users: tuple[HookUser, HookUser]) -> None:
    operator, runner = users
    tmp = Path(tempfile.mkdtemp(prefix="scoctl-spool-users-"))
    try:
        tmp.chmod(0o755)
        home = tmp / "runner"  # the runner's own folder: its state and the SQLite journal
        home.mkdir()
        spool = tmp / "spool"
        spool.mkdir()
        os.chown(spool, 0, operator.gid)
        spool.chmod(0o2775)  # what `scoctl init` makes: setgid, writable by the group
        config = nova_config(home, "nowhere", extra=f"spool: {spool}\n")
        config.chmod(0o644)
        open_store(home / "state.db", create=True).close()
        for path in (home, *home.iterdir()):
            os.chown(path, runner.uid, runner.gid)
        scoctl = python_for(operator, tmp, module="scoctl")
        python = python_for(runner, tmp)

        given = subprocess.run(operator.argv(str(scoctl), "--config", str(config), "notice",
                                             "--pool", "tiny.a", "--at", "+90s"),
                               env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                               timeout=60, check=False)
        assert given.returncode == 0, given.stderr
        folder = notice_dir(spool)
        mode = folder.stat().st_mode
        assert folder.stat().st_uid == operator.uid  # the operator made it …
        assert mode & stat.S_ISGID and mode & stat.S_IWGRP, oct(mode)  # … for the group
        [spooled] = list(folder.glob("*.json"))

        taken = subprocess.run(runner.argv(str(python), "-c", INGEST, str(config)),
                               env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True,
                               timeout=60, check=False)
        assert taken.returncode == 0, taken.stderr
        assert json.loads(taken.stdout) == {"taken": 1, "notices": ["tiny.a"]}
        assert not spooled.exists(), taken.stderr  # removed by the runner: not taken in again
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
