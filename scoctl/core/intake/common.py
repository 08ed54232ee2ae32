"""What Kubernetes and Slurm intake share (pure): the workload rows and configured workloads
they read, the capacity they judge against, and the claims and status tokens they decide."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from scoctl.core.model import ClaimPart, Flavor, Pool
from scoctl.core.model.vocabulary import WorkloadStatus
from scoctl.core.quantity import Resources
from scoctl.core.tokens import INACTIVE_STATUSES

ObjectKind = Literal["Deployment", "InferenceService", "Job"]


# --- values ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class WorkloadState:
    """What the decisions need of a workload's newest row."""

    slug: str
    status: str
    kind: str = "deployment"
    source: str = "k8s"
    last_token: str | None = None
    last_queued_reason: str | None = None
    job_id: str | None = None
    namespace: str | None = None

    @property
    def settled(self) -> bool:
        """Running or inactive: the Kubernetes backstop no longer watches it."""
        return self.status == WorkloadStatus.RUNNING or self.status in INACTIVE_STATUSES


@dataclass(frozen=True)
class ObjectRef:
    """A Kubernetes object a teardown may delete; `managed` = labelled ``sco/managed=true``."""

    kind: ObjectKind
    namespace: str
    name: str
    managed: bool = False

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class TokenDecision:
    """Record `token` for `slug`; create the row first (kind, source, contract) if it has none.

    `teardown` lists the objects to delete when this token turns the workload inactive.
    """

    slug: str
    token: str
    detail: Mapping[str, Any]
    kind: str
    source: str
    contract: str
    namespace: str | None = None
    job_id: str | None = None
    teardown: tuple[ObjectRef, ...] = ()


@dataclass(frozen=True)
class ClaimDecision:
    """A workload's whole normalised demand, as `services.claims.record_claim` takes it."""

    workload: str
    contract: str
    kind: str
    source: str
    requests: Resources
    largest_pod: Resources
    pods: int
    tolerates_reclaimable: bool = True
    namespace: str | None = None
    nodes: tuple[str, ...] = ()
    created: tuple[float, ...] = ()  # when each pod / job of the demand was made (Unix s)
    # pools the pods' placement rules out, each with the constraint that does (design: Constraints)
    ineligible: Mapping[str, str] = field(default_factory=dict)
    zone_spread: int = 0  # maxSkew of the pods' DoNotSchedule zone spread, 0: none (Constraints)
    # per flavor, what the DaemonSet pods on a new unit of the claim request (Constraints)
    overhead: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    parts: tuple[ClaimPart, ...] = ()  # split by where its pods may run (Constraints)
    preferred: Mapping[str, int] = field(default_factory=dict)  # soft terms' weight per pool
    gang: int = 0  # members per gang (design: Gangs), 0: not a gang


@dataclass(frozen=True)
class IntakeDecision:
    """What one pass of one source decided: claims (zero claims for workloads whose demand
    ended), tokens in the order to record them, and warnings (skipped pods or jobs)."""

    claims: tuple[ClaimDecision, ...] = ()
    tokens: tuple[TokenDecision, ...] = ()
    warnings: tuple[str, ...] = ()
    workloads: int = 0


@dataclass(frozen=True)
class WorkloadRule:
    """A configured workload (the config's `workloads[]`), reduced to what intake matches on."""

    name: str
    contract: str
    source: str
    kind: str = "deployment"
    namespace: str | None = None
    account: str | None = None
    partition: str | None = None
    tolerates_reclaimable: bool = True
    # on its units' Nodes (Constraints)
    node_labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Capacity:
    """What "could ever hold it" is judged against beyond the nodes: the pools' flavors."""

    pools: tuple[Pool, ...] = ()
    flavors: tuple[Flavor, ...] = ()
    node_reserve: Resources = field(default_factory=dict)
    elastic: bool = True

    def pool_flavors(self) -> list[Flavor]:
        """Flavors some pool offers (a flavor no pool offers cannot be acquired)."""
        used = {p.flavor for p in self.pools}
        return [f for f in self.flavors if f.name in used]



# --- small pure helpers ----------------------------------------------------------------------


def _contract(value: str | None, policy_contracts: frozenset[str], fallback: str) -> str:
    return value if value and value in policy_contracts else fallback


def _rule_for(rules: Iterable[WorkloadRule], name: str,
              namespace: str | None) -> WorkloadRule | None:
    for rule in rules:
        if rule.name == name and (rule.namespace is None or namespace is None
                                  or rule.namespace == namespace):
            return rule
    return None
