"""`scoctl gate`: the pre-submission capacity gate.

Its options and ``--help``; the body is `cli.gate_fast.run`, which `scoctl.cli.app.main` also
calls without typer for a plain command line (the gate runs before every ``sbatch``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

from scoctl.cli.common import JsonOption


class Backend(StrEnum):
    slurm = "slurm"
    k8s = "k8s"


class Kind(StrEnum):
    job = "job"
    deployment = "deployment"
    inference = "inference"


def gate(
    ctx: typer.Context,
    backend: Annotated[Backend, typer.Option("--backend", help="Where the request runs.")],
    cpus: Annotated[str, typer.Option(
        "--cpus", help="CPUs: whole for slurm; a Kubernetes quantity for k8s (2, 0.5, 500m).")
                    ] = "1",
    mem: Annotated[str, typer.Option(
        "--mem", help="Memory. slurm: sbatch units, a number with K, M, G, T (binary: 1G = "
        "1024M), a plain number is MB. k8s: a Kubernetes quantity as in a pod's requests "
        "(16Gi, 512Mi; 16G = 16*10^9 bytes; a plain number is bytes).")] = "0",
    gpus: Annotated[int, typer.Option("--gpus", min=0, help="GPUs per node.")] = 0,
    gpu_type: Annotated[str | None, typer.Option(
        "--gpu-type", help="Slurm GRES type (a100); only GPUs of this type count.")] = None,
    gpu_resource: Annotated[str | None, typer.Option(
        "--gpu-resource", help="Kubernetes / flavor GPU resource name (default from config: "
        "kubernetes.gpu_resource).")] = None,
    partition: Annotated[str | None, typer.Option(
        "--partition", "-p", help="Slurm partition (default: slurm.gpu_partition for GPU "
        "requests, else the default partition).")] = None,
    workload: Annotated[str | None, typer.Option(
        "--workload", "-w", help="Record the verdict on this workload (row pending, or failed "
        "with a CAPACITY_EXCEEDED event).")] = None,
    kind: Annotated[Kind, typer.Option("--kind", help="The workload's kind.")] = Kind.job,
    job_id: Annotated[str | None, typer.Option("--job-id", help="Slurm job id to record.")
                      ] = None,
    no_elastic: Annotated[bool, typer.Option(
        "--no-elastic", help="Count only existing nodes, not configured pool flavors.")] = False,
    json_out: JsonOption = False,
) -> None:
    """Can any node, or (elastic) any configured pool flavor, ever hold this request?

    fits → exit 0 (row pending); over_capacity → exit 3 (row failed + CAPACITY_EXCEEDED);
    skipped (capacity unreadable: sinfo missing, failing, hanging or garbled; the Kubernetes API
    unreadable) → exit 0 with a warning: the gate never fails a request it cannot judge.

    \b
    Example:
      scoctl gate --backend slurm --cpus 32 --mem 256G --gpus 4 --gpu-type a100 \\
        --workload train-7 --json
      scoctl gate --backend k8s --cpus 500m --mem 16Gi --workload web
    """
    from scoctl.cli.common import globals_of
    from scoctl.cli.gate_fast import GateArgs, run

    code = run(globals_of(ctx, json=json_out), GateArgs(
        backend=backend.value, cpus=cpus, mem=mem, gpus=gpus, gpu_type=gpu_type,
        gpu_resource=gpu_resource, partition=partition, workload=workload, kind=kind.value,
        job_id=job_id, no_elastic=no_elastic, json=json_out))
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command("gate")(gate)
