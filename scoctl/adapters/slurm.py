"""Slurm behind the `BatchScheduler` Protocol: through its commands, or through slurmrestd.

* `SlurmCli` runs ``sinfo`` / ``squeue`` / ``scontrol`` as subprocesses (``--json`` first, a
  format string when JSON is unavailable or unparseable), each with a timeout (default 10 s).
  A command runs in a session of its own; on timeout the whole process group is killed, so a
  hanging wrapper script leaves nothing behind.
* `SlurmRest` asks slurmrestd over httpx with a JWT (``X-SLURM-USER-NAME`` /
  ``X-SLURM-USER-TOKEN``), at the newest data-parser version the server offers (its
  ``/openapi/v3`` paths: v0.0.38 of Slurm 22.05 up to v0.0.4x and later) or the pinned one, and
  reads every shape those versions answer in (states as strings or lists, numbers or
  ``{set, infinite, number}`` objects, features as strings or lists). Node updates and
  accounting go through a `SlurmCli`, and so does the default partition where the version
  does not show partition flags (v0.0.39 to v0.0.44).
* `make_scheduler` picks one from the config (``slurm.rest_url`` set → REST).

Both map every failure to the `scoctl.adapters.batch.SchedulerError` tree at this boundary.
httpx is imported only when the REST adapter is used, so ``scoctl gate`` on the CLI path
starts fast. Tokens never appear in a repr, a message or a log.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from scoctl.adapters.batch import (
    BatchScheduler,
    SchedulerAuthFailed,
    SchedulerFailed,
    SchedulerNotFound,
    SchedulerTimeout,
    SchedulerUnparseable,
    SchedulerUnreachable,
)
from scoctl.core import model
from scoctl.core.gres import Gres, GresError, parse_gres
from scoctl.core.model import OLDEST_REST_API, SlurmNode, rest_api_version
from scoctl.secrets import redact, remember

if TYPE_CHECKING:
    import httpx

    from scoctl.core.model import FinishedJob, SlurmJob

DEFAULT_TIMEOUT = 10.0
_REST_PATH = re.compile(r"^/slurm/(v\d+\.\d+\.\d+)/")
# job_state_string()'s order: a flag wins over the base state (COMPLETING, not CANCELLED)
_JOB_STATE_FLAGS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED",
                    "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED",
                    "RESV_DEL_HOLD", "SIGNALING")

# sinfo format fallback: one line per (node, partition); the reason goes last because it is
# free text. `%T` is the long state with Slurm's suffix characters (idle~, mixed#, down*).
NODE_FORMAT = "%N|%c|%m|%G|%P|%T|%f|%E"
_NODE_FIELDS = 8
_STATE_SUFFIX = {
    "*": "NOT_RESPONDING",
    "~": "POWERED_DOWN",
    "#": "POWERING_UP",
    "%": "POWERING_DOWN",
    "!": "POWER_DOWN",
    "$": "MAINTENANCE",
    "@": "REBOOT_REQUESTED",
    "^": "REBOOT_ISSUED",
    "-": "PLANNED",
}
# long state names that are a base state plus a flag in the JSON view
_STATE_ALIAS = {
    "drained": ("idle", "DRAIN"),
    "draining": ("mixed", "DRAIN"),
    "completing": ("allocated", "COMPLETING"),
    "alloc": ("allocated", ""),
    "mix": ("mixed", ""),
}
_NULL = {"", "(null)", "none", "n/a"}
_UNKNOWN_JOB = 2017  # slurm_errno ESLURM_INVALID_JOB_ID


# --------------------------------------------------------------------------- pure parsing
def _number(value: object, what: str) -> int | None:
    """A count from Slurm JSON: a plain number, or 23.02's ``{"set", "infinite", "number"}``."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise SchedulerUnparseable(f"{what}: expected a number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        return _number(value.get("number"), what)
    raise SchedulerUnparseable(f"{what}: expected a number, got {value!r}")


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def _words(value: object) -> tuple[str, ...]:
    """A comma-separated string or a list of strings, without Slurm's null spellings."""
    items = value if isinstance(value, list) else _text(value).split(",")
    return tuple(w for w in (str(i).strip() for i in items) if w.lower() not in _NULL)


