"""The node agent's kubelets, taint-eviction controller and Event recorders (decisions in
`k8s_nodes`), written through the Kubernetes emulator's control API in batches: Leases renewed
every leaseDuration/4 (the node-monitor grace period / 4, a bounded batch a step), the Node
status heartbeat every ``nodeStatusReportFrequency`` (7.5 × the grace: 5 min upstream), Events
within `EVENTS_PER_STEP` a step."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from scoctl.sim import k8s_nodes as nodes_
from scoctl.sim.agent_workloads import Api

log = logging.getLogger("scoctl.sim.agent")

Obj = dict[str, Any]
EVENTS_PER_STEP = 100
SCHEDULER = "default-scheduler"
NODE_CONTROLLER = "node-controller"
TAINT_MANAGER = "taint-eviction-controller"


class Kubelets:
    """Heartbeats, Leases, taint evictions and Events across agent steps."""

    def __init__(self, api: Api, grace: float) -> None:
        self.api = api
        self.renew_every = grace / 4  # leaseDuration 40 s / 4 upstream
        self.report_every = grace * 7.5  # nodeStatusReportFrequency 5 min upstream
        self.lease_duration = max(1, round(grace))
        self.renewed: dict[str, float] = {}
        self.reported: dict[str, float] = {}
        self.tolerating: dict[tuple[str, str], datetime] = {}
        self.events = nodes_.EventBudget(EVENTS_PER_STEP)

    def beat(self, alive: Sequence[Mapping[str, Any]], now: float, stamp: str) -> None:
        """Renew the due Leases (creating missing ones) and post the due heartbeats."""
        self.events.reset()
        by_name = {str(n["metadata"]["name"]): n for n in alive}
        self.renewed = {k: v for k, v in self.renewed.items() if k in by_name}
        self.reported = {k: v for k, v in self.reported.items() if k in by_name}
        moment = datetime.now(UTC)
        ops: list[Obj] = []
        for name in nodes_.renew_due(self.renewed, by_name, now, self.renew_every):
            lease = nodes_.node_lease(by_name[name], moment, self.lease_duration)
            ops.append({"op": "apply", "objects": [lease]})
            self.renewed[name] = now
        for name in nodes_.renew_due(self.reported, by_name, now, self.report_every):
            ops.append({"op": "patch", "kind": "Node", "name": name,
                        "patch": {"status": nodes_.heartbeat_status(by_name[name], stamp)}})
            self.reported[name] = now
        for outcome in self.api.batch(ops):
            if not outcome["ok"]:
                log.info("heartbeat not written: %s %s", outcome["code"],
                         str(outcome["message"])[:200])

    def record(self, events: Sequence[Obj]) -> None:
        """Create Events within the step's budget."""
        granted = self.events.take(events)
        if granted:
            self.api.batch([{"op": "add", "objects": [e]} for e in granted])

    def node_not_ready(self, node: Mapping[str, Any], stamp: str) -> None:
        """`RecordNodeStatusChange(recorder, node, "NodeNotReady")`."""
        name = node["metadata"]["name"]
        self.record([nodes_.event(node, "NodeNotReady",
                                  f"Node {name} status is now: NodeNotReady", stamp,
                                  component=NODE_CONTROLLER)])

    def evict_tainted(self, pods: Sequence[Mapping[str, Any]],
                      nodes: Sequence[Mapping[str, Any]], stamp: str) -> bool:
        """The taint-eviction controller; returns whether it deleted pods."""
        self.tolerating, doomed = nodes_.noexecute_evictions(pods, nodes, datetime.now(UTC),
                                                             self.tolerating)
        if not doomed:
            return False
        by_key = {(p["metadata"].get("namespace"), p["metadata"]["name"]): p for p in pods}
        ops: list[Obj] = []
        events: list[Obj] = []
        for e in doomed:
            pod = by_key[(e.namespace, e.name)]
            ops += [{"op": "patch", "kind": "Pod", "namespace": e.namespace, "name": e.name,
                     "patch": {"status": nodes_.taint_eviction_status(pod, stamp)}},
                    {"op": "delete-pod", "namespace": e.namespace, "name": e.name}]
            events.append(nodes_.event(pod, "TaintManagerEviction",
                                       f"Marking for deletion Pod {e.namespace}/{e.name}",
                                       stamp, component=TAINT_MANAGER))
        self.api.batch(ops)
        self.record(events)
        log.info("taint eviction: %d pods on nodes with a NoExecute taint they do not "
                 "tolerate deleted", len(doomed))
        return True

    def scheduler_events(self, bound: Sequence[tuple[Mapping[str, Any], str]],
                         failed: Sequence[tuple[Mapping[str, Any], str]], stamp: str) -> None:
        """The scheduler's ``Scheduled`` (``Successfully assigned <ns>/<pod> to <node>``) and
        ``FailedScheduling`` (Warning, the FitError text) Events
        (pkg/scheduler/schedule_one.go `handleBindingCycleError`, `FailureHandler`)."""
        events = [nodes_.event(pod, "FailedScheduling", message, stamp, component=SCHEDULER,
                               type_="Warning") for pod, message in failed]
        events += [nodes_.event(pod, "Scheduled", f"Successfully assigned "
                                f"{pod['metadata'].get('namespace')}/{pod['metadata']['name']}"
                                f" to {node}", stamp, component=SCHEDULER)
                   for pod, node in bound]
        before = self.events.dropped
        self.record(events)
        if self.events.dropped > before:
            log.info("events: %d dropped by the rate limit this step",
                     self.events.dropped - before)
