"""Secrets are never printed or stored (issue 2 item 7, design: Acquirer, Operating).

Four secrets, each proven to have been used (a positive control, so the test cannot pass by
never touching it) and then looked for in stdout, stderr, the state file (with its WAL), the
event log, the spool and the metrics file:

* the per-launch bootstrap tokens, through a whole `scoctl run --once` on the simulated region
  (created as Secrets in its Kubernetes API, carried by every server's user-data);
* the static join secret, through the same pass with `bootstrap.join_tokens: false`;
* the slurmrestd JWT, sent to a loopback slurmrestd that rejects it;
* a clouds.yaml password, sent to a loopback Keystone that rejects it.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path

import pytest

from scoctl.sim.region import pid_alive, read_state

REPO = Path(__file__).resolve().parents[2]


def scoctl(cwd: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SCOCTL_", "SLURM_JWT"))}
    env["PYTHONPATH"] = str(REPO)
    return subprocess.run([sys.executable, "-m", "scoctl", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def files_holding(root: Path, secret: str) -> list[str]:
    """Every file under `root` whose bytes hold `secret` (plain or base64)."""
    needles = [secret.encode(), base64.b64encode(secret.encode())[:-4]]
    found = []
    for path in root.rglob("*"):
        if path.is_file() and any(n in path.read_bytes() for n in needles):
            found.append(str(path.relative_to(root)))
    return sorted(found)


def checkpoint(state: Path) -> None:
    from scoctl.state import open_store

    with open_store(state) as store:
        store.conn.execute("PRAGMA wal_checkpoint(FULL)")


# --- the join secret through a whole pass on the simulated region ------------------------------


TOKEN_LINE = re.compile(r"SCO_JOIN_TOKEN=([a-z0-9]{6}\.[a-z0-9]{16})\n")


def sim_pass(cwd: Path, *config: str) -> list[subprocess.CompletedProcess[str]]:
    """init, a whole `run --once`, a dry run and every reading command."""
    outputs = [scoctl(cwd, *config, "init"),
               scoctl(cwd, *config, "-vv", "run", "--once", "--json"),
               scoctl(cwd, *config, "-vv", "acquire", "--dry-run"),
               scoctl(cwd, *config, "status", "--json"),
               scoctl(cwd, *config, "status"),
               scoctl(cwd, *config, "events", "--json"),
               scoctl(cwd, *config, "plan", "--json")]
    assert [o.returncode for o in outputs] == [0] * len(outputs), [o.stderr for o in outputs]
    assert json.loads(outputs[3].stdout)["instances"], "the pass launched nothing"
    return outputs


def sim_user_data(cwd: Path) -> list[str]:
    from scoctl.sim.agent import SimApi

    region = read_state(cwd / ".scoctl-sim")
    assert region is not None and region.k8s_url and region.nova_url
    api = SimApi(region.k8s_url, region.nova_url, timeout=5.0,
                 k8s_ca=str(region.directory / "k8s-ca.crt"))
    try:
        return [base64.b64decode(s["user_data"]).decode() for s in api.servers()]
    finally:
        api.close()


def assert_nowhere(cwd: Path, secret: str, outputs: list[subprocess.CompletedProcess[str]],
                   state: Path) -> None:
    for out in outputs:
        assert secret not in out.stdout and secret not in out.stderr
    checkpoint(state)
    stored = [p for p in files_holding(cwd, secret)
              if not p.startswith(".scoctl-sim/") or p.startswith(".scoctl-sim/spool")]
    assert stored == []  # the state file, its WAL, the spool: none holds it
    assert not files_holding(cwd / ".scoctl-sim" / "spool", secret)
    prom = cwd / ".scoctl-sim" / "scoctl.prom"
    assert prom.exists() and secret not in prom.read_text()


@pytest.mark.k8s
@pytest.mark.nova
def test_a_full_sim_pass_never_prints_or_stores_the_join_credentials(tmp_path):
    up = scoctl(tmp_path, "sim", "up", "--json")
    assert up.returncode == 0, up.stderr
    pids = [int(c["pid"]) for c in json.loads(up.stdout)["components"]]
    try:
        static = (tmp_path / ".scoctl-sim" / "join-token").read_text().strip()
        assert len(static) >= 32
        outputs = sim_pass(tmp_path)

        # positive control: every server carries a bootstrap token its launch created
        user_data = sim_user_data(tmp_path)
        tokens = {t for text in user_data for t in TOKEN_LINE.findall(text)}
        assert user_data and all(TOKEN_LINE.search(text) for text in user_data)
        assert all(static not in text for text in user_data)  # tokens, not the static secret
        events = [json.loads(line) for line in outputs[5].stdout.splitlines()]
        launches = {e["detail"]["launch"] for e in events if e["token"] == "INSTANCES_LAUNCHED"}
        assert tokens and len(tokens) == len(launches)  # one token per launch

        for token in tokens:
            assert_nowhere(tmp_path, token, outputs, tmp_path / "scoctl-demo.db")
            assert_nowhere(tmp_path, token.split(".")[1], outputs, tmp_path / "scoctl-demo.db")
        assert_nowhere(tmp_path, static, outputs, tmp_path / "scoctl-demo.db")

        # the fallback: no tokens, the static secret in the user-data, and nowhere else
        demo = resources.files("scoctl.data").joinpath("demo.yaml").read_text("utf-8")
        assert "bootstrap: {join_secret_file:" in demo
        config = tmp_path / "static.yaml"
        config.write_text(demo.replace("bootstrap: {", "bootstrap: {join_tokens: false, ")
                          .replace("scoctl-demo.db", "static.db"))
        static_outputs = sim_pass(tmp_path, "--config", str(config))  # a fresh state: new fleet
        fresh = [t for t in sim_user_data(tmp_path) if not TOKEN_LINE.search(t)]
        assert fresh and all(f"SCO_JOIN_TOKEN={static}\n" in text for text in fresh)
        assert_nowhere(tmp_path, static, static_outputs, tmp_path / "static.db")
    finally:
        down = scoctl(tmp_path, "sim", "down")
        for pid in pids:
            if pid_alive(pid):
                os.kill(pid, 9)
    assert down.returncode == 0, down.stderr
    assert not any(pid_alive(pid) for pid in pids)


# --- loopback servers that record what they were sent ------------------------------------------


class Recorder(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.seen: list[str] = []  # headers and bodies, as text

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def recorder(request: pytest.FixtureRequest) -> Iterator[Recorder]:
    server = Recorder(request.param)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


class _Handler(BaseHTTPRequestHandler):
    server: Recorder

    def log_message(self, *args: object) -> None:
        pass

    def _record(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        self.server.seen.append(str(self.headers) + body.decode(errors="replace"))
        return body

    def _json(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


class SlurmrestdRejecting(_Handler):
    """A slurmrestd that rejects every token."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        self._record()
        self._json(401, {"errors": [{"error": "authentication failed"}]})