def _gres(value: object, what: str) -> tuple[Gres, ...]:
    try:
        return parse_gres(_text(value))
    except GresError as exc:
        raise SchedulerUnparseable(f"{what}: {exc}") from exc


def _load_json(text: str, key: str, what: str) -> list[dict[str, Any]]:
    """The `key` list of a Slurm JSON document; Slurm's own ``errors`` become SchedulerFailed."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise SchedulerUnparseable(f"{what}: not JSON ({exc})") from exc
    if not isinstance(data, dict) or not isinstance(data.get(key), list):
        raise SchedulerUnparseable(f"{what}: no {key!r} list in the JSON")
    errors = data.get("errors") or []
    if errors:
        raise SchedulerFailed(
            f"{what}: Slurm reported {_describe(errors)}",
            detail=str(errors)[:2000],
            slurm_errno=_errno(errors),
        )
    items: list[object] = data[key]
    out = [item for item in items if isinstance(item, dict)]
    if len(out) != len(items):
        raise SchedulerUnparseable(f"{what}: {key!r} holds something other than objects")
    return out


def _errno(errors: object) -> int | None:
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        value = errors[0].get("error_number", errors[0].get("errno"))
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    return None


def _describe(errors: object) -> str:
    if isinstance(errors, list) and errors and isinstance(errors[0], dict):
        first = errors[0]
        return str(first.get("description") or first.get("error") or first)
    return str(errors)


def node_from_json(item: Mapping[str, Any]) -> SlurmNode:
    """One node of ``sinfo --json`` / ``GET /nodes`` (22.05 shape; 23.02's lists and number
    objects too). Raises `SchedulerUnparseable` for a node without name, CPUs or memory."""
    name = item.get("name")
    if not isinstance(name, str) or not name:
        raise SchedulerUnparseable(f"sinfo --json: node without a name: {item!r:.200}")
    cpus = _number(item.get("cpus"), f"node {name} cpus")
    memory = _number(item.get("real_memory"), f"node {name} real_memory")
    if cpus is None or memory is None:
        raise SchedulerUnparseable(f"sinfo --json: node {name} has no cpus or real_memory")
    raw_state = item.get("state")
    flags = {str(f).upper() for f in item.get("state_flags") or []}
    if isinstance(raw_state, list):  # 23.02+: ["IDLE", "CLOUD", "POWERED_DOWN"]
        state = str(raw_state[0]).lower() if raw_state else "unknown"
        flags |= {str(f).upper() for f in raw_state[1:]}
    else:
        state = str(raw_state or "unknown").lower()
    return SlurmNode(
        name=name,
        cpus=cpus,
        memory_mb=memory,
        gres=_gres(item.get("gres"), f"node {name} gres"),
        partitions=tuple(sorted(_words(item.get("partitions")))),
        state=state,
        flags=frozenset(flags),
        features=_words(item.get("features")),
        reason=_text(item.get("reason")),
    )


def parse_nodes_json(text: str) -> list[SlurmNode]:
    """``sinfo --json`` (or slurmrestd's ``/nodes`` body) as nodes sorted by name."""
    nodes = [node_from_json(item) for item in _load_json(text, "nodes", "sinfo --json")]
    return sorted(nodes, key=lambda n: n.name)


def parse_long_state(text: str) -> tuple[str, frozenset[str]]:
    """``%T`` (``idle~``, ``mixed#``, ``drained*``) as (base state, flags)."""
    value = text.strip().lower()
    flags: set[str] = set()
    while value and (value[-1] in _STATE_SUFFIX or value[-1] == "+"):
        if value[-1] in _STATE_SUFFIX:
            flags.add(_STATE_SUFFIX[value[-1]])
        value = value[:-1]
    base, extra = _STATE_ALIAS.get(value, (value, ""))
    if extra:
        flags.add(extra)
    return base or "unknown", frozenset(flags)


def parse_nodes_format(text: str) -> list[SlurmNode]:
    """``sinfo -h -N -o NODE_FORMAT`` output as nodes sorted by name (lines of one node in
    several partitions are merged; the ``*`` of the default partition is dropped)."""
    merged: dict[str, SlurmNode] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|", _NODE_FIELDS - 1)
        if len(fields) != _NODE_FIELDS:
            raise SchedulerUnparseable(f"sinfo line {number}: not {NODE_FORMAT!r}: {line!r:.200}")
        name, cpus, memory, gres, partition, state, features, reason = (f.strip() for f in fields)
        if not name or not cpus.isdigit() or not memory.isdigit():
            raise SchedulerUnparseable(f"sinfo line {number}: bad node line {line!r:.200}")
        base, flags = parse_long_state(state)
        node = SlurmNode(
            name=name,
            cpus=int(cpus),
            memory_mb=int(memory),
            gres=_gres(gres, f"node {name} gres"),
            partitions=(partition.rstrip("*"),) if partition.rstrip("*") else (),
            state=base,
            flags=flags,
            features=_words(features),
            reason="" if reason.lower() in _NULL else reason,
        )
        seen = merged.get(name)
        if seen is not None:
            extra = tuple(p for p in node.partitions if p not in seen.partitions)
            node = replace(seen, partitions=tuple(sorted(seen.partitions + extra)))
        merged[name] = node
    return [merged[name] for name in sorted(merged)]


def parse_default_partition(text: str) -> str | None:
    """The partition ``sinfo -h -o %P`` marks with ``*``."""
    for line in text.splitlines():
        name = line.strip()
        if name.endswith("*"):
            return name[:-1]
    return None


def job_from_json(item: Mapping[str, Any]) -> SlurmJob:
    """One job of ``squeue --json`` / ``GET /jobs``. Raises `SchedulerUnparseable`."""
    job_id = _number(item.get("job_id"), "job_id")
    if job_id is None:
        raise SchedulerUnparseable(f"squeue --json: job without an id: {item!r:.200}")
    return model.SlurmJob(
        job_id=job_id,
        name=_text(item.get("name")),
        state=_job_state(item.get("job_state")),
        reason=_text(item.get("state_reason")),
        partition=_text(item.get("partition")),
        account=_text(item.get("account")),
        user=_text(item.get("user_name")),
        comment=_text(item.get("comment")),
        cpus=_number(item.get("cpus"), f"job {job_id} cpus") or 0,
        memory_per_node_mb=_number(item.get("memory_per_node"), f"job {job_id} memory"),
        memory_per_cpu_mb=_number(item.get("memory_per_cpu"), f"job {job_id} memory"),
        gres_per_node=_gres(item.get("tres_per_node"), f"job {job_id} tres_per_node"),
        gres_per_job=_gres(item.get("tres_per_job"), f"job {job_id} tres_per_job"),
        node_count=_number(item.get("node_count"), f"job {job_id} node_count") or 0,
        nodes=_text(item.get("nodes")),
        submitted=_number(item.get("submit_time"), f"job {job_id} submit_time") or None,
    )


def _job_state(value: object) -> str:
    """``job_state`` as squeue prints it: a string (up to v0.0.39), or from v0.0.40 the list of
    base state and flags (``["CANCELLED", "COMPLETING"]`` is ``COMPLETING``)."""
    if not isinstance(value, list):
        return _text(value).upper()
    states = [str(v).upper() for v in value]
    return next((f for f in _JOB_STATE_FLAGS if f in states), states[0] if states else "")


def parse_jobs_json(text: str) -> list[SlurmJob]:
    """``squeue --json`` (or slurmrestd's ``/jobs`` body) as jobs sorted by id."""
    jobs = [job_from_json(item) for item in _load_json(text, "jobs", "squeue --json")]
    return sorted(jobs, key=lambda j: j.job_id)


SACCT_FIELDS = "JobIDRaw,State,ExitCode"


def parse_sacct(text: str) -> list[FinishedJob]:
    """``sacct -X -n -P -o JobIDRaw,State,ExitCode`` output (``123|CANCELLED by 0|0:15``) as
    finished jobs sorted by id; lines of other ids (``123+0`` het components) are skipped."""
    jobs: dict[int, FinishedJob] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split("|")
        if len(fields) != 3:
            raise SchedulerUnparseable(f"sacct line {number}: not {SACCT_FIELDS!r}: {line!r:.200}")
        job_id, state, exit_code = (f.strip() for f in fields)
        if job_id.isdigit() and state:
            jobs[int(job_id)] = model.FinishedJob(
                job_id=int(job_id), state=state.split()[0].upper(), exit_code=exit_code)
    return [jobs[j] for j in sorted(jobs)]


def _in_partition(nodes: list[SlurmNode], partition: str | None) -> list[SlurmNode]:
    """The nodes of `partition`; a list (``cpu,ml``, as ``sbatch -p`` takes) means any of them."""
    if partition is None:
        return nodes
    wanted = {p.strip() for p in partition.split(",") if p.strip()}
    return [n for n in nodes if wanted.intersection(n.partitions)]


# --------------------------------------------------------------------------- CLI adapter
class SlurmCli:
    """Slurm through its commands. Paths are configurable (tests point `sinfo` at a script);
    `env` adds variables (``SLURM_CONF``) to the inherited environment.

    With `use_json` (the default) ``--json`` is tried first; once JSON failed while the format
    string worked, the adapter keeps to the format string. `jobs` / `job` need
    ``squeue --json`` (Slurm 21.08 or later).
    """

    def __init__(
        self,
        *,
        sinfo: str = "sinfo",
        squeue: str = "squeue",
        scontrol: str = "scontrol",
        sacct: str = "sacct",
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
        use_json: bool = True,
    ) -> None:
        self.sinfo = sinfo
        self.squeue = squeue
        self.scontrol = scontrol
        self.sacct = sacct
        self.timeout = timeout
        self.env = dict(env or {})
        self._json = use_json
        self._started: tuple[list[str], subprocess.Popen[bytes]] | None = None

    def __repr__(self) -> str:
        return f"SlurmCli(sinfo={self.sinfo!r}, timeout={self.timeout})"

    def start_nodes(self) -> None:
        """Start ``sinfo --json`` now, for the next `nodes` to read its answer: a short-lived
        caller (the gate) does its own work meanwhile. Nothing starts when JSON is off; a
        command that cannot be executed is left for `nodes` to report."""
        if not self._json or self._started is not None:
            return
        argv = [self.sinfo, "--json"]
        with contextlib.suppress(SchedulerNotFound):
            self._started = (argv, self._spawn(argv))

    def drop_started(self) -> None:
        """Kill and reap the ``sinfo`` `start_nodes` started, if nothing read it (the gate
        failed before it read the nodes): a hung one would outlive the gate otherwise."""
        started, self._started = self._started, None
        if started is not None:
            _kill_group(started[1])

    def run(self, argv: Sequence[str]) -> str:
        """Run one Slurm command and return its stdout (the one `start_nodes` started, when it
        is this command; `timeout` then counts from here).

        Raises `SchedulerNotFound` (cannot be executed), `SchedulerTimeout` (its process group
        is killed), `SchedulerFailed` (non-zero exit; stderr in `detail`).
        """
        started = self._started
        if started is not None and started[0] == list(argv):
            self._started = None
            proc = started[1]
        else:  # another command (``sinfo -h -o %P`` before the nodes) runs beside it
            proc = self._spawn(argv)
        try:
            out, err = proc.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired as exc:
            _kill_group(proc)
            raise SchedulerTimeout(f"{argv[0]}: no answer within {self.timeout:g} s") from exc
        if proc.returncode != 0:
            detail = err.decode(errors="replace").strip()
            first = detail.splitlines()[0] if detail else "no message"
            raise SchedulerFailed(
                f"{argv[0]} exited {proc.returncode}: {first}",
                returncode=proc.returncode,
                detail=detail[:2000],
            )
        return out.decode(errors="replace")

    def _spawn(self, argv: Sequence[str]) -> subprocess.Popen[bytes]:
        try:
            return subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env={**os.environ, **self.env},
                start_new_session=True,
            )
        except OSError as exc:
            raise SchedulerNotFound(f"{argv[0]}: cannot run it ({exc.strerror})") from exc

    def nodes(self, partition: str | None = None) -> list[SlurmNode]:
        """See `BatchScheduler.nodes`: ``sinfo --json``, else ``sinfo -h -N -o NODE_FORMAT``."""
        json_failed = False
        if self._json:
            try:
                return _in_partition(parse_nodes_json(self.run([self.sinfo, "--json"])), partition)
            except (SchedulerFailed, SchedulerUnparseable):
                json_failed = True
        nodes = parse_nodes_format(self.run([self.sinfo, "-h", "-N", "-o", NODE_FORMAT]))
        if json_failed:  # the cluster answers, only JSON does not: keep to the format string
            self._json = False
        return _in_partition(nodes, partition)

    def default_partition(self) -> str | None:
        """See `BatchScheduler.default_partition` (``sinfo -h -o %P``)."""
        return parse_default_partition(self.run([self.sinfo, "-h", "-o", "%P"]))

    def jobs(self, partition: str | None = None) -> list[SlurmJob]:
        """See `BatchScheduler.jobs` (``squeue --json``; 22.05 ignores ``-p`` with it, so the
        partition is filtered here)."""
        jobs = parse_jobs_json(self.run([self.squeue, "--json"]))
        return jobs if partition is None else [j for j in jobs if j.partition == partition]

    def job(self, job_id: int) -> SlurmJob | None:
        """See `BatchScheduler.job`."""
        return next((j for j in self.jobs() if j.job_id == job_id), None)

    def finished(self, job_ids: Sequence[int]) -> list[FinishedJob]:
        """See `BatchScheduler.finished` (``sacct -X -n -P -j IDS -o SACCT_FIELDS``)."""
        if not job_ids:
            return []
        ids = ",".join(str(int(j)) for j in sorted(set(job_ids)))
        return parse_sacct(self.run([self.sacct, "-X", "-n", "-P", "-j", ids,
                                     "-o", SACCT_FIELDS]))

    def update_node(self, name: str, *, state: str, reason: str | None = None) -> None:
        """See `BatchScheduler.update_node`."""
        argv = [self.scontrol, "update", f"NodeName={name}", f"State={state}"]
        if reason:
            argv.append(f"Reason={reason}")
        self.run(argv)

    def set_node_address(self, name: str, *, address: str, hostname: str) -> None:
        """See `BatchScheduler.set_node_address`."""
        self.run([self.scontrol, "update", f"NodeName={name}", f"NodeAddr={address}",
                  f"NodeHostname={hostname}"])

    def requeue(self, job_id: int) -> None:
        """See `BatchScheduler.requeue`."""
        self.run([self.scontrol, "requeue", str(int(job_id))])

    def token(self, *, lifespan: int = 3600, username: str | None = None) -> str:
        """A JWT for slurmrestd from ``scontrol token`` (needs AuthAltTypes=auth/jwt).

        Raises what `run` raises, or `SchedulerUnparseable` if no token was printed.
        """
        argv = [self.scontrol, "token", f"lifespan={lifespan}"]
        if username:
            argv.append(f"username={username}")
        out = self.run(argv).strip()
        if not out.startswith("SLURM_JWT=") or len(out) <= len("SLURM_JWT="):
            raise SchedulerUnparseable("scontrol token printed no SLURM_JWT=")
        return out[len("SLURM_JWT=") :]


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the command's whole process group (it leads one: start_new_session) and reap it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    try:
        proc.communicate(timeout=2)
    except subprocess.TimeoutExpired:  # a grandchild left the group and holds the pipes
        proc.kill()
        proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


