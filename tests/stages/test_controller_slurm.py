"""`scoctl run --follow` with real Slurm daemons: pending jobs are polled every `slurm.poll`
through slurmrestd and planned; slurmrestd going away (a loopback proxy in front of it is
stopped, then started again on the same port) degrades the controller with one warning, and it
catches up on the jobs submitted meanwhile. Processes are stopped by PID."""

from __future__ import annotations

import os
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from scoctl.sim.nova_emulator import IMAGE_ID, NovaEmulator
from scoctl.state import open_store
from tests.fixtures.nova import write_clouds_yaml
from tests.fixtures.slurm import SlurmCluster, wait_for
from tests.stages.test_controller import Controller, free_port, planned, step

pytestmark = [pytest.mark.slurm, pytest.mark.nova]

REPO = Path(__file__).resolve().parents[2]
LOCAL_ONLY = ("-p", "cpu", "-x", "big-cpu-1")


class Proxy:
    """A TCP forwarder on 127.0.0.1:`port` to `target`; `stop` closes it and every connection
    it carries (the server is gone), `start` listens again on the same port."""

    def __init__(self, port: int, target: tuple[str, int]) -> None:
        self.port, self.target = port, target
        self.listener: socket.socket | None = None
        self.conns: list[socket.socket] = []
        self.lock = threading.Lock()

    def start(self) -> Proxy:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(16)
        self.listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            with self.lock:
                self.conns += [client, upstream]
            threading.Thread(target=self._pipe, args=(client, upstream), daemon=True).start()

    def _pipe(self, a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                ready, _, _ = select.select([a, b], [], [], 1.0)
                for sock in ready:
                    data = sock.recv(65536)
                    if not data:
                        return
                    (b if sock is a else a).sendall(data)
        except OSError:
            return
        finally:
            a.close()
            b.close()

    def stop(self) -> None:
        if self.listener is not None:
            try:  # wakes the accept() in flight (a close alone leaves it listening on Linux)
                self.listener.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self.listener.close()
            self.listener = None
        with self.lock:
            for sock in self.conns:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                sock.close()
            self.conns.clear()


@pytest.fixture
def proxy(slurm_cluster: SlurmCluster) -> Iterator[Proxy]:
    assert slurm_cluster.rest_url, "slurmrestd is not running"
    where = urlsplit(slurm_cluster.rest_url)
    found = Proxy(free_port(), (where.hostname or "127.0.0.1", int(where.port or 80))).start()
    try:
        yield found
    finally:
        found.stop()


def test_the_controller_polls_slurm_and_rides_out_a_slurmrestd_outage(
    slurm_cluster: SlurmCluster, proxy: Proxy, tmp_path: Path,
) -> None:
    nova = NovaEmulator({"timing": {"schedule": 0.0, "recheck": 0.0, "active": 0.0}}).start()
    token = tmp_path / "jwt"
    token.write_text(slurm_cluster.token, encoding="utf-8")
    write_clouds_yaml(tmp_path, "ctl-slurm", nova.url, "ctl-slurm")
    config = tmp_path / "config.yaml"
    config.write_text(f"""
state: {tmp_path}/state.db
spool: {tmp_path}/spool
budget_dir: {tmp_path}/run
regions:
  - {{name: region-a, cloud: ctl-slurm, clouds_yaml: {tmp_path}/clouds.yaml,
     launch: {{image: {IMAGE_ID}, networks: [none]}}}}
flavors: [{{name: m1.small, vcpus: 1, ram: 2Gi}}]
pools: [{{name: small.a, region: region-a, az: nova, flavor: m1.small, group: g1,
         tier: reclaimable, depth: 20}}]
contracts: {{T2: {{floor: 0.0, min_pools: 1}}}}
ranking: {{id: r-1, scores: {{small.a: 0.9}}}}
workloads:
  - {{name: train-llm, contract: T2, source: slurm, kind: job, account: ml-team}}
  - {{name: cloud-batch, contract: T2, source: slurm, kind: job, partition: cloud}}
slurm: {{rest_url: "http://127.0.0.1:{proxy.port}", rest_token_file: {token}, poll: 1s,
         timeout: 5s}}
""", encoding="utf-8")
    open_store(tmp_path / "state.db", create=True).close()
    env = {k: v for k, v in slurm_cluster.env.items()
           if not k.startswith(("SCOCTL_", "OS_", "KUBECONFIG"))}
    env.update(PYTHONPATH=str(REPO), HOME=str(tmp_path))
    hog = slurm_cluster.sbatch(*LOCAL_ONLY, "-c", "4", "-J", "ctl-hog", "--wrap", "sleep 300")
    jobs: list[int] = []
    process = subprocess.Popen([sys.executable, "-m", "scoctl", "--config", str(config), "run",
                                "--follow", "--json"], cwd=tmp_path, env=env, text=True,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    controller = Controller(process)
    try:
        assert wait_for(lambda: slurm_cluster.run("squeue", "-h", "-j", str(hog), "-o", "%T",
                                                  check=False).strip() == "RUNNING", timeout=20)
        jobs += [slurm_cluster.sbatch(*LOCAL_ONLY, "-A", "ml-team", "-c", "1",
                                      "--mem-per-cpu=512M", "-J", "ctl-job", "--wrap", "true")
                 for _ in range(2)]
        controller.read_until(planned("train-llm"), timeout=60)
        proxy.stop()  # slurmrestd goes away
        jobs.append(slurm_cluster.sbatch(*LOCAL_ONLY, "-A", "ml-team", "-c", "1",
                                         "--mem-per-cpu=512M", "-J", "ctl-job", "--wrap",
                                         "true"))
        time.sleep(5.0)
        assert process.poll() is None  # degraded, not dead
        proxy.start()  # back on the same port
        controller.read_until(planned("train-llm"), timeout=90)
        # Slurm's ResumeProgram asks for a CLOUD node: a power request through the spool
        resume = subprocess.run([sys.executable, "-m", "scoctl", "--config", str(config),
                                 "slurm", "resume", "test-cloud-1"], cwd=tmp_path, env=env,
                                capture_output=True, text=True, timeout=60, check=False)
        assert resume.returncode == 0, resume.stderr
        one = controller.read_until(planned("cloud-batch"), timeout=30)
        code, err = controller.stop()
    finally:
        slurm_cluster.cancel(hog, *jobs)
        if process.poll() is None:
            process.kill()
        process.communicate()
        nova.stop()
    assert code == 0, err
    with open_store(tmp_path / "state.db") as store:
        claim = store.claim("train-llm")
        events = [e for e in store.events() if e.token.startswith("API_")]
    assert claim is not None and claim.pods == 3
    assert (step(one, "slurm-power") or {}).get("power_requests") == 1
    with open_store(tmp_path / "state.db") as store:
        resumed = store.claim("cloud-batch")
    assert resumed is not None and resumed.nodes == ("test-cloud-1",)
    assert [(e.token, e.detail["api"]) for e in events] == [
        ("API_UNAVAILABLE", "slurm"), ("API_RECOVERED", "slurm")]
    assert os.path.exists(tmp_path / "state.db")
