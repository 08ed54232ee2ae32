"""`scoctl run --follow` as a real process, against the Kubernetes and Nova emulators on
127.0.0.1 (real `kubernetes` client, real openstacksdk): demand is planned within the batch
window, the lock is held per pass only, SIGTERM / SIGHUP, API outages, a crash mid-pass.
Every process is stopped by its PID."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from scoctl.services.claims import record_claim
from scoctl.sim import k8s_emulator as ke
from scoctl.sim.nova_emulator import NovaEmulator
from scoctl.state import Store, open_store
from tests.builders import nova_config
from tests.fixtures.k8s import with_scoctl_role
from tests.fixtures.nova import write_clouds_yaml

pytestmark = [pytest.mark.k8s, pytest.mark.nova]

REPO = Path(__file__).resolve().parents[2]
RECLAIMABLE = {"key": "reclaimable", "operator": "Equal", "value": "true",
               "effect": "NoSchedule"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def web_pods(emulator: ke.K8sEmulator, count: int, start: int = 0,
             workload: str = "web") -> None:
    for i in range(start, start + count):
        emulator.add(ke.make_pod(f"{workload}-{i}", "default", cpu="250m", memory="64Mi",
                                 labels={"sco/workload": workload}, unschedulable="0/1 nodes",
                                 tolerations=[RECLAIMABLE]))


@dataclass
class Region:
    home: Path
    config: Path
    k8s: ke.K8sEmulator
    nova: NovaEmulator
    processes: list[subprocess.Popen[str]] = field(default_factory=list)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("SCOCTL_", "OS_", "KUBECONFIG", "SLURM_"))}
        env.update(PYTHONPATH=str(REPO), HOME=str(self.home),
                   SLURM_CONF=str(self.home / "no-slurm.conf"), **extra)
        return env

    def scoctl(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "scoctl", "--config", str(self.config),
                               *args], cwd=self.home, env=self.env(), text=True,
                              capture_output=True, timeout=timeout, check=False)

    def follow(self, **env: str) -> Controller:
        process = subprocess.Popen(
            [sys.executable, "-m", "scoctl", "--config", str(self.config), "run", "--follow",
             "--json"], cwd=self.home, env=self.env(**env), text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.processes.append(process)
        return Controller(process)

    def store(self) -> Store:
        return open_store(self.home / "state.db")


@dataclass
class Controller:
    process: subprocess.Popen[str]
    passes: list[dict[str, Any]] = field(default_factory=list)

    def read_until(self, done: Callable[[dict[str, Any]], bool],
                   timeout: float = 60) -> dict[str, Any]:
        """Passes until one satisfies `done` (returned)."""
        assert self.process.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, (f"no such pass in {timeout} s; last: {self.passes[-3:]}; with "
                              f"errors: {[p for p in self.passes if not p['ok']][-2:]}")
            ready, _, _ = select.select([self.process.stdout], [], [], left)
            if not ready:
                continue
            line = self.process.stdout.readline()
            assert line, f"the controller ended: {self.stop()[1]}"
            one = json.loads(line)
            self.passes.append(one)
            if done(one):
                return one

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> tuple[int, str]:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        _, err = self.process.communicate(timeout=timeout)
        return self.process.returncode, err


def step(one: dict[str, Any], name: str) -> dict[str, Any] | None:
    return next((s for s in one["steps"] if s["step"] == name), None)


def planned(workload: str) -> Callable[[dict[str, Any]], bool]:
    def done(one: dict[str, Any]) -> bool:
        act = step(one, "plan")
        return act is not None and workload in act.get("planned", ())
    return done


@pytest.fixture
def region(tmp_path: Path) -> Iterator[Region]:
    k8s = with_scoctl_role(ke.K8sEmulator(port=free_port())).start()
    nova = NovaEmulator({"timing": {"schedule": 0.0, "recheck": 0.0, "active": 0.0}},
                        port=free_port()).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(k8s.kubeconfig(), encoding="utf-8")
    write_clouds_yaml(tmp_path, "ctl-test", nova.url, "ctl-project")
    config = nova_config(tmp_path, "ctl-test", extra=(
        f"kubernetes: {{kubeconfig: {kubeconfig}, context: scoctl-sim}}\n"
        f"spool: {tmp_path / 'spool'}\n"
        f"metrics: {{textfile: {tmp_path / 'scoctl.prom'}}}\n"))
    open_store(tmp_path / "state.db", create=True).close()
    found = Region(tmp_path, config, k8s, nova)
    try:
        yield found
    finally:
        for process in found.processes:
            if process.poll() is None:
                process.kill()
            process.communicate()  # reaps it and closes its pipes
        k8s.stop()
        nova.stop()


def test_a_delta_is_planned_in_the_batch_window_and_others_run_beside_the_controller(
    region: Region,
) -> None:
    controller = region.follow()
    controller.read_until(lambda one: step(one, "reconcile") is not None)  # settled
    web_pods(region.k8s, 3)
    added = time.monotonic()
    one = controller.read_until(planned("web"))
    seconds = time.monotonic() - added
    assert seconds < 5.0, seconds  # batch_idle 1 s + a pass; batch_max 5 s bounds it anyway
    assert step(one, "watch")["changed"] == ["web"]
    assert step(one, "acquire")["launched"] >= 1, one
    # beside it: a reader, a dry-run, a hook and a timer's one-shot pass all work
    status = region.scoctl("status", "--json")
    assert status.returncode == 0, status.stderr
    body = json.loads(status.stdout)
    assert body["claims"][0]["pods"] == 3
    decision = body["latency"]["placement_decision"]
    assert decision["samples"] == 1 and 0 < decision["p50"] == decision["p99"] < 5.0
    assert "Latency: placement decision p50" in region.scoctl("status").stdout
    assert region.scoctl("plan", "--dry-run").returncode == 0
    hook = region.scoctl("emit", "POD_QUEUED", "--workload", "web", "--hook")
    assert hook.returncode == 0, hook.stderr
    controller.read_until(lambda one: (step(one, "watch") or {}).get("spool_events", 0) > 0,
                          timeout=30)  # the spool is looked at every second
    once = region.scoctl("run", "--once", "--json", "--wait", "10")
    assert once.returncode == 0, once.stderr
    with region.store() as store:
        tokens = [e.token for e in store.events(workload="web")]
        samples = store.latency_samples("placement_decision")
    assert "POD_QUEUED" in tokens and "PLAN_UPDATED" in tokens
    assert samples and samples[-1].workload == "web" and samples[-1].seconds < 5.0
    textfile = region.home / "scoctl.prom"
    deadline = time.monotonic() + 30  # the controller's next pass rewrites what run --once wrote
    while "scoctl_controller_pass_timestamp_seconds" not in textfile.read_text("utf-8"):
        assert time.monotonic() < deadline, textfile.read_text("utf-8")
        time.sleep(0.1)
    assert "scoctl_placement_decision_seconds_count 1" in textfile.read_text("utf-8")
    code, err = controller.stop()
    assert code == 0, err
    assert "Traceback" not in err


def test_sigterm_finishes_the_pass_in_hand_and_exits_0_within_10_seconds(
    region: Region,
) -> None:
    controller = region.follow()
    controller.read_until(lambda one: step(one, "reconcile") is not None)
    web_pods(region.k8s, 5)
    time.sleep(1.1)  # the window closes: a pass is about to run or running
    started = time.monotonic()
    code, err = controller.stop(signal.SIGTERM)
    seconds = time.monotonic() - started
    assert code == 0, err
    assert seconds < 10.0, seconds
    assert "SIGTERM: stopped" in err
    # the lock went with it
    assert region.scoctl("run", "--once", "--json").returncode == 0


def test_sighup_reloads_and_an_invalid_config_is_refused_naming_file_line_and_field(
    region: Region,
) -> None:
    controller = region.follow()
    controller.read_until(lambda one: step(one, "reconcile") is not None)
    good = region.config.read_text(encoding="utf-8")
    region.config.write_text(good + "intake: {batch_idle: 20s}\n", encoding="utf-8")
    controller.process.send_signal(signal.SIGHUP)
    time.sleep(1.0)
    web_pods(region.k8s, 2)  # the old config (1 s batch window) still runs the controller
    controller.read_until(planned("web"), timeout=30)
    region.config.write_text(good + "intake: {batch_idle: 2s, batch_max: 5s}\n",
                             encoding="utf-8")
    controller.process.send_signal(signal.SIGHUP)
    time.sleep(1.0)
    code, err = controller.stop()
    assert code == 0, err
    line = len(good.splitlines()) + 1
    refused = [x for x in err.splitlines() if "config refused" in x]
    assert len(refused) == 1, err
    assert f"{region.config}:{line}" in refused[0] and "intake.batch_idle" in refused[0]
    assert "config reloaded" in err


def test_sighup_applies_a_new_buffer_at_once(region: Region) -> None:
    # design: Disruption/Buffers: a reload applies `buffers` without a restart and without a pod
    # event
    controller = region.follow()
    web_pods(region.k8s, 2)
    controller.read_until(planned("web"), timeout=30)
    good = region.config.read_text(encoding="utf-8")
    region.config.write_text(good + "buffers: [{workload: web, replicas: 4}]\n",
                             encoding="utf-8")
    controller.process.send_signal(signal.SIGHUP)
    one = controller.read_until(planned("web"), timeout=30)
    assert step(one, "watch")["changed"] == ["web"]
    code, err = controller.stop()
    assert code == 0, err
    with region.store() as store:
        claim = store.claim("web")
    # 2 pods of 250m / 64Mi and 4 chunks of the largest pod
    assert claim is not None and claim.pods == 2
    assert claim.requests == {"cpu": 6 * 250, "memory": 6 * 64 * 2**20}


def test_the_kubernetes_api_going_away_degrades_then_the_controller_relists_and_catches_up(
    region: Region,
) -> None:
    controller = region.follow()
    controller.read_until(lambda one: step(one, "reconcile") is not None)
    region.k8s.stop()  # the API server goes away
    web_pods(region.k8s, 4, workload="late")  # created while it is down
    region.k8s.compact()  # and its watch history is gone: the controller must re-list
    time.sleep(6.0)
    assert controller.process.poll() is None  # degraded, not dead
    region.k8s.start()  # back on the same port
    one = controller.read_until(planned("late"), timeout=60)
    assert step(one, "watch")["changed"] == ["late"]
    code, err = controller.stop()
    assert code == 0, err
    with region.store() as store:
        claim = store.claim("late")
        events = [e for e in store.events() if e.token.startswith("API_")]
    assert claim is not None and claim.pods == 4
    down = [e for e in events if e.token == "API_UNAVAILABLE"]
    assert [e.detail["api"] for e in down] == ["kubernetes"]  # one warning for the outage
    assert [e.token for e in events][-1] == "API_RECOVERED"
    assert err.count("kubernetes unavailable") == 1


def test_nova_going_away_is_one_warning_and_the_launch_happens_when_it_is_back(
    region: Region,
) -> None:
    controller = region.follow()
    controller.read_until(lambda one: step(one, "reconcile") is not None)
    region.nova.inject(503, count=40)  # Nova answers nothing but 503 for its next 40 calls
    web_pods(region.k8s, 2)
    failed = controller.read_until(planned("web"))
    assert not failed["ok"], failed  # planned, but Nova refused the launch
    controller.read_until(lambda one: (step(one, "acquire") or {}).get("launched", 0) > 0,
                          timeout=120)
    code, err = controller.stop()
    assert code == 0, err
    with region.store() as store:
        down = [e for e in store.events() if e.token == "API_UNAVAILABLE"]
        recovered = [e for e in store.events() if e.token == "API_RECOVERED"]
    assert [e.detail["api"] for e in down] == ["nova"]  # one warning for the whole outage
    assert [e.detail["api"] for e in recovered] == ["nova"]
    assert err.count("nova unavailable") == 1


def test_a_crash_mid_pass_loses_nothing_and_launches_nothing_twice(region: Region) -> None:
    # killed right after Nova created the servers, before anything was recorded
    crashing = region.follow(SCOCTL_CRASH_AT="after-call")
    web_pods(region.k8s, 3)
    crashing.process.communicate(timeout=60)
    assert crashing.process.returncode == -signal.SIGKILL
    with region.store() as store:
        assert store.claim("web") is not None and "web" in store.plans()  # committed
        assert [x.status for x in store.launches()] == ["intent"]
        assert store.instances(workload="web") == []
    controller = region.follow()
    controller.read_until(lambda one: step(one, "reconcile") is not None)
    code, err = controller.stop()
    assert code == 0, err
    with region.store() as store:
        plan = store.plans()["web"]
        live = [i for i in store.instances(workload="web") if i.status != "deleted"]
    wanted = sum(u.units for u in plan.pools)
    servers = [s for s in region.nova.servers_summary() if "sco:workload=web" in s["tags"]]
    assert wanted >= 1 and len(servers) == wanted  # adopted, not launched again
    assert sorted(i.id for i in live) == sorted(s["id"] for s in servers)


def receive(sock: socket.socket, wanted: str, timeout: float = 30) -> list[str]:
    """Datagrams until one holds the line `wanted`; every message's lines, in order."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while wanted not in lines:
        left = deadline - time.monotonic()
        assert left > 0, f"no {wanted} in {timeout} s; got {lines}"
        sock.settimeout(left)
        lines.extend(sock.recv(4096).decode().splitlines())
    return lines


