"""`scoctl gate` without typer: the command's body, and a fast entry for plain command lines.

A Slurm submit wrapper runs the gate before every ``sbatch``, so its start-up is paid per job.
Importing typer and click and building the whole command tree costs more than the gate's own
work, so `scoctl.cli.app.main` first offers the command line to `parse_fast`. It accepts only
what it can read exactly as click would: the global options, ``gate`` and its options, each
given once or more (the last wins, as in click), with well-formed values. Anything else —
``--help``, an unknown option, a value click would refuse or convert (``--cpus 0``, ``--cpus
+4``, a value that starts with ``-``) — returns None, and the typer command tree parses the line
and reports any error exactly as it always has. `cli.gate` (the typer command, its ``--help``)
and this entry share `run`; a test checks that both parse every command line the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scoctl.cli.context import Globals, start

if TYPE_CHECKING:
    from scoctl.adapters.batch import BatchScheduler
    from scoctl.adapters.slurm import SlurmCli

BACKENDS = ("slurm", "k8s")
KINDS = ("job", "deployment", "inference")


@dataclass(frozen=True)
class GateArgs:
    """The options of `scoctl gate` (see `cli.gate` for their help)."""

    backend: str
    cpus: str = "1"  # whole CPUs (slurm) or a Kubernetes cpu quantity (k8s): `request_size`
    mem: str = "0"
    gpus: int = 0
    gpu_type: str | None = None
    gpu_resource: str | None = None
    partition: str | None = None
    workload: str | None = None
    kind: str = "job"
    job_id: str | None = None
    no_elastic: bool = False
    json: bool = False


@dataclass(frozen=True)
class RootArgs:
    """The global options, as the root callback receives them."""

    config: Path | None = None
    state: str | None = None  # a path or a database URL: Path() would fold its //
    json: bool = False
    verbose: int = 0
    quiet: bool = False


# option -> field; every name here is one the typer commands declare (a test compares them)
ROOT_VALUES = {"--config": "config", "--state": "state"}
ROOT_FLAGS = {"--json": "json", "-q": "quiet", "--quiet": "quiet"}
ROOT_COUNTS = {"-v": "verbose", "--verbose": "verbose"}
GATE_VALUES = {"--backend": "backend", "--cpus": "cpus", "--mem": "mem", "--gpus": "gpus",
               "--gpu-type": "gpu_type", "--gpu-resource": "gpu_resource",
               "--partition": "partition", "-p": "partition", "--workload": "workload",
               "-w": "workload", "--kind": "kind", "--job-id": "job_id"}
GATE_FLAGS = {"--no-elastic": "no_elastic", "--json": "json"}
_CHOICES = {"backend": BACKENDS, "kind": KINDS}
_MINIMUM = {"cpus": 1, "gpus": 0}


def _value(name: str, text: str) -> str | int | None:
    """A gate option's value as click would convert it, or None when click might not (a
    ``--cpus`` other than a plain whole number, ``500m``, goes to the tree too: it reads it
    as the same text, and `request_size` judges it for the backend either way)."""
    if name in _CHOICES:
        return text if text in _CHOICES[name] else None
    if name in _MINIMUM:
        if not (text.isascii() and text.isdigit()) or int(text) < _MINIMUM[name]:
            return None
        return text if name == "cpus" else int(text)
    return text


def _split(token: str) -> tuple[str, str | None]:
    """``--name=value`` -> (``--name``, value); other tokens -> (token, None)."""
    if token.startswith("--") and "=" in token:
        name, _, value = token.partition("=")
        return name, value
    return token, None


def _verbosity(token: str) -> int:
    """How many -v a ``-v`` / ``-vv`` / ``--verbose`` token counts (0 if it is none of them)."""
    if token == "--verbose":
        return 1
    if len(token) > 1 and token[0] == "-" and set(token[1:]) == {"v"}:
        return len(token) - 1
    return 0


def _parse_root(argv: Sequence[str]) -> tuple[RootArgs, int] | None:
    """The global options before ``gate``, and the index of ``gate``; None if not that."""
    values: dict[str, Any] = {}
    index = 0
    while index < len(argv):
        name, inline = _split(argv[index])
        count = _verbosity(name) if inline is None else 0
        if name == "gate" and inline is None:
            return RootArgs(**values), index
        if count:
            values["verbose"] = values.get("verbose", 0) + count
        elif name in ROOT_FLAGS and inline is None:
            values[ROOT_FLAGS[name]] = True
        elif name in ROOT_VALUES:
            value, index = _take(argv, index, inline)
            if value is None:
                return None
            values[ROOT_VALUES[name]] = Path(value) if name == "--config" else value
        else:
            return None
        index += 1
    return None


def _take(argv: Sequence[str], index: int, inline: str | None) -> tuple[str | None, int]:
    """An option's value (inline, or the next token) and the index of its last token; None
    when it is missing, empty, or starts with ``-`` (click's reading of those differs)."""
    if inline is None:
        index += 1
        inline = argv[index] if index < len(argv) else None
    if not inline or inline.startswith("-"):
        return None, index
    return inline, index


def _parse_gate(argv: Sequence[str]) -> GateArgs | None:
    """The gate's options (after ``gate``); None unless every token is one click reads alike."""
    values: dict[str, Any] = {}
    index = 0
    while index < len(argv):
        name, inline = _split(argv[index])
        if name in GATE_FLAGS and inline is None:
            values[GATE_FLAGS[name]] = True
        elif name in GATE_VALUES:
            text, index = _take(argv, index, inline)
            value = None if text is None else _value(GATE_VALUES[name], text)
            if value is None:
                return None
            values[GATE_VALUES[name]] = value
        else:
            return None
        index += 1
    if "backend" not in values:
        return None
    return GateArgs(**values)


def parse_fast(argv: Sequence[str]) -> tuple[RootArgs, GateArgs] | None:
    """A plain `scoctl [global options] gate [options]` line, or None for typer to parse."""
    found = _parse_root(argv)
    if found is None:
        return None
    root, at = found
    args = _parse_gate(argv[at + 1:])
    return None if args is None else (root, args)


def run_fast(root: RootArgs, args: GateArgs) -> int:
    """What the root callback and the gate command do, for a line `parse_fast` accepted."""
    g = start(config=root.config, state=root.state, json=root.json, verbose=root.verbose,
              quiet=root.quiet)
    return run(g, args)


def request_size(args: GateArgs) -> tuple[int | float, int]:
    """``--cpus`` and ``--mem`` as the gate compares them (CPUs, whole MiB), each read in its
    backend's own notation: Slurm's sbatch units (whole CPUs; ``16G`` = 16384 MB, a plain
    number is MB) or Kubernetes quantities, as a pod's requests are written (``500m`` or
    ``0.5`` CPU; ``16Gi`` = 16384 MiB, ``16G`` = 16 * 10**9 bytes, a plain number is bytes;
    counted in whole MiB as the nodes' allocatable is, rounded down so that a request exactly
    a node's size never reads as larger). UsageError (exit 2) names the option."""
    from scoctl.core.quantity import (
        QuantityError,
        cores,
        parse_cpu,
        parse_memory,
        parse_slurm_mem_mb,
    )
    from scoctl.errors import UsageError

    if args.backend == "k8s":
        try:
            millicores = parse_cpu(args.cpus)
        except QuantityError as exc:
            raise UsageError(f"--cpus: {exc} (a Kubernetes cpu quantity: 2, 0.5, 500m)"
                             ) from exc
        if millicores <= 0:
            raise UsageError(f"--cpus: {args.cpus!r} asks for no CPU (give more than 0)")
        try:
            memory = parse_memory(args.mem)
        except QuantityError as exc:
            raise UsageError(f"--mem: {exc} (a Kubernetes memory quantity: 16Gi, 512Mi, "
                             "16G)") from exc
        return cores(millicores), memory // 2**20
    text = args.cpus.strip()
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise UsageError(f"--cpus: {args.cpus!r} is not a whole number of CPUs of at least 1 "
                         "(Slurm counts whole CPUs)")
    try:
        return int(text), parse_slurm_mem_mb(args.mem)
    except QuantityError as exc:
        raise UsageError(f"--mem: {exc}") from exc


def run(g: Globals, args: GateArgs) -> int:
    """Judge the request, record it with ``--workload``, print the verdict; the exit code."""
    from scoctl.core.model import is_slug
    from scoctl.errors import EXIT_OK, EXIT_OVER_CAPACITY, UsageError

    if args.json:
        g.json = True
    cpus, memory_mb = request_size(args)
    workload = args.workload
    if workload is not None and not is_slug(workload):
        raise UsageError(f"--workload: {workload!r} is not a slug ([a-z0-9][a-z0-9.-]{{0,46}})")
    config = g.config()
    scheduler: BatchScheduler | None = None
    started: SlurmCli | None = None  # its sinfo answers while the decisions are imported
    if args.backend == "slurm":
        from scoctl.adapters.factory import scheduler_for
        from scoctl.adapters.slurm import SlurmCli

        scheduler = scheduler_for(config, timeout=config.gate.timeout)
        if isinstance(scheduler, SlurmCli):
            started = scheduler
            started.start_nodes()
    from scoctl.cli import render
    from scoctl.core.gate import OVER_CAPACITY, SKIPPED, GateRequest
    from scoctl.stages.gate import run_gate

    try:
        request = GateRequest(cpus=cpus, memory_mb=memory_mb, gpus=args.gpus,
                              gpu_type=args.gpu_type,
                              gpu_resource=args.gpu_resource or config.kubernetes.gpu_resource)
        outcome = run_gate(config, request, backend="k8s" if args.backend == "k8s" else "slurm",
                           partition=args.partition,
                           elastic=config.elastic and not args.no_elastic, workload=workload,
                           kind=args.kind, job_id=args.job_id,
                           state_path=g.state_path() if workload else None, scheduler=scheduler)
    finally:
        if started is not None:
            started.drop_started()  # unread when the partition could not be read first
    verdict = outcome.verdict
    if verdict.verdict == SKIPPED:
        render.warn(f"gate skipped: {verdict.reason}")
    if workload and outcome.workload is None:
        render.warn(f"workload {workload} not recorded: the state is not writable"
                    + (f"; CAPACITY_EXCEEDED spooled ({outcome.spooled})"
                       if outcome.spooled else ""))
    if g.json:
        render.print_json(outcome.as_dict())
    else:
        where = f" (partition {outcome.partition})" if outcome.partition else ""
        target = ""
        if verdict.pool:
            target = f" via pool {verdict.pool}"
        elif verdict.node:
            target = f" on {verdict.node.name}"
        render.line(f"{verdict.verdict}{target}{where}: {verdict.reason}")
        if outcome.workload:
            render.line(f"workload {outcome.workload.slug}: "
                        f"{render.styled(outcome.workload.status)}")
    return EXIT_OVER_CAPACITY if verdict.verdict == OVER_CAPACITY else EXIT_OK
