"""What the state remembers of Slurm power saving between passes (shared by the Slurm power
stage, which writes it, and reconcile, which reads it): the CLOUD nodes Slurm handed back
(suspended, or a resume that failed) whose servers are still to be deleted, and the shape of
every node Slurm asked to resume (so a claim can be recomputed when a node leaves it)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from scoctl.state import Store

SUSPENDED_KEY = "slurm:suspended"
SHAPES_KEY = "slurm:node_shapes"


def suspended_nodes(store: Store) -> frozenset[str]:
    """Nodes Slurm handed back whose servers reconcile is still to delete."""
    return frozenset(store.get_kv(SUSPENDED_KEY, []))


def set_suspended_nodes(store: Store, names: Collection[str]) -> None:
    """Replace the set of handed-back nodes (written only when it changes)."""
    if frozenset(names) != suspended_nodes(store):
        store.set_kv(SUSPENDED_KEY, sorted(names))


def node_shapes(store: Store) -> dict[str, dict[str, int]]:
    """The shape of each node Slurm asked to resume (cpu millicores, memory bytes, GPUs)."""
    return {name: dict(shape) for name, shape in store.get_kv(SHAPES_KEY, {}).items()}


def set_node_shapes(store: Store, shapes: Mapping[str, Mapping[str, int]]) -> None:
    """Remember node shapes."""
    store.set_kv(SHAPES_KEY, {name: dict(shape) for name, shape in shapes.items()})
