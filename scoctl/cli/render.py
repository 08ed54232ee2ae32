"""All terminal output: rich tables for people, JSON for machines. The only rich user."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from scoctl.core.model.vocabulary import InstanceStatus, WorkloadStatus
from scoctl.secrets import redact

if TYPE_CHECKING:
    from rich.console import Console

# rich is imported on first use: JSON output and the Slurm gate never pay for it.
_out: Console | None = None
_err: Console | None = None


PIPED_WIDTH = 400


def out() -> Console:
    global _out
    if _out is None:
        from rich.console import Console

        # piped (no terminal, no COLUMNS): wide enough that a table never folds an id
        wide = not sys.stdout.isatty() and "COLUMNS" not in os.environ
        _out = Console(soft_wrap=True, width=PIPED_WIDTH if wide else None)
    return _out


def err() -> Console:
    global _err
    if _err is None:
        from rich.console import Console

        _err = Console(stderr=True, soft_wrap=True)
    return _err


def print_json(data: Any, *, pretty: bool = True) -> None:
    """One JSON document on stdout (known secrets redacted, as everywhere below): indented, or
    with `pretty` false compact on one line (json's C encoder: several times faster on a large
    document, which the pure-Python encoder that ``indent`` selects is not)."""
    text = (json.dumps(data, indent=2, sort_keys=False, default=str) if pretty
            else json.dumps(data, separators=(",", ":"), default=str))
    sys.stdout.write(redact(text) + "\n")
    sys.stdout.flush()


def print_json_line(data: Any) -> None:
    """One JSON object per line (events, streams)."""
    sys.stdout.write(redact(json.dumps(data, separators=(",", ":"), default=str)) + "\n")
    sys.stdout.flush()


def warn(message: str) -> None:
    message = redact(message)
    if not sys.stderr.isatty():
        print(f"scoctl: warning: {message}", file=sys.stderr)
        return
    err().print(f"[yellow]scoctl: warning:[/yellow] {message}", highlight=False, markup=True)


def note(message: str) -> None:
    """A normal operation worth a line on stderr (a signal handled, a config reloaded):
    ``scoctl: message``, not a warning."""
    print(f"scoctl: {redact(message)}", file=sys.stderr, flush=True)


def info(message: str) -> None:
    err().print(redact(message), highlight=False)


_OWN_MARKUP = re.compile(r"\[/?(?:white|yellow|cyan|green|red|magenta|dim|bold)\]")


def line(message: str) -> None:
    """One line on stdout; plain (and without importing rich) when stdout is not a terminal,
    as in Slurm hooks, timers and pipes."""
    message = redact(message)
    if not sys.stdout.isatty():
        sys.stdout.write(_OWN_MARKUP.sub("", message) + "\n")
        sys.stdout.flush()
        return
    out().print(message, highlight=False)


def table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]], *,
          empty: str = "(none)") -> None:
    """A simple table on stdout; `empty` is printed when there are no rows."""
    from rich.table import Table

    rows = list(rows)
    if not rows:
        if title:
            out().print(f"[bold]{title}[/bold]: {empty}", highlight=False)
        return
    t = Table(title=title, title_justify="left", title_style="bold", header_style="bold")
    for column in columns:
        t.add_column(column, overflow="fold")
    for row in rows:
        t.add_row(*("" if v is None else str(v) for v in row))
    out().print(t)


def key_values(title: str, pairs: Mapping[str, Any]) -> None:
    from rich.table import Table

    t = Table(title=title, title_justify="left", title_style="bold", show_header=False)
    t.add_column("key", style="bold")
    t.add_column("value", overflow="fold")
    for key, value in pairs.items():
        t.add_row(key, "" if value is None else str(value))
    out().print(t)


STATUS_STYLE: dict[str, str] = {
    WorkloadStatus.PENDING: "white", WorkloadStatus.QUEUED: "yellow",
    WorkloadStatus.PREPARING: "cyan", WorkloadStatus.RUNNING: "green",
    WorkloadStatus.SUCCEEDED: "green", WorkloadStatus.FAILED: "red",
    WorkloadStatus.CANCELLED: "magenta", WorkloadStatus.STOPPED: "magenta",
    InstanceStatus.DELETED: "dim", InstanceStatus.READY: "green", InstanceStatus.ACTIVE: "cyan",
    InstanceStatus.BUILDING: "yellow", InstanceStatus.REQUESTED: "yellow",
    InstanceStatus.ERROR: "red", InstanceStatus.DRAINING: "magenta",
    InstanceStatus.DELETING: "magenta", InstanceStatus.NOTICED: "magenta",
}


def styled(status: str) -> str:
    style = STATUS_STYLE.get(status)
    return f"[{style}]{status}[/{style}]" if style else status


class Progress:
    """A progress bar on stderr (hidden with --json or when stderr is not a terminal)."""

    def __init__(self, description: str, total: int, *, enabled: bool = True) -> None:
        self._progress = None
        self._task = None
        if enabled and err().is_terminal and total > 0:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                TextColumn,
                TimeElapsedColumn,
            )
            from rich.progress import Progress as RichProgress

            self._progress = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                          MofNCompleteColumn(), TimeElapsedColumn(),
                                          console=err(), transient=True)
            self._task = self._progress.add_task(description, total=total)

    def __enter__(self) -> Progress:
        if self._progress is not None:
            self._progress.start()
        return self

    def advance(self, amount: int = 1, description: str | None = None) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, advance=amount, description=description)

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()


# --------------------------------------------------------------------------- scoctl top


Section = tuple[str, Sequence[str], Sequence[Sequence[Any]]]


def frame(title: str, sections: Sequence[Section]) -> Any:
    """One `scoctl top` frame: a title line and a table per section (rich renderables)."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = [Text(title, style="bold")]
    for name, columns, rows in sections:
        if not rows:
            parts.append(Text.from_markup(f"[bold]{name}[/bold]: (none)"))
            continue
        t = Table(title=name, title_justify="left", title_style="bold", header_style="bold")
        for column in columns:
            t.add_column(column, no_wrap=True)
        for row in rows:
            t.add_row(*("" if v is None else str(v) for v in row))
        parts.append(t)
    return Group(*parts)


def show_frame(renderable: Any) -> None:
    out().print(renderable)


def live(build: Any, interval: float) -> None:
    """Redraw `build()` every `interval` seconds on the terminal until interrupted."""
    import time

    from rich.live import Live

    with Live(build(), console=out(), refresh_per_second=4, screen=False) as view:
        while True:
            time.sleep(interval)
            view.update(build())
