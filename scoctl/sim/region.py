"""A simulated region on 127.0.0.1: start it, stop it, read its status (`scoctl sim`).

One folder (default ``./.scoctl-sim``) holds everything of one simulated region:

    k8s.pid  nova.pid  agent.pid      the PIDs of the three processes (stopped by these PIDs)
    k8s.ready nova.ready agent.ready  written by each process once it serves
    k8s.log  nova.log  agent.log      their output
    k8s-seed.json nova-seed.json agent.json   what they were started with
    kubeconfig                        the Kubernetes emulator as scoctl's ServiceAccount
                                      (kube-system/scoctl, held to configs/kubernetes/rbac.yaml)
    kubeconfig-admin                  the same as the admin (system:masters), for set-up
    k8s-tokens.json                   the bearer tokens the Kubernetes emulator accepts
    k8s-ca.crt k8s-tls.crt k8s-tls.key  the CA the kubeconfigs trust, and the HTTPS certificate
                                      and key the Kubernetes emulator serves (kept over a restart)
    clouds.yaml                       entry `scoctl-sim`: admin_token on the Nova emulator's /v2.1
    join-token                        the join secret the user-data template embeds
    sim.json                          URLs, start time, scenario

The processes run detached (their own session) so that `scoctl sim up` returns; `down` sends
SIGTERM to each recorded PID, then SIGKILL after a timeout, and checks that the PID still runs
one of scoctl's sim modules before signalling it (a PID may have been reused since).
`up` on a running region returns it unchanged; on one with a process dead (its PID gone) it
starts that one again, on its old port, from the seed or settings it was first started with
(the emulators keep their objects in memory only: a restarted one has its seed's), and leaves
the live ones alone.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import os
import random
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from scoctl.config.schema import Config
from scoctl.errors import ApiError, ScoctlError, UsageError
from scoctl.sim.k8s_auth import ADMIN, SCOCTL, User, shipped_rbac
from scoctl.sim.scenario import (
    Scenario,
    agent_settings,
    kubernetes_crds,
    kubernetes_objects,
    nova_seed,
)

DEFAULT_DIR = Path(".scoctl-sim")
CLOUD_NAME = "scoctl-sim"
TOKENS_FILE = "k8s-tokens.json"
# an evicted or deleted pod stays Terminating for its grace period times this (30 s → 3 s), as
# the simulated region runs its clocks fast
GRACE_SCALE = 0.1
STATE_FILE = "sim.json"
MODULES = {"k8s": "scoctl.sim.k8s_emulator", "nova": "scoctl.sim.nova_emulator",
           "agent": "scoctl.sim.agent"}
COMPONENTS = ("k8s", "nova", "agent")
CA_FILE = "k8s-ca.crt"
RUNTIME_FILES = ("sim.json", "kubeconfig", "kubeconfig-admin", TOKENS_FILE, "clouds.yaml",
                 "join-token", "k8s-seed.json", "nova-seed.json", "agent.json", CA_FILE,
                 "k8s-tls.crt", "k8s-tls.key")
# Popen objects of detached processes are kept so that no "still running" warning fires when
# the object is collected: the processes are meant to outlive this one.
_DETACHED: list[subprocess.Popen[bytes]] = []


class SimError(ScoctlError):
    """The simulated region could not be started or reached; exit 1."""


@dataclass(frozen=True)
class Component:
    """One process of the simulated region."""

    name: str
    pid: int | None
    alive: bool
    log: str

    def as_json(self) -> dict[str, Any]:
        return {"name": self.name, "pid": self.pid, "alive": self.alive, "log": self.log}


@dataclass(frozen=True)
class SimState:
    """What `up` started (read back from the folder)."""

    directory: Path
    components: tuple[Component, ...]
    k8s_url: str | None = None
    nova_url: str | None = None
    started_at: str | None = None
    start_seconds: float | None = None
    scenario: str | None = None
    already_running: bool = False
    restarted: tuple[str, ...] = ()  # the processes this `up` started again

    @property
    def running(self) -> bool:
        return bool(self.components) and all(c.alive for c in self.components)

    @property
    def kubeconfig(self) -> Path:
        return self.directory / "kubeconfig"

    @property
    def clouds_yaml(self) -> Path:
        return self.directory / "clouds.yaml"

    def as_json(self) -> dict[str, Any]:
        return {"directory": str(self.directory), "running": self.running,
                "already_running": self.already_running, "restarted": list(self.restarted),
                "components": [c.as_json() for c in self.components],
                "k8s_url": self.k8s_url, "nova_url": self.nova_url,
                "kubeconfig": str(self.kubeconfig), "k8s_ca": str(self.directory / CA_FILE),
                "clouds_yaml": str(self.clouds_yaml),
                "cloud": CLOUD_NAME, "started_at": self.started_at,
                "start_seconds": self.start_seconds, "scenario": self.scenario}


# --- processes ---------------------------------------------------------------------------------


def pid_alive(pid: int) -> bool:
    """True while `pid` runs (a zombie counts as gone; our own zombie children are reaped)."""
    with contextlib.suppress(ChildProcessError, OSError):
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    state = stat.rsplit(")", 1)[-1].split()[0] if ")" in stat else "R"
    return state not in ("Z", "X")


def _runs_module(pid: int, module: str) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except FileNotFoundError:
        return False
    except OSError:
        return True  # no /proc: trust the PID file
    return module.encode() in cmdline


def _read_pid(directory: Path, name: str) -> int | None:
    try:
        return int((directory / f"{name}.pid").read_text().strip())
    except (OSError, ValueError):
        return None


def _component(directory: Path, name: str) -> Component | None:
    pid = _read_pid(directory, name)
    if pid is None:
        return None
    alive = pid_alive(pid) and _runs_module(pid, MODULES[name])
    return Component(name, pid, alive, str(directory / f"{name}.log"))


def _spawn(directory: Path, name: str, args: list[str]) -> int:
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    with open(directory / f"{name}.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", MODULES[name], *args], stdin=subprocess.DEVNULL,
            stdout=log, stderr=subprocess.STDOUT, cwd=directory, env=env,
            start_new_session=True)
    _DETACHED.append(process)
    _write(directory / f"{name}.pid", str(process.pid))
    return process.pid


def _wait_ready(directory: Path, name: str, pid: int, deadline: float) -> str:
    ready = directory / f"{name}.ready"
    while not ready.exists():
        if not pid_alive(pid):
            raise SimError(f"the {name} process (PID {pid}) exited while starting:\n"
                           + _tail(directory / f"{name}.log"))
        if time.monotonic() > deadline:
            raise SimError(f"the {name} process (PID {pid}) was not ready in time:\n"
                           + _tail(directory / f"{name}.log"))
        time.sleep(0.02)
    return ready.read_text(encoding="utf-8")


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_pid(pid: int, module: str, timeout: float) -> str:
    """Stop one recorded process: SIGTERM, then SIGKILL after `timeout` seconds.

    Returns how it ended: `terminated`, `killed` or `not running` (also when the PID now runs
    something else, which is never signalled).
    """
    if not pid_alive(pid) or not _runs_module(pid, module):
        return "not running"
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return "terminated"
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while pid_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return "killed"


# --- files -------------------------------------------------------------------------------------


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    with open(directory / ".lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def kubeconfig_text(url: str, token: str, context: str = CLOUD_NAME, *,
                    ca_pem: bytes | None = None) -> str:
    """A kubeconfig for the emulator (JSON is YAML); `ca_pem` is the CA its HTTPS certificate
    is signed by (``certificate-authority-data``)."""
    cluster: dict[str, str] = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode("ascii")
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": context,
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": {"token": token}}],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context,
                                                   "namespace": "default"}}],
    }, indent=2) + "\n"


def clouds_yaml_text(nova_url: str, project: str, region: str) -> str:
    """A clouds.yaml with the `scoctl-sim` entry: noauth2 through admin_token."""
    return ("# written by `scoctl sim up`; the Nova emulator accepts noauth2 tokens user:project\n"
            "clouds:\n"
            f"  {CLOUD_NAME}:\n"
            "    auth_type: admin_token\n"
            "    auth:\n"
            f"      endpoint: {nova_url}\n"
            f'      token: "admin:{project}"\n'
            f"    region_name: {region}\n")


def read_state(directory: Path) -> SimState | None:
    """The region recorded in `directory`, with each process checked; None if nothing is."""
    components = tuple(c for name in COMPONENTS if (c := _component(directory, name)))
    info: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        info = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
    if not components and not info:
        return None
    return SimState(directory=directory, components=components, k8s_url=info.get("k8s_url"),
                    nova_url=info.get("nova_url"), started_at=info.get("started_at"),
                    start_seconds=info.get("start_seconds"), scenario=info.get("scenario"))


# --- up / down / status ------------------------------------------------------------------------


def up(directory: Path, scenario: Scenario, config: Config, *, timeout: float = 60.0) -> SimState:
    """Start the Kubernetes emulator, the Nova emulator and the node agent, seeded from
    `scenario` (flavors and AZs from `config`). Idempotent on a running region.

    A region with some processes dead has those restarted (`_restart`).

    Raises UsageError when the region is half running and cannot be restarted (its files are
    gone), SimError when a process fails to start (whatever was started is stopped again).
    """
    directory.mkdir(parents=True, exist_ok=True)
    with _locked(directory):
        current = read_state(directory)
        if current is not None and current.components:
            if current.running and len(current.components) == len(COMPONENTS):
                return replace(current, already_running=True)
            if any(c.alive for c in current.components):
                return _restart(directory, current, timeout)
        _clean(directory)
        started = time.monotonic()
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        k8s_seed = directory / "k8s-seed.json"
        shared = frozenset(w.name for w in config.workloads if w.isolation == "shared")
        nova_seed_file = directory / "nova-seed.json"
        # scoctl's shipped role first: the region holds scoctl to it, as a cluster would
        _write(k8s_seed, json.dumps({"crds": kubernetes_crds(scenario),
                                     "objects": [*shipped_rbac(),
                                                 *kubernetes_objects(scenario, stamp, shared)]}))
        tokens = {secrets.token_hex(16): SCOCTL, secrets.token_hex(16): ADMIN}
        _write(directory / TOKENS_FILE, json.dumps({
            t: {"user": u.name, "groups": list(u.groups)} for t, u in tokens.items()}), 0o600)
        _write(nova_seed_file, json.dumps(nova_seed(scenario, config)))
        pids: dict[str, int] = {}
        try:
            pids["k8s"] = _spawn(directory, "k8s", _args(directory, "k8s"))
            pids["nova"] = _spawn(directory, "nova", _args(directory, "nova"))
            deadline = time.monotonic() + timeout
            k8s_ready = json.loads(_wait_ready(directory, "k8s", pids["k8s"], deadline))
            k8s_url = str(k8s_ready["url"])
            ca_pem = k8s_ready["ca"].encode("ascii") if k8s_ready.get("ca") else None
            nova_port = int(_wait_ready(directory, "nova", pids["nova"], deadline).strip())
            nova_url = f"http://127.0.0.1:{nova_port}/v2.1"
            region = config.regions[0].name
            _write(directory / "kubeconfig",
                   kubeconfig_text(k8s_url, _token(tokens, SCOCTL), ca_pem=ca_pem), 0o600)
            _write(directory / "kubeconfig-admin",
                   kubeconfig_text(k8s_url, _token(tokens, ADMIN), ca_pem=ca_pem), 0o600)
            _write(directory / "clouds.yaml", clouds_yaml_text(nova_url, scenario.project,
                                                               region), 0o600)
            _write(directory / "join-token", secrets.token_hex(24) + "\n", 0o600)
            settings = agent_settings(scenario, config, k8s_url=k8s_url, nova_url=nova_url,
                                      k8s_token=_token(tokens, ADMIN))
            if ca_pem is not None:
                settings["k8s_ca_file"] = str(directory / CA_FILE)
            _write(directory / "agent.json", json.dumps(settings, indent=2))
            pids["agent"] = _spawn(directory, "agent", _args(directory, "agent"))
            _wait_ready(directory, "agent", pids["agent"], deadline)
        except BaseException:
            for name in reversed(list(pids)):
                stop_pid(pids[name], MODULES[name], 5.0)
            _clean(directory)
            raise
        seconds = round(time.monotonic() - started, 3)
        _write(directory / STATE_FILE, json.dumps({
            "k8s_url": k8s_url, "nova_url": nova_url, "started_at": stamp,
            "start_seconds": seconds, "scenario": scenario.source,
            "config": config.source_name, "pids": pids}, indent=2))
    state = read_state(directory)
    assert state is not None
    return state


def _args(directory: Path, name: str, port: int = 0) -> list[str]:
    """The command line of one process, from the files `up` wrote (its seed, or the agent's
    settings): the same for its first start (port 0: the OS picks) and a restart."""
    ready = ["--ready-file", str(directory / f"{name}.ready")]
    if name == "k8s":
        # HTTPS with the CA + certificate kept in the folder (made by the first start)
        return ["--port", str(port), *ready, "--tls-dir", str(directory),
                "--seed", str(directory / "k8s-seed.json"),
                "--tokens-file", str(directory / TOKENS_FILE), "--grace-scale", str(GRACE_SCALE)]
    if name == "nova":
        return ["--port", str(port), *ready, "--seed-file", str(directory / "nova-seed.json")]
    return ["--settings", str(directory / "agent.json"), *ready]


def _token(tokens: dict[str, User], user: User) -> str:
    return next(t for t, u in tokens.items() if u == user)


def _restart(directory: Path, current: SimState, timeout: float) -> SimState:
    """Start again each process of the region whose PID is gone, on the port it served (the
    kubeconfig, clouds.yaml and the agent keep their URLs), from its seed or settings; the
    live ones are left alone. Raises UsageError when the files it needs are gone, SimError
    when a restarted process does not come up (that one is stopped again)."""
    alive = {c.name for c in current.components if c.alive}
    dead = [name for name in COMPONENTS if name not in alive]
    info: dict[str, Any] = {}
    with contextlib.suppress(OSError, ValueError):
        info = json.loads((directory / STATE_FILE).read_text(encoding="utf-8"))
    ports = {name: urlsplit(str(info.get(f"{name}_url") or "")).port for name in ("k8s", "nova")}
    needed = {"k8s": "k8s-seed.json", "nova": "nova-seed.json", "agent": "agent.json"}
    if "k8s" in dead and not (directory / TOKENS_FILE).is_file():
        needed["k8s"] = TOKENS_FILE
    missing = [needed[n] for n in dead if not (directory / needed[n]).is_file()]
    if missing or any(ports.get(n, 1) is None for n in dead):
        raise UsageError(f"the simulated region in {directory} is half running "
                         f"({', '.join(dead)} stopped) and cannot be restarted "
                         f"({', '.join(missing) or STATE_FILE} gone): run `scoctl sim down "
                         f"--dir {directory}` first")
    deadline = time.monotonic() + timeout
    pids = dict(info.get("pids") or {})
    for name in dead:
        for suffix in (".ready", ".ready.tmp", ".ready.part"):
            (directory / f"{name}{suffix}").unlink(missing_ok=True)
        pid = _spawn(directory, name, _args(directory, name, ports.get(name) or 0))
        try:
            _wait_ready(directory, name, pid, deadline)
        except BaseException:
            stop_pid(pid, MODULES[name], 5.0)
            raise
        pids[name] = pid
    _write(directory / STATE_FILE, json.dumps({**info, "pids": pids}, indent=2))
    state = read_state(directory)
    assert state is not None
    return replace(state, restarted=tuple(dead))


def _clean(directory: Path) -> None:
    for name in COMPONENTS:
        for suffix in (".pid", ".ready", ".ready.tmp", ".ready.part"):
            (directory / f"{name}{suffix}").unlink(missing_ok=True)
    for name in RUNTIME_FILES:
        (directory / name).unlink(missing_ok=True)


def down(directory: Path, *, timeout: float = 10.0) -> list[tuple[Component, str]]:
    """Stop every recorded process by its PID (agent first), SIGKILL after `timeout`; remove
    the runtime files (logs stay). Returns each component and how it ended."""
    if not directory.is_dir():
        return []
    out: list[tuple[Component, str]] = []
    with _locked(directory):
        for name in reversed(COMPONENTS):
            pid = _read_pid(directory, name)
            if pid is None:
                continue
            how = stop_pid(pid, MODULES[name], timeout)
            out.append((Component(name, pid, pid_alive(pid), str(directory / f"{name}.log")),
                        how))
        _clean(directory)
    return out


def _api(state: SimState) -> Any:
    from scoctl.sim.agent import SimApi

    if not state.running or not state.k8s_url or not state.nova_url:
        raise UsageError(f"no simulated region runs in {state.directory}: run `scoctl sim up`")
    ca = state.directory / CA_FILE
    return SimApi(state.k8s_url, state.nova_url, timeout=5.0,
                  k8s_ca=str(ca) if state.k8s_url.startswith("https:") else None)


def status(directory: Path) -> dict[str, Any]:
    """The region's processes and, when it runs, what it holds: Nova servers by status,
    Kubernetes nodes (scoctl's and Ready), pods pending and running, Deployments."""
    state = read_state(directory)
    if state is None:
        return {"directory": str(directory), "running": False, "components": []}
    body = state.as_json()
    if not state.running:
        return body
    from scoctl.core.model.vocabulary import META_RECLAIM_AT as RECLAIM_AT
    from scoctl.sim.agent import (
        MANAGED_TAG,
        is_pending,
        is_ready,
        is_running,
        server_of,
    )

    api = _api(state)
    try:
        servers = api.servers()
        nodes = api.objects("Node")
        pods = api.objects("Pod")
        deployments = api.objects("Deployment")
    except Exception as exc:  # noqa: BLE001 - any transport failure: report, do not crash
        body["error"] = f"cannot read the region: {type(exc).__name__}: {exc}"
        return body
    finally:
        api.close()
    managed = [s for s in servers if MANAGED_TAG in (s.get("tags") or [])]
    by_status: dict[str, int] = {}
    for server in managed:
        by_status[str(server["status"])] = by_status.get(str(server["status"]), 0) + 1
    ours = [n for n in nodes if server_of(n) is not None]
    body["servers"] = {"managed": len(managed), "other": len(servers) - len(managed),
                       "by_status": dict(sorted(by_status.items())),
                       "noticed": sorted(({"name": s["name"],
                                           "reclaim_at": s["metadata"][RECLAIM_AT]}
                                          for s in managed
                                          if RECLAIM_AT in (s.get("metadata") or {})),
                                         key=lambda n: n["name"])}
    body["nodes"] = {"total": len(nodes), "ready": sum(1 for n in nodes if is_ready(n)),
                     "instances": len(ours), "instances_ready": sum(1 for n in ours
                                                                    if is_ready(n))}
    body["pods"] = {"total": len(pods), "pending": sum(1 for p in pods if is_pending(p)),
                    "running": sum(1 for p in pods if is_running(p))}
    body["deployments"] = [
        {"namespace": d["metadata"].get("namespace"), "name": d["metadata"]["name"],
         "replicas": (d.get("spec") or {}).get("replicas", 1),
         "available": (d.get("status") or {}).get("availableReplicas", 0),
         "condition": next((c.get("status") for c in (d.get("status") or {}).get(
             "conditions") or [] if c.get("type") == "Available"), None)}
        for d in deployments]
    return body


def reclaim(directory: Path, *, count: int | None = None, server: str | None = None,
            mode: str = "delete", seed: int | None = None,
            notice: float | None = None) -> list[dict[str, Any]]:
    """Spot-reclaim a named server or `count` random reclaimable ones (the agent then removes
    their nodes); with `notice` (seconds) set ``sco:reclaim-at`` instead, and the agent
    reclaims them at that time. Raises UsageError when the region is not running or the
    server unknown."""
    from scoctl.sim.agent import reclaim as agent_reclaim

    state = read_state(directory)
    if state is None:
        raise UsageError(f"no simulated region in {directory}: run `scoctl sim up`")
    api = _api(state)
    try:
        return agent_reclaim(api, count=count, server_id=server, mode=mode,
                             rng=random.Random(seed) if seed is not None else None,
                             notice=notice)
    except LookupError as exc:
        raise UsageError(str(exc.args[0])) from exc
    except RuntimeError as exc:
        raise ApiError(str(exc)) from exc
    finally:
        api.close()


def scale(directory: Path, target: str, replicas: int) -> dict[str, Any]:
    """Scale the Deployment `target` (``NAMESPACE/NAME``) of the running region to `replicas`:
    surplus pods are deleted (and not replaced by the agent), missing ones created pending.
    Raises UsageError when the region is not running or the Deployment unknown."""
    from scoctl.sim.agent import scale as agent_scale

    namespace, sep, name = target.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise UsageError(f"give the Deployment as NAMESPACE/NAME, not {target!r}")
    if replicas < 0:
        raise UsageError("--replicas must be 0 or more")
    state = read_state(directory)
    if state is None:
        raise UsageError(f"no simulated region in {directory}: run `scoctl sim up`")
    api = _api(state)
    try:
        return agent_scale(api, namespace, name, replicas)
    except LookupError as exc:
        raise UsageError(str(exc.args[0])) from exc
    except RuntimeError as exc:
        raise ApiError(str(exc)) from exc
    finally:
        api.close()


def fail_node(directory: Path, server: str) -> dict[str, Any]:
    """Stop the kubelet of `server`'s (id or name) Node for good: the Node goes NotReady
    (``Ready=Unknown`` after the node-monitor grace period) and stays so while the server stays
    ACTIVE. Raises UsageError when the region is not running, the server unknown or without a
    Node."""
    from scoctl.sim.agent import fail_node as agent_fail_node

    state = read_state(directory)
    if state is None:
        raise UsageError(f"no simulated region in {directory}: run `scoctl sim up`")
    api = _api(state)
    try:
        return agent_fail_node(api, server)
    except LookupError as exc:
        raise UsageError(str(exc.args[0])) from exc
    except RuntimeError as exc:
        raise ApiError(str(exc)) from exc
    finally:
        api.close()
