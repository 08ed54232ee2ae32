"""A per-user cache of parsed config files, so a run that reads the config does not import YAML.

A Slurm submit wrapper runs ``scoctl gate`` before every ``sbatch``: importing PyYAML costs it
~11 ms of its ~100 (bench/gate_bench.py), and parsing the config is the only use the gate has
for it. `load_config` therefore keeps the parse (the data and the line of every path, as
`yamlsrc.load_located` returns them) in one JSON file per config path, with the text it was
parsed from, and takes it from there only when the config's text is that text, character for
character: a stale entry is never used, and any edit of the file parses it afresh and replaces
the entry. Validation (`parse_config`) runs on every load, cached or not. (No hash: comparing
a few kilobytes costs microseconds, and OpenSSL's hashlib costs the gate 2 ms to import.)

Where: ``$XDG_CACHE_HOME/scoctl`` (else ``~/.cache/scoctl``), a directory of mode 0700 owned by
the user; ``SCOCTL_NO_CACHE=1`` turns the cache off. The cache is only ever a shortcut: an
entry that is missing, unreadable, not JSON, of another format or scoctl version, not owned by
this user or writable by others is ignored (and replaced when the directory is writable); a
directory that cannot be made, or a write that fails, leaves the config parsed as before. Only
JSON is read back (no pickle: nothing in the file can run code), and only the types a YAML
safe load gives are encoded; a document holding anything else is simply not cached.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import stat
import zlib
from datetime import date, datetime
from pathlib import Path
from typing import Any

FORMAT = 2
_DISABLE = "SCOCTL_NO_CACHE"

Lines = dict[tuple[str | int, ...], int]  # as `yamlsrc.Lines`


class _Uncacheable(Exception):
    """A value the cache does not encode (the document is parsed every time instead)."""


def cache_dir() -> Path | None:
    """The user's cache directory for scoctl, or None when the cache is off or has no home."""
    if os.environ.get(_DISABLE, "") not in ("", "0"):
        return None
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not base or not os.path.isabs(base):  # the XDG spec: a relative value is ignored
        home = os.environ.get("HOME", "")
        if not home or not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return Path(base) / "scoctl"


def _version() -> str:
    from scoctl import __version__

    return __version__


def _entry(folder: Path, where: str) -> Path:
    """The entry of the config at `where` (two paths sharing a name: each entry names its own
    path, and one replaces the other)."""
    return folder / f"config-{zlib.crc32(where.encode('utf-8', 'surrogateescape')):08x}.json"


def _ours(info: os.stat_result) -> bool:
    """Owned by this user and writable by no one else (what ssh asks of its files)."""
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def get(file: str, text: str) -> tuple[Any, Lines] | None:
    """The cached parse of `file` when its entry is for exactly `text`, else None."""
    folder = cache_dir()
    if folder is None:
        return None
    where = os.path.abspath(file)
    try:
        if not _ours(os.stat(folder)):
            return None
        fd = os.open(_entry(folder, where), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(handle.fileno())
            if not stat.S_ISREG(info.st_mode) or not _ours(info) or info.st_size > 64 << 20:
                return None
            entry = json.loads(handle.read())
        if (not isinstance(entry, dict) or entry.get("format") != FORMAT
                or entry.get("scoctl") != _version() or entry.get("file") != where
                or entry.get("text") != text):
            return None
        lines = {tuple(path): int(line) for path, line in entry["lines"]}
        return _decode(entry["data"]), lines
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return None


def put(file: str, text: str, data: Any, lines: Lines) -> None:
    """Keep the parse of `file` (whose text is `text`); any failure leaves no entry behind."""
    folder = cache_dir()
    if folder is None:
        return
    import tempfile  # only a parse that was not cached writes

    where = os.path.abspath(file)
    try:
        body = json.dumps({"format": FORMAT, "scoctl": _version(), "file": where, "text": text,
                           "lines": [[list(path), line] for path, line in lines.items()],
                           "data": _encode(data)}, separators=(",", ":"))
    except (_Uncacheable, ValueError, RecursionError):
        return
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _ours(os.stat(folder)):
            return
        fd, temp = tempfile.mkstemp(dir=folder, prefix=".config-", suffix=".tmp")
    except OSError:
        return
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(body)
        os.replace(temp, _entry(folder, where))  # readers see the old entry or the new one
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(temp)


# JSON has lists, string-keyed objects and plain scalars; a YAML safe load also gives mappings
# with keys of any scalar type, dates, timestamps and bytes. Every JSON object here is one of
# these tags, so a mapping never reads back as anything else.


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list):
        return [_encode(item) for item in value]
    if isinstance(value, dict):
        return {"m": [[_encode(key), _encode(item)] for key, item in value.items()]}
    if isinstance(value, datetime):  # before date: a datetime is a date
        return {"t": value.isoformat()}
    if isinstance(value, date):
        return {"d": value.isoformat()}
    if isinstance(value, bytes):
        return {"b": base64.b64encode(value).decode("ascii")}
    raise _Uncacheable(type(value).__name__)


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(item) for item in value]
    if not isinstance(value, dict):
        return value
    (tag, body), = value.items()
    if tag == "m":
        return {_decode(key): _decode(item) for key, item in body}
    if tag == "t":
        return datetime.fromisoformat(body)
    if tag == "d":
        return date.fromisoformat(body)
    if tag == "b":
        return base64.b64decode(body.encode("ascii"), validate=True)
    raise ValueError(f"unknown tag {tag!r}")