# --------------------------------------------------------------------------- REST adapter
def offered_versions(spec: str) -> list[str]:
    """The slurmctld data-parser versions an OpenAPI document (``GET /openapi/v3``) has paths
    for (``/slurm/v0.0.40/jobs/``), oldest first. Raises `SchedulerUnparseable`."""
    try:
        paths = json.loads(spec).get("paths")
    except (ValueError, AttributeError) as exc:
        raise SchedulerUnparseable(f"slurmrestd /openapi/v3: not an OpenAPI document ({exc})") \
            from exc
    if not isinstance(paths, dict):
        raise SchedulerUnparseable("slurmrestd /openapi/v3: no paths")
    found = {m[1] for m in (_REST_PATH.match(str(p)) for p in paths) if m}
    return sorted(found, key=lambda v: rest_api_version(v) or (0, 0, 0))


def newest_readable(offered: Sequence[str]) -> str:
    """The newest of `offered` scoctl reads (v0.0.38 and later). Raises `SchedulerUnparseable`
    when the server offers none of them."""
    readable = [v for v in offered if (rest_api_version(v) or (0, 0, 0)) >= OLDEST_REST_API]
    if not readable:
        raise SchedulerUnparseable(
            f"slurmrestd offers {', '.join(offered) or 'no slurmctld API'}; scoctl reads "
            "v0.0.38 and later (or pin one with slurm.rest_api_version)")
    return max(readable, key=lambda v: rest_api_version(v) or (0, 0, 0))


