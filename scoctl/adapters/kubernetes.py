"""`Cluster` over the official `kubernetes` client (imported lazily, at construction).

Configuration, connections, the error mapping, paged lists and watches are the transport's
(`scoctl.adapters.kube_client.KubeClient`); what scoctl reads is `kube_reads.ClusterReads`, what
it does `kube_actions.ClusterActions`, its bootstrap token Secrets `kube_tokens`, and the
conversion of API objects into plain values `kube_convert`.

Lists are read as raw JSON (``_preload_content=False``) in pages and converted straight into
scoctl's plain values. Deserialising into the client's pydantic models costs ~140 µs per pod
(measured with client 37.0.2), which for 40,000 pending pods alone would eat over half of the
10 s placement budget; the raw path is ~10 µs. Watches use the client's `Watch` with model
deserialisation (as the client intends; its raw mode mishandles 410 events) and convert each
event's ``raw_object``.
"""

from __future__ import annotations

from scoctl.adapters.kube_actions import ClusterActions
from scoctl.adapters.kube_events import KubeEvents
from scoctl.adapters.kube_tokens import BootstrapTokenSecrets


class KubernetesCluster(ClusterActions, BootstrapTokenSecrets, KubeEvents):
    """`Cluster` (reads and actions), `BootstrapTokens` and `EventRecorder` (scoctl's own
    Events, `kube_events`) over the official client. See the module docstring for config and
    errors."""