class SlurmrestdEchoing(_Handler):
    """A slurmrestd whose error bodies echo the token it was sent (as some proxies and older
    slurmrestd versions do when they log the request)."""

    def do_GET(self) -> None:  # noqa: N802
        self._record()
        token = self.headers.get("X-SLURM-USER-TOKEN", "")
        self._json(500, {"errors": [{"error": f"invalid request with token {token}",
                                     "error_number": 1, "description": f"token={token}"}]})


class KeystoneRejecting(_Handler):
    """A Keystone v3 that serves discovery and rejects every password."""

    def do_GET(self) -> None:  # noqa: N802
        self._record()
        url = f"http://127.0.0.1:{self.server.server_address[1]}/v3/"
        self._json(200, {"version": {"id": "v3.14", "status": "stable",
                                     "links": [{"rel": "self", "href": url}],
                                     "media-types": []}})

    def do_POST(self) -> None:  # noqa: N802
        self._record()
        self._json(401, {"error": {"code": 401, "title": "Unauthorized",
                                   "message": "The request you have made requires "
                                              "authentication."}})


BASE_CONFIG = """\
state: {tmp}/s.db
spool: {tmp}/spool
budget_dir: {tmp}/budget
regions:
  - {{name: r, cloud: rejecting, clouds_yaml: {tmp}/clouds.yaml, launch: {{image: i}}}}
flavors: [{{name: f, vcpus: 4, ram: 16Gi}}]
pools: [{{name: p, az: a, flavor: f, group: g, tier: reclaimable, depth: 1}}]
ranking: {{id: r-1, scores: {{p: 1.0}}}}
"""


def leaks(tmp: Path, secret: str, results: list[subprocess.CompletedProcess[str]]) -> list[str]:
    found = [f"output of {' '.join(r.args[3:])}" for r in results
             if secret in r.stdout or secret in r.stderr]
    if (tmp / "s.db").exists():
        checkpoint(tmp / "s.db")
    return found + files_holding(tmp, secret)


