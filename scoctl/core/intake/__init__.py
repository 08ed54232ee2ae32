"""Intake: the watch stage's decisions (pure), demand into claims and cluster state into status
tokens, one module per source.

* `k8s` — pods of managed workloads into claims; quota blocks, hopeless pods, availability and
  start-up into status tokens (`decide_k8s_intake`);
* `slurm` — pending jobs, and running jobs on CLOUD nodes, into claims; job states into status
  tokens (`decide_slurm_intake`);
* `batch` — the batch window that decides when claims are committed;
* `common` — what both sources share: workload rows and rules, capacity, the decisions.

Import from the submodule: the package re-exports nothing, so a caller needing one source's
rules never loads the other's.
"""
