"""The event spool: a group-writable directory where hooks drop tokens without the state lock.

Writers (`scoctl emit`, Slurm prolog/epilog hooks, the submit wrapper; Slurm's power-saving
programs through `scoctl slurm resume|suspend|resume-fail`, as kind ``power``) write one JSON
file per event: first to a dot-file, then `rename` into place, so a reader never sees half a
file and a writer never blocks. `watch` ingests the token files and the Slurm power stage the power
requests, each in name order (time, then pid), and deletes each file only after the
transaction that recorded it has committed. Reclaim notices use the same format in their own
folder (`notice_dir`), read by the notice stage.

Anyone in the spool's group can put anything there, so a reader checks before it reads: each
file is opened without following a link and without waiting for a writer, and only a regular
file no larger than `MAX_EVENT_BYTES` is read (never more than that and one byte). What is not
an event (a FIFO, a link, a device, a huge or broken file) is moved to `rejected/` with one
warning, kept for a person, and never read again.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import re
import secrets as _random
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scoctl.clock import parse_rfc3339, rfc3339
from scoctl.core.model import is_slug
from scoctl.core.text import printable_detail
from scoctl.errors import ConfigError
from scoctl.secrets import scrub

log = logging.getLogger(__name__)

SPOOL_MODE = 0o2775
TOKEN_KIND = "token"  # a status token `watch` records
POWER_KIND = "power"  # a Slurm power-saving request the Slurm power stage applies
NOTICE_KIND = "notice"  # a reclaim notice (`scoctl notice`) the notice stage records
KINDS = (TOKEN_KIND, POWER_KIND, NOTICE_KIND)
UNNAMED = (POWER_KIND, NOTICE_KIND)  # kinds whose workload may be empty
NOTICES = "notices"  # reclaim notices (`scoctl notice`) wait here, apart from the tokens
REJECTED = "rejected"  # what a reader refused, kept for a person


@dataclass(frozen=True)
class SpoolEvent:
    path: Path
    ts: str
    token: str
    workload: str
    detail: Mapping[str, Any] = field(default_factory=dict)
    kind: str = TOKEN_KIND


def ensure_spool(directory: Path) -> None:
    """Create the spool directory if it is missing, and each missing folder above it: setgid
    and group-writable, so that whoever drops an event first (a Slurm hook as SlurmUser, an
    operator's `scoctl notice`) leaves a folder the other users of the group can write into
    and the runner can remove files from."""
    missing: list[Path] = []
    while not directory.exists():
        missing.append(directory)
        directory = directory.parent
    for folder in reversed(missing):
        folder.mkdir(exist_ok=True)
        os.chmod(folder, SPOOL_MODE)


def notice_dir(spool: Path) -> Path:
    """Where `scoctl notice` drops reclaim notices (kind ``notice``): a folder of the spool that
    `watch` (which reads only the spool's own files) leaves to the notice stage."""
    return spool / NOTICES


def rejected_dir(spool: Path) -> Path:
    """Where readers move the files of `spool` (or of its notice folder) that are no event."""
    return spool / REJECTED


def write_event(directory: Path, *, ts: str, token: str, workload: str,
                detail: Mapping[str, Any] | None = None, kind: str = TOKEN_KIND) -> Path:
    """Drop one event into the spool atomically; returns its path. Takes no lock.

    Control characters in `detail` are escaped (`scoctl.core.text.printable`). Raises
    ConfigError, and writes nothing, for an event the reader would drop (`parse_event`: over
    `MAX_EVENT_BYTES`, nested too deep, a bad token or slug): a writer is told at once instead
    of a success that is never read.
    """
    event: dict[str, Any] = {"ts": ts, "token": token, "workload": workload,
                             "detail": printable_detail(scrub(dict(detail or {})))}
    if kind != TOKEN_KIND:
        event["kind"] = kind
    body = json.dumps(event, sort_keys=True)
    stamp = ts.replace(":", "").replace("-", "").replace(".", "")
    name = f"{stamp}-{os.getpid():08d}-{_random.token_hex(4)}.json"
    try:
        parse_event(directory / name, body.encode())
    except ConfigError as exc:
        raise ConfigError(f"the spool's reader would drop this event ({exc})") from None
    ensure_spool(directory)
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



TOKEN_RE = re.compile(r"[A-Z][A-Z0-9_]{1,63}")
EVENT_FIELDS = frozenset({"ts", "token", "workload", "detail", "kind"})
MAX_EVENT_BYTES = 64 * 1024  # an event is a token and a few details; more is not an event
MAX_DETAIL_DEPTH = 8


def parse_event(path: Path, raw: bytes) -> SpoolEvent:
    """One spool file's bytes as an event; ConfigError naming the file and field otherwise.

    The writer's shape exactly: a JSON object with an RFC 3339 ``ts``, an UPPER_SNAKE ``token``,
    a workload slug (empty allowed for a power request or a notice), an optional ``detail``
    mapping and an optional ``kind`` (`KINDS`; none is a token); nothing else. Control
    characters in the detail (keys and values) come out escaped, before anything stores or
    prints them.
    """
    file = str(path)
    if len(raw) > MAX_EVENT_BYTES:
        raise ConfigError(f"larger than {MAX_EVENT_BYTES} bytes", file=file)
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise ConfigError(f"not a JSON event: {exc}", file=file) from exc
    if not isinstance(data, dict):
        raise ConfigError("not a JSON object", file=file)
    unknown = sorted(str(k) for k in data if k not in EVENT_FIELDS)
    if unknown:
        raise ConfigError("unknown field", file=file, field=unknown[0])
    kind = data.get("kind", TOKEN_KIND)
    if kind not in KINDS:
        raise ConfigError(f"not an event kind: {kind!r}", file=file, field="kind")
    token, workload = data.get("token"), data.get("workload")
    if not isinstance(token, str) or not TOKEN_RE.fullmatch(token):
        raise ConfigError(f"not a token: {token!r}", file=file, field="token")
    if not isinstance(workload, str) or not (
            is_slug(workload) or (kind in UNNAMED and workload == "")):
        raise ConfigError(f"not a workload slug: {workload!r}", file=file, field="workload")
    detail = data.get("detail") or {}
    if not isinstance(detail, dict):
        raise ConfigError("must be a mapping", file=file, field="detail")
    if _nesting(detail) > MAX_DETAIL_DEPTH:
        raise ConfigError(f"nested deeper than {MAX_DETAIL_DEPTH} levels", file=file,
                          field="detail")
    return SpoolEvent(path=path, ts=_timestamp(data.get("ts"), file), token=token,
                      workload=workload, detail=printable_detail(detail), kind=str(kind))


def _nesting(value: object) -> int:
    """How deeply lists and mappings nest in `value` (0 for a scalar); iterative, so a deep
    value cannot exhaust the stack here or in whatever walks it later (`scrub`)."""
    deepest, stack = 0, [(value, 0)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(
            item, list) else None
        if children is None:
            deepest = max(deepest, depth)
            continue
        deepest = max(deepest, depth + 1)
        if deepest > MAX_DETAIL_DEPTH:
            break
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _timestamp(value: object, file: str) -> str:
    try:
        if not isinstance(value, str):
            raise ValueError(value)
        return rfc3339(parse_rfc3339(value))
    except (ValueError, OverflowError) as exc:
        raise ConfigError(f"not an RFC 3339 time: {value!r}", file=file, field="ts") from exc


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a JSON number")


def read_spool_file(path: Path) -> bytes:
    """The bytes of one spool file, checked before they are read: opened without following a
    symbolic link and without blocking (a FIFO with no writer), a regular file only, and at
    most `MAX_EVENT_BYTES` + 1 bytes read, so that nothing in the spool can hold a pass or
    fill the memory.

    Raises ConfigError naming the file when it is no file to read (link, FIFO, device,
    folder, too large); OSError when it is gone or unreadable right now.
    """
    file = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ConfigError("a symbolic link, not a regular file", file=file) from exc
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"not a regular file ({_file_type(mode)})", file=file)
        chunks, left = [], MAX_EVENT_BYTES + 1
        while left > 0:
            chunk = os.read(fd, left)
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISDIR, "a folder"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def reject(path: Path, why: ConfigError) -> None:
    """Move a spool file that is no event to the spool's `rejected/` folder (made as the spool
    folders are: setgid, group-writable), with one warning naming it and why; it is kept for a
    person (a hook's bug report, or someone's attempt) and never read again. A spool whose
    folder this process may not change keeps the file and says so at every pass."""
    spool = path.parent.parent if path.parent.name == NOTICES else path.parent
    target = rejected_dir(spool) / path.name
    try:
        ensure_spool(target.parent)
        os.rename(path, target)
    except FileNotFoundError:
        return  # a concurrent reader moved it first (and warned)
    except OSError as exc:
        log.warning("spool: %s; cannot move it to %s (%s)", why, target.parent, exc.strerror)
        return
    log.warning("spool: %s; rejected: moved to %s", why, target)


def pending_events(directory: Path, kind: str = TOKEN_KIND) -> Iterator[SpoolEvent]:
    """The spool's events of one `kind` in order. A file that is no event (whatever reader
    finds it) is moved to `rejected/` with one warning naming it (`reject`)."""
    if not directory.is_dir():
        return
    for path in sorted(directory.glob("[!.]*.json")):
        try:
            event = parse_event(path, read_spool_file(path))
        except OSError:
            continue  # ingested and removed by a concurrent pass, or unreadable right now
        except ConfigError as exc:
            reject(path, exc)
            continue
        if event.kind == kind:
            yield event


def discard(event: SpoolEvent) -> None:
    """Remove an ingested event file. One this process may not remove (a folder made by hand
    without group write) is left with a warning naming it: the pass that ingested it is
    committed, and every pass after says so until someone fixes the folder."""
    try:
        event.path.unlink()
    except FileNotFoundError:
        pass
    except PermissionError as exc:
        log.warning("spool: cannot remove %s (%s); make its folder group-writable "
                    "(scoctl init does)", event.path, exc.strerror)
