"""The `scoctl` command: the entry point, and errors to exit codes.

Start-up stays fast. A plain ``scoctl gate`` line (a submit wrapper runs one before every
``sbatch``) runs without typer at all (`cli.gate_fast`); every other line goes to the typer
tree of `cli.root`, which builds only the command it runs. Command modules import their stages
(and through them the Kubernetes and OpenStack clients) only inside the command functions.

``scoctl.cli.app.app`` is the typer app itself (imported on first access).
"""

from __future__ import annotations

import os
import sys
from typing import Any

from scoctl.bulk import collector_paused
from scoctl.errors import EXIT_FAILURE, EXIT_USAGE, ScoctlError

HELP = frozenset({"--help", "-h"})


def __getattr__(name: str) -> Any:
    if name == "app":
        from scoctl.cli.root import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _typer(argv: list[str]) -> int:
    """Run the typer tree on `argv`; its own exits and usage errors become exit codes. A line
    asking for help only prints it: that run, too, goes without the cyclic GC."""
    if HELP & set(argv):
        with collector_paused():
            return _typer_run(argv)
    return _typer_run(argv)


def _typer_run(argv: list[str]) -> int:
    import typer
    import typer.main

    from scoctl.cli.root import app

    command = typer.main.get_command(app)
    try:
        code = command.main(args=argv, prog_name="scoctl", standalone_mode=False)
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        print("scoctl: aborted", file=sys.stderr)
        return 130
    except (ScoctlError, KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as exc:
        # click's (or typer's vendored click's) usage errors know how to show themselves
        show = getattr(exc, "show", None)
        if show is None or not hasattr(exc, "exit_code"):
            raise
        show()
        return EXIT_USAGE if exc.exit_code == EXIT_USAGE else int(exc.exit_code)
    return code if isinstance(code, int) else 0


def _fast_gate(argv: list[str]) -> int | None:
    """The exit code of a plain gate line run without typer, or None for the typer tree."""
    # click answers shell completion when this variable is set, whatever the command line says
    # (--help anywhere: typer answers, so the fast path's own imports are not paid for).
    # A gate or help line is a short-lived process: it runs without the cyclic GC, whose
    # passes over the ~100,000 objects the imports create cost a few ms and free nothing
    if "gate" in argv and "_SCOCTL_COMPLETE" not in os.environ and not HELP & set(argv):
        with collector_paused():
            from scoctl.cli.gate_fast import parse_fast, run_fast

            fast = parse_fast(argv)
            if fast is not None:
                return run_fast(*fast)
    return None


def _leave(code: int) -> None:
    """End the process now, as `sys.exit(code)` would once the interpreter had torn itself
    down: output flushed and the log handlers closed (nothing else of a gate or help line is
    open: the gate's store and spool files are closed, and help runs no command). The
    teardown frees every imported module's objects one by one: ~5 ms of a gate's ~100, ~10 ms
    of a sub-command's help, freeing nothing a process ending needs."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:  # the reader went away: as main() answers one
            code = code or EXIT_FAILURE
    if "logging" in sys.modules:
        import logging

        logging.shutdown()
    os._exit(code)


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the command line and map errors to design: CLI's exit codes. As the
    ``scoctl`` program (no `argv`), a gate line that ran without typer and a help line end
    the process at once (`_leave`): short-lived lines whose teardown is all cost."""
    args = sys.argv[1:] if argv is None else list(argv)
    try:
        code = _fast_gate(args)
        if code is None:
            code = _typer(args)
            if argv is None and HELP & set(args):
                _leave(code)  # help printed: nothing ran, nothing is open
        elif argv is None:
            _leave(code)
    except ScoctlError as exc:
        from scoctl.secrets import redact

        print(f"scoctl: error: {redact(str(exc))}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        print("scoctl: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(EXIT_FAILURE)
    sys.exit(code)
