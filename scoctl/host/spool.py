"""The event spool: a group-writable directory where hooks drop tokens without the state lock.

Writers (`scoctl emit`, Slurm prolog/epilog hooks, the submit wrapper; Slurm's power-saving
programs through `scoctl slurm resume|suspend|resume-fail`, as kind ``power``) write one JSON
file per event: first to a dot-file, then `rename` into place, so a reader never sees half a
file and a writer never blocks. `watch` ingests the token files and the Slurm power stage the power
requests, each in name order (time, then pid), and deletes each file only after the
transaction that recorded it has committed. Reclaim notices use the same format in their own
folder (`notice_dir`), read by the notice stage.
"""

from __future__ import annotations

import json
import os
import secrets as _random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scoctl.secrets import scrub

SPOOL_MODE = 0o2775
TOKEN_KIND = "token"  # a status token `watch` records
POWER_KIND = "power"  # a Slurm power-saving request the Slurm power stage applies
NOTICES = "notices"  # reclaim notices (`scoctl notice`) wait here, apart from the tokens


@dataclass(frozen=True)
class SpoolEvent:
    path: Path
    ts: str
    token: str
    workload: str
    detail: Mapping[str, Any] = field(default_factory=dict)
    kind: str = TOKEN_KIND


def ensure_spool(directory: Path) -> None:
    """Create the spool directory (setgid, group-writable) if it is missing."""
    if not directory.exists():
        directory.mkdir(parents=True, exist_ok=True)
        os.chmod(directory, SPOOL_MODE)


def notice_dir(spool: Path) -> Path:
    """Where `scoctl notice` drops reclaim notices: a folder of the spool that `watch` (which
    reads only the spool's own files) leaves to the notice stage."""
    return spool / NOTICES


def write_event(directory: Path, *, ts: str, token: str, workload: str,
                detail: Mapping[str, Any] | None = None, kind: str = TOKEN_KIND) -> Path:
    """Drop one event into the spool atomically; returns its path. Takes no lock."""
    directory.mkdir(parents=True, exist_ok=True)
    event: dict[str, Any] = {"ts": ts, "token": token, "workload": workload,
                             "detail": scrub(dict(detail or {}))}
    if kind != TOKEN_KIND:
        event["kind"] = kind
    body = json.dumps(event, sort_keys=True)
    stamp = ts.replace(":", "").replace("-", "").replace(".", "")
    name = f"{stamp}-{os.getpid():08d}-{_random.token_hex(4)}.json"
    tmp = directory / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o664)
    try:
        os.write(fd, body.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    final = directory / name
    os.rename(tmp, final)
    return final


def pending_events(directory: Path, kind: str = TOKEN_KIND) -> Iterator[SpoolEvent]:
    """The spool's events of one `kind` in order (files written without a kind are tokens);
    unreadable files are skipped (and left for a person)."""
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("[!.]*.json")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            if str(data.get("kind") or TOKEN_KIND) != kind:
                continue
            event = SpoolEvent(path=path, ts=str(data["ts"]), token=str(data["token"]),
                               workload=str(data["workload"]),
                               detail=dict(data.get("detail") or {}), kind=kind)
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        yield event


def discard(event: SpoolEvent) -> None:
    """Remove an ingested event file."""
    try:
        event.path.unlink()
    except FileNotFoundError:
        pass
