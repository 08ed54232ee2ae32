"""A stalled API costs one timeout, not one per call (issue 28 item 6; `adapters.guard`).

Real clients against real sockets on 127.0.0.1: `silent_server` accepts connections and never
answers (a paused API server), the Nova emulator holds an answer back (`inject(stall=...)`)
and then answers again. Before the guard, every call to a stalled API waited `timeouts.api`
and was retried, so one stalled region held the whole pass for attempts × calls × timeout.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from scoctl.adapters.guard import Guard, GuardedCloud
from scoctl.adapters.retry import RetryPolicy
from scoctl.config.schema import load_config
from scoctl.errors import PermanentError, Refused, TemporaryError, Unanswered
from scoctl.runner.compose import Regions
from scoctl.sim.nova_emulator import IMAGE_ID, NovaEmulator
from tests.builders import BOOTSTRAP
from tests.fixtures.nova import write_clouds_yaml
from tests.fixtures.silent import SilentServer

API = 0.4


def nova_config(tmp: Path, url: str):  # type: ignore[no-untyped-def]
    write_clouds_yaml(tmp, "nova", url, "p1")
    path = tmp / "c.yaml"
    path.write_text(f"""\
state: {tmp}/s.db
budget_dir: {tmp}/budget
regions:
  - {{name: region-a, cloud: nova, clouds_yaml: {tmp}/clouds.yaml,
     launch: {{image: {IMAGE_ID}, networks: [none]}}}}
flavors: [{{name: m1.tiny, vcpus: 1, ram: 512Mi}}]
pools:
  - {{name: tiny.a, region: region-a, az: nova, flavor: m1.tiny, group: g1,
     tier: reclaimable, depth: 20}}
contracts: {{T1: {{floor: 0, pool_cap: 1.0, group_cap: 1.0, min_pools: 1}}}}
ranking: {{id: r-1, scores: {{tiny.a: 0.5}}}}
workloads: [{{name: web, contract: T1, source: k8s}}]
timeouts: {{api: {API}s, retry_budget: 5s}}
{BOOTSTRAP}""")
    return load_config(path)


def test_a_nova_call_without_an_answer_is_unanswered_once_and_the_regions_other_calls_fail_at_once(
        tmp_path: Path, silent_server: SilentServer) -> None:
    config = nova_config(tmp_path, silent_server.url + "/v2.1")
    regions = Regions()
    try:
        cloud = regions.cloud(config, config.regions[0])
        started = time.monotonic()
        with pytest.raises(Unanswered) as first:
            cloud.servers(tags=["sco:managed"])
        waited = time.monotonic() - started
        assert first.value.sent
        assert silent_server.accepted == 1  # not retried: one timeout, not four
        assert waited < API * 4
        assert set(regions.stalled()) == {"region-a"}

        started = time.monotonic()
        with pytest.raises(Unanswered) as second:
            cloud.server("00000000-0000-0000-0000-000000000001")
        assert not second.value.sent and "not called" in str(second.value)
        with pytest.raises(Refused):  # a launch not sent created nothing: free to go elsewhere
            cloud.launch(None)  # type: ignore[arg-type]
        assert time.monotonic() - started < API  # no wait at all
        assert silent_server.accepted == 1
    finally:
        regions.close()


def test_the_controllers_guard_probes_until_the_region_answers_then_lets_calls_through(
        tmp_path: Path) -> None:
    nova = NovaEmulator({"quota": {"instances": -1, "cores": -1, "ram": -1}}).start()
    try:
        config = nova_config(tmp_path, nova.url)
        regions = Regions(probe=True)
        try:
            cloud = regions.cloud(config, config.regions[0])
            nova.inject(503, count=2, methods=["GET"], stall=API * 4)  # held back, then 503
            with pytest.raises(Unanswered):
                cloud.servers()
            assert set(regions.stalled()) == {"region-a"}
            # the first probe (after 1 s) is held back too; the next one gets Nova's 404
            deadline = time.monotonic() + 20
            while regions.stalled() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert regions.stalled() == {}
            assert regions.recoveries() == 1
            assert cloud.servers() == []  # calls go through again
        finally:
            regions.close()
    finally:
        nova.stop()


def test_a_guard_counts_any_answer_as_the_api_being_back_and_a_5xx_probe_as_not_yet() -> None:
    answers = iter([TemporaryError("503"), Unanswered("again"), PermanentError("404")])
    probed = threading.Event()

    def probe() -> None:
        answer = next(answers, None)
        if answer is None:
            probed.set()
            return
        raise answer

    guard = Guard("API x", probe=probe, backoff=(0.01, 0.02))
    guard.trip(Unanswered("no answer"))
    assert guard.stalled == "no answer"
    with pytest.raises(Unanswered):
        guard.check()
    deadline = time.monotonic() + 5
    while guard.stalled is not None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert guard.stalled is None and guard.cleared == 1  # cleared by the 404, the 3rd probe
    assert next(answers, "spent") == "spent"
    guard.trip(Unanswered("not sent", sent=False))  # a call not sent proves nothing
    assert guard.stalled is None
    guard.close()


def test_a_guarded_call_that_gets_an_error_answer_clears_the_guard() -> None:
    guard = Guard("API y")
    guard.trip(Unanswered("no answer"))
    guard.answered()
    cloud = GuardedCloud(type("C", (), {"flavors": lambda self: (_ for _ in ()).throw(
        PermanentError("403"))})(), guard)  # type: ignore[arg-type]
    guard.trip(Unanswered("again"))
    with pytest.raises(Unanswered):
        cloud.flavors()
    guard.answered()
    with pytest.raises(PermanentError):
        cloud.flavors()
    assert guard.stalled is None


def test_unanswered_is_never_retried_while_other_temporary_errors_are() -> None:
    slept: list[float] = []
    policy = RetryPolicy(sleep=slept.append)
    calls: list[int] = []

    def unanswered() -> None:
        calls.append(1)
        raise Unanswered("no answer in time")

    with pytest.raises(Unanswered):
        policy.call(unanswered)
    assert calls == [1] and slept == []

    def flaky() -> str:
        calls.append(2)
        if calls.count(2) < 3:
            raise TemporaryError("503")
        return "ok"

    assert policy.call(flaky) == "ok" and calls.count(2) == 3


def test_a_kubernetes_api_without_an_answer_costs_one_timeout_then_calls_fail_at_once(
        tmp_path: Path, silent_server: SilentServer) -> None:
    from scoctl.adapters.kubernetes import KubernetesCluster

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "silent",
        "clusters": [{"name": "silent", "cluster": {"server": silent_server.url}}],
        "users": [{"name": "silent", "user": {"token": "t"}}],
        "contexts": [{"name": "silent", "context": {"cluster": "silent", "user": "silent"}}]}))
    cluster = KubernetesCluster(str(kubeconfig), read_timeout=API)
    try:
        with pytest.raises(Unanswered):
            cluster.cordon("node-1")
        assert cluster.guard.stalled is not None
        started = time.monotonic()
        for call in (lambda: cluster.evict("default", "web-1"), cluster.bootstrap_tokens,
                     lambda: cluster.delete_node("node-1")):
            with pytest.raises(Unanswered, match="not called"):
                call()
        assert time.monotonic() - started < API
        assert silent_server.accepted == 1
    finally:
        cluster.close()