def test_systemd_hears_ready_watchdog_status_reloading_and_stopping(region: Region) -> None:
    name = f"scoctl-test-{os.getpid()}-{time.monotonic_ns()}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0" + name.encode())  # an abstract socket, as systemd names them "@…"
        controller = region.follow(NOTIFY_SOCKET=f"@{name}", WATCHDOG_USEC="2000000")
        heard = receive(sock, "READY=1")
        heard += receive(sock, "WATCHDOG=1")
        controller.process.send_signal(signal.SIGHUP)
        heard += receive(sock, "RELOADING=1")
        heard += receive(sock, "READY=1")  # the reload is done
        code, err = controller.stop()
        heard += receive(sock, "STOPPING=1")
    assert code == 0, err
    assert any(line.startswith("STATUS=pass ") for line in heard), heard


def test_the_notifier_speaks_to_a_socket_path_and_is_silent_without_one(tmp_path: Path) -> None:
    from scoctl.host.notify import Notifier

    path = tmp_path / "notify.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        notifier = Notifier({"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "30000000"})
        assert notifier.ready("watching") and notifier.ping()
        assert sock.recv(4096) == b"READY=1\nSTATUS=watching"
        assert sock.recv(4096) == b"WATCHDOG=1"
        assert notifier.watchdog == 30.0
    other = Notifier({"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "1", "WATCHDOG_PID": "1"})
    assert other.watchdog is None  # the watchdog is another process's
    silent = Notifier({})
    assert not silent.enabled and not silent.ready("x") and not silent.ping()
    gone = Notifier({"NOTIFY_SOCKET": str(tmp_path / "nobody-listens")})
    assert gone.enabled and not gone.stopping()  # systemd gone: no error, no exit


def test_a_claim_another_process_writes_is_planned_at_the_next_poll(region: Region) -> None:
    from scoctl.host.lock import run_lock

    controller = region.follow()
    controller.read_until(lambda one: step(one, "reconcile") is not None)
    with run_lock(region.home / "state.db", wait=10), region.store() as store:
        # another process writes a claim (a claims file, an operator's tool): no plan yet
        record_claim(store, "batch", contract="T1", requests={"cpu": 500, "memory": 64 * 2**20},
                        largest_pod={"cpu": 500, "memory": 64 * 2**20}, pods=1, source="slurm")
    one = controller.read_until(planned("batch"), timeout=30)
    assert step(one, "watch")["changed"] == []  # no watch saw it: the poll found it behind
    code, err = controller.stop()
    assert code == 0, err


def test_the_controller_deletes_the_join_tokens_of_registered_nodes(region: Region) -> None:
    # issue 28 item 7: reconcile under the controller got the cached cluster, which had no
    # token calls, so tokens were never pruned (each stayed valid for its 20 minutes)
    controller = region.follow()
    controller.read_until(lambda one: step(one, "reconcile") is not None)
    web_pods(region.k8s, 2)
    controller.read_until(lambda one: (step(one, "acquire") or {}).get("launched", 0) > 0)
    assert region.k8s.objects("Secret", "kube-system"), "no bootstrap token was made"
    servers = [s for s in region.nova.servers_summary() if "sco:workload=web" in s["tags"]]
    assert servers
    for server in servers:  # each node registers, as kubelet does
        region.k8s.add(ke.make_node(
            server["name"], cpu="1", memory="512Mi", taints=[RECLAIMABLE],
            provider_id=f"openstack:///{server['id']}",
            labels={"sco/managed": "true", "sco/workload": "web", "sco/pool": "tiny.a",
                    "sco/instance": server["id"]}))
    deadline = time.monotonic() + 45  # a managed node's arrival asks for a reconcile
    while region.k8s.objects("Secret", "kube-system"):
        assert time.monotonic() < deadline, region.k8s.objects("Secret", "kube-system")
        controller.read_until(lambda one: step(one, "reconcile") is not None)
    code, err = controller.stop()
    assert code == 0, err
    with region.store() as store:
        deleted = [e.detail["reason"] for e in store.events()
                   if e.token == "JOIN_TOKEN_DELETED"]
    assert deleted and set(deleted) == {"nodes registered"}


def metric_becomes(path: Path, line: str, timeout: float = 20) -> None:
    """Wait until the metrics textfile holds `line` (a pass writes it)."""
    deadline = time.monotonic() + timeout
    while not (path.exists() and line in path.read_text("utf-8").splitlines()):
        assert time.monotonic() < deadline, (line, path.read_text("utf-8")
                                             if path.exists() else "no textfile")
        time.sleep(0.2)


def test_a_sighup_is_an_event_and_a_metric_and_signals_are_told_as_info(region: Region) -> None:
    # issue 49 item 6: SIGHUP and SIGTERM are normal operations (not warnings); a refused
    # reload is a warning event naming file, line and field, and the metric says so
    textfile = region.home / "scoctl.prom"
    controller = region.follow()
    controller.read_until(lambda one: step(one, "reconcile") is not None)
    metric_becomes(textfile, "scoctl_config_last_reload_successful 1")
    good = region.config.read_text(encoding="utf-8")
    region.config.write_text(good + "intake: {batch_idle: 20s}\n", encoding="utf-8")
    controller.process.send_signal(signal.SIGHUP)
    metric_becomes(textfile, "scoctl_config_last_reload_successful 0")
    with region.store() as store:
        refused = [e for e in store.events() if e.token == "CONFIG_RELOAD_REFUSED"]
    assert len(refused) == 1 and refused[0].level == "warning", refused
    line = len(good.splitlines()) + 1
    assert refused[0].detail["file"] == str(region.config)
    assert refused[0].detail["line"] == line
    assert refused[0].detail["field"] == "intake.batch_idle"
    region.config.write_text(good, encoding="utf-8")
    controller.process.send_signal(signal.SIGHUP)
    metric_becomes(textfile, "scoctl_config_last_reload_successful 1")
    code, err = controller.stop()
    assert code == 0, err
    with region.store() as store:
        reloaded = [e for e in store.events() if e.token == "CONFIG_RELOADED"]
    assert len(reloaded) == 1 and reloaded[0].level == "info"
    assert reloaded[0].detail == {"file": str(region.config)}
    said = err.splitlines()
    assert [x for x in said if "config refused" in x][0].startswith("scoctl: warning: ")
    assert "scoctl: SIGHUP: config reloaded from " + str(region.config) in said, err
    assert any(x.startswith("scoctl: SIGTERM: stopped after ") for x in said), err
    assert not [x for x in said if "warning" in x and ("reloaded" in x or "SIGTERM" in x)]


def test_a_second_controller_on_the_state_stands_by_and_takes_over_when_the_first_stops(
    region: Region,
) -> None:
    # issue 49 item 7: two controllers on one host and state: the second neither exits 75 nor
    # takes turns; it stands by, and leads once the first is stopped (SIGTERM to its PID)
    first = region.follow()
    first.read_until(lambda one: step(one, "reconcile") is not None)
    second = region.follow()
    assert second.process.stderr is not None and second.process.stdout is not None
    ready, _, _ = select.select([second.process.stderr], [], [], 30)
    assert ready, "the second controller said nothing"
    said = second.process.stderr.readline()
    assert "standing by" in said and f"(pid {first.process.pid})" in said, said
    web_pods(region.k8s, 2)
    first.read_until(planned("web"), timeout=30)  # the first one places the demand
    ready, _, _ = select.select([second.process.stdout], [], [], 2.0)
    assert not ready and second.process.poll() is None  # no pass of its own: it stands by
    # a timer's pass still runs beside both (the standby holds no run lock)
    timer = region.scoctl("run", "--once", "--wait", "30", "--json")
    assert timer.returncode == 0, timer.stderr
    code, err = first.stop(signal.SIGTERM)
    assert code == 0, err
    stopped = time.monotonic()
    ready, _, _ = select.select([second.process.stderr], [], [], 10)
    said = second.process.stderr.readline() if ready else ""
    assert "the other controller stopped: taking over" in said, said
    assert time.monotonic() - stopped < 5  # it tries the lock every second
    second.read_until(lambda one: step(one, "reconcile") is not None, timeout=60)
    web_pods(region.k8s, 2, start=2)
    second.read_until(planned("web"), timeout=30)  # it places demand now
    code, err = second.stop()
    assert code == 0, err
    with region.store() as store:
        claim = store.claim("web")
    assert claim is not None and claim.pods == 4


def test_a_standby_tells_systemd_it_is_up_and_takes_the_lock_once_it_is_free(
    tmp_path: Path,
) -> None:
    import threading
    from contextlib import ExitStack

    from scoctl.errors import LockHeld
    from scoctl.host.lock import controller_lock
    from scoctl.host.notify import Notifier
    from scoctl.runner.standby import standing_by

    state = tmp_path / "state.db"
    name = f"scoctl-standby-{os.getpid()}-{time.monotonic_ns()}"
    held = ExitStack()
    held.enter_context(controller_lock(state))  # another controller's, as far as flock goes
    release = threading.Timer(1.0, held.close)
    said: list[str] = []
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0" + name.encode())
        notifier = Notifier({"NOTIFY_SOCKET": f"@{name}", "WATCHDOG_USEC": "2000000"})
        release.start()
        with standing_by(state, inform=said.append, retry=0.1, notifier=notifier) as standby:
            assert standby.waited and standby.stopped is None
            # held now: a third controller stands by in its turn
            with pytest.raises(LockHeld, match="holds the controller lock"), \
                    controller_lock(state):
                pass
        heard = receive(sock, "WATCHDOG=1", timeout=5)
    release.join()
    assert heard[0] == "READY=1" and heard[1].startswith("STATUS=standing by: ")
    assert "standing by" in said[0] and f"(pid {os.getpid()})" in said[0]
    assert said[-1] == "the other controller stopped: taking over"