class SlurmRest:
    """Slurm through slurmrestd with a JWT, at the newest data-parser version it offers.

    `url` is the base (``http://127.0.0.1:6820``); `user` and `token` go in the
    ``X-SLURM-USER-NAME`` / ``X-SLURM-USER-TOKEN`` headers. `api` pins a version
    (``v0.0.40``); without it the first request asks ``/openapi/v3`` which versions the server
    offers and keeps the newest scoctl reads. `update_node` and `finished` are delegated to
    `cli` (a default `SlurmCli` when not given). `transport` is for httpx's own transports
    (e.g. a unix socket).
    """

    def __init__(
        self,
        url: str,
        *,
        user: str,
        token: str | None,
        timeout: float = DEFAULT_TIMEOUT,
        api: str | None = None,
        cli: SlurmCli | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.user = user
        self.timeout = timeout
        self._api = api
        self.cli = cli or SlurmCli(timeout=timeout)
        self._token = token
        remember(token)  # an error body that echoes it back must not print it
        self._transport = transport
        self._client: httpx.Client | None = None

    def __repr__(self) -> str:
        return f"SlurmRest(url={self.url!r}, user={self.user!r}, api={self._api or 'newest'!r})"

    def close(self) -> None:
        """Close the HTTP connection pool."""
        if self._client is not None:
            self._client.close()
            self._client = None

    def __enter__(self) -> SlurmRest:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def api(self) -> str:
        """The data-parser version in use: the pinned one, else the newest the server offers
        (asked once). Raises what `get` raises, and `SchedulerUnparseable` when the server
        offers no version scoctl reads."""
        if self._api is None:
            self._api = newest_readable(offered_versions(self._request("/openapi/v3")))
        return self._api

    def get(self, path: str) -> str:
        """GET ``/slurm/<api>/<path>`` and return the body of a 200 answer.

        Raises `SchedulerAuthFailed` (no token, 401, 403), `SchedulerTimeout`,
        `SchedulerUnreachable` (connection failed, or 5xx without a Slurm error body),
        `SchedulerFailed` (any other error status; Slurm's error text in the message).
        """
        return self._request(f"/slurm/{self.api()}/{path}")

    def _request(self, url: str) -> str:
        import httpx

        if not self._token:
            raise SchedulerAuthFailed("slurmrestd: no JWT configured (SLURM_JWT)")
        if self._client is None:
            self._client = httpx.Client(
                base_url=self.url,
                timeout=self.timeout,
                transport=self._transport,
                headers={"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": self._token},
            )
        where = f"slurmrestd {self.url} {url}"
        try:
            response = self._client.get(url)
        except httpx.TimeoutException as exc:
            raise SchedulerTimeout(f"{where}: no answer within {self.timeout:g} s") from exc
        except httpx.TransportError as exc:
            raise SchedulerUnreachable(f"{where}: {type(exc).__name__}") from exc
        if response.status_code in (401, 403):
            raise SchedulerAuthFailed(f"{where}: HTTP {response.status_code} (token rejected)")
        if response.status_code != 200:
            errors = _error_list(response.text)
            if response.status_code >= 500 and not errors:
                raise SchedulerUnreachable(f"{where}: HTTP {response.status_code}")
            raise SchedulerFailed(
                f"{where}: HTTP {response.status_code}: {redact(_describe(errors))}",
                returncode=response.status_code,
                detail=redact(str(errors))[:2000],
                slurm_errno=_errno(errors),
            )
        return response.text

    def nodes(self, partition: str | None = None) -> list[SlurmNode]:
        """See `BatchScheduler.nodes` (``GET /nodes``)."""
        return _in_partition(parse_nodes_json(self.get("nodes")), partition)

    def default_partition(self) -> str | None:
        """See `BatchScheduler.default_partition`: the partition flagged DEFAULT, or ``sinfo``'s
        answer where the version shows no partition flags (v0.0.39 to v0.0.44 skip them)."""
        items = _load_json(self.get("partitions"), "partitions", "GET /partitions")
        if items and not any("flags" in item for item in items):
            return self.cli.default_partition()
        for item in items:
            flags = {str(f).upper() for f in item.get("flags") or []}
            if "DEFAULT" in flags and item.get("name"):
                return str(item["name"])
        return None

    def jobs(self, partition: str | None = None) -> list[SlurmJob]:
        """See `BatchScheduler.jobs` (``GET /jobs``)."""
        jobs = parse_jobs_json(self.get("jobs"))
        return jobs if partition is None else [j for j in jobs if j.partition == partition]

    def job(self, job_id: int) -> SlurmJob | None:
        """See `BatchScheduler.job` (``GET /job/<id>``; Slurm's "invalid job id" is None)."""
        try:
            jobs = parse_jobs_json(self.get(f"job/{int(job_id)}"))
        except SchedulerFailed as exc:
            if exc.slurm_errno == _UNKNOWN_JOB:
                return None
            raise
        return next((j for j in jobs if j.job_id == job_id), None)

    def finished(self, job_ids: Sequence[int]) -> list[FinishedJob]:
        """See `BatchScheduler.finished` (through ``sacct``, like `update_node`)."""
        return self.cli.finished(job_ids)

    def update_node(self, name: str, *, state: str, reason: str | None = None) -> None:
        """See `BatchScheduler.update_node` (through ``scontrol``, whatever the version)."""
        self.cli.update_node(name, state=state, reason=reason)

    def set_node_address(self, name: str, *, address: str, hostname: str) -> None:
        """See `BatchScheduler.set_node_address` (through ``scontrol``, as `update_node`)."""
        self.cli.set_node_address(name, address=address, hostname=hostname)

    def requeue(self, job_id: int) -> None:
        """See `BatchScheduler.requeue` (through ``scontrol``, as `update_node`)."""
        self.cli.requeue(job_id)


def _error_list(text: str) -> list[Any]:
    try:
        data = json.loads(text)
    except ValueError:
        return []
    errors = data.get("errors") if isinstance(data, dict) else None
    return errors if isinstance(errors, list) else []


def make_scheduler(
    *,
    rest_url: str | None = None,
    rest_user: str | None = None,
    rest_token: str | None = None,
    rest_api: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    sinfo: str = "sinfo",
    squeue: str = "squeue",
    scontrol: str = "scontrol",
    env: Mapping[str, str] | None = None,
) -> BatchScheduler:
    """The scheduler the config asks for: `SlurmRest` when `rest_url` is set, else `SlurmCli`.

    For REST the user defaults to ``$SLURM_USER`` / ``$USER`` and the token to ``$SLURM_JWT``;
    `rest_api` pins the data-parser version (else the newest the server offers);
    a missing token surfaces as `SchedulerAuthFailed` on the first call, not here.
    """
    cli = SlurmCli(sinfo=sinfo, squeue=squeue, scontrol=scontrol, timeout=timeout, env=env)
    if not rest_url:
        return cli
    environ = {**os.environ, **(env or {})}
    user = rest_user or environ.get("SLURM_USER") or environ.get("USER") or "root"
    token = rest_token or environ.get("SLURM_JWT")
    return SlurmRest(rest_url, user=user, token=token, timeout=timeout, api=rest_api, cli=cli)