def slurm_jwt_runs(tmp_path: Path, recorder: Recorder, jwt: str, *last: str
                   ) -> tuple[Path, list[subprocess.CompletedProcess[str]]]:
    """A config whose slurmrestd token file holds `jwt`, then watch, gate --workload, events
    --json and `scoctl *last` against the `recorder` server: the token file and the results."""
    token_file = tmp_path / "jwt"
    token_file.write_text(jwt + "\n")
    config = tmp_path / "config.yaml"
    config.write_text(BASE_CONFIG.format(tmp=tmp_path)
                      + "workloads: [{name: train, source: slurm, partition: cpu}]\n"
                      + f"slurm: {{rest_url: '{recorder.url}', rest_token_file: {token_file}}}\n")
    assert scoctl(tmp_path, "--config", str(config), "init").returncode == 0
    return token_file, [
        scoctl(tmp_path, "--config", str(config), "-vv", "watch", "--source", "slurm"),
        scoctl(tmp_path, "--config", str(config), "-vv", "gate", "--backend", "slurm",
               "--cpus", "2", "--workload", "train", "--json"),
        scoctl(tmp_path, "--config", str(config), "events", "--json"),
        scoctl(tmp_path, "--config", str(config), *last)]


@pytest.mark.parametrize("recorder", [SlurmrestdRejecting], indirect=True)
def test_the_slurmrestd_jwt_is_sent_but_never_printed_or_stored(tmp_path, recorder):
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJyb290In0.c2VjcmV0LXNpZ25hdHVyZS0xMjM0NQ"
    token_file, results = slurm_jwt_runs(tmp_path, recorder, jwt, "status", "--json")

    assert any(jwt in seen for seen in recorder.seen), "the JWT was never sent"
    assert results[0].returncode == 1, results[0].stderr  # an API failure, not a crash
    assert "Traceback" not in results[0].stderr
    token_file.unlink()
    assert leaks(tmp_path, jwt, results) == []


@pytest.mark.parametrize("recorder", [SlurmrestdEchoing], indirect=True)
def test_a_jwt_echoed_in_slurmrestds_error_body_reaches_no_output_and_no_event(tmp_path,
                                                                               recorder):
    jwt = "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJzbHVybSJ9.ZWNob2VkLWJhY2stc2lnbmF0dXJl"
    token_file, results = slurm_jwt_runs(tmp_path, recorder, jwt, "events")

    assert any(jwt in seen for seen in recorder.seen), "the JWT was never sent"
    gate = json.loads(results[1].stdout)
    assert gate["verdict"] == "skipped" and "HTTP 500: token=***" in gate["reason"]
    events = [json.loads(line) for line in results[2].stdout.splitlines()]
    skipped = [e for e in events if e["token"] == "GATE_SKIPPED"]
    assert skipped and "token=***" in skipped[0]["detail"]["reason"]  # echoed, then redacted
    assert "Traceback" not in results[0].stderr + results[1].stderr
    token_file.unlink()
    assert leaks(tmp_path, jwt, results) == []


@pytest.mark.parametrize("recorder", [KeystoneRejecting], indirect=True)
def test_a_clouds_yaml_password_is_sent_but_never_printed_or_stored(tmp_path, recorder):
    password = "pw-0f9e8d7c6b5a-never-print-me"
    (tmp_path / "clouds.yaml").write_text(
        "clouds:\n  rejecting:\n    auth_type: password\n    auth:\n"
        f"      auth_url: {recorder.url}/v3\n      username: scoctl\n"
        f"      password: {password}\n      project_name: p\n"
        "      user_domain_name: Default\n      project_domain_name: Default\n"
        "    region_name: r\n")
    config = tmp_path / "config.yaml"
    config.write_text(BASE_CONFIG.format(tmp=tmp_path))
    assert scoctl(tmp_path, "--config", str(config), "init").returncode == 0

    results = [scoctl(tmp_path, "--config", str(config), "-vv", "reconcile"),
               scoctl(tmp_path, "--config", str(config), "events", "--json")]

    assert any(password in seen for seen in recorder.seen), "the password was never sent"
    assert results[0].returncode == 1, results[0].stderr  # an API failure: exit 1
    assert "Traceback" not in results[0].stderr
    assert len(results[0].stderr.strip().splitlines()) == 1, results[0].stderr
    (tmp_path / "clouds.yaml").unlink()
    assert leaks(tmp_path, password, results) == []
