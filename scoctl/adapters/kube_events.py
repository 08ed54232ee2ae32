"""scoctl's own core/v1 Events (design: Visibility) over the official client's CoreV1Api: create
one,
read one back (a create that found it: scoctl restarted), patch a repeat of its series. The
Events are built by `scoctl.core.kube_events`; `services.kube_events` decides and rate-limits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from scoctl.adapters.kube_client import KubeClient, Raw, api_errors


@runtime_checkable
class EventRecorder(Protocol):
    """Writes core/v1 Events. Each raises TemporaryError / PermanentError as the cluster's
    calls do."""

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> bool:
        """Create the Event `body`; False when one of its name is there already (409)."""
        ...

    def read_event(self, namespace: str, name: str) -> Raw | None:
        """The Event `name` as raw JSON; None when there is none."""
        ...

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        """Patch the Event `name` (a strategic merge patch); False when it is gone (404)."""
        ...


class KubeEvents(KubeClient):
    """`EventRecorder` over the official client."""

    def create_event(self, namespace: str, body: Mapping[str, Any]) -> bool:
        """See `EventRecorder.create_event`."""
        from kubernetes.client.exceptions import ApiException

        name = (body.get("metadata") or {}).get("name", "")
        doing = f"create Event {namespace}/{name}"
        self.guard.check()
        try:
            resp = self._core.create_namespaced_event(namespace, dict(body),
                                                      _preload_content=False,
                                                      _request_timeout=self._timeout)
            resp.drain_conn()
            resp.release_conn()
        except ApiException as exc:
            self._answered(exc)
            if exc.status == 409:
                return False
            self._raise(exc, doing)
        except api_errors() as exc:
            self._raise(exc, doing)
        self.guard.answered()
        return True

    def read_event(self, namespace: str, name: str) -> Raw | None:
        """See `EventRecorder.read_event`."""
        return self._read_unless_gone(f"read Event {namespace}/{name}",
                                      self._core.read_namespaced_event, name, namespace)

    def patch_event(self, namespace: str, name: str, patch: Mapping[str, Any]) -> bool:
        """See `EventRecorder.patch_event`."""

        def send(**kwargs: Any) -> None:
            resp = self._core.patch_namespaced_event(name, namespace, dict(patch),
                                                     _preload_content=False, **kwargs)
            resp.drain_conn()  # the Event comes back: never leave it in the pooled socket
            resp.release_conn()

        return self._unless_gone(f"patch Event {namespace}/{name}", send)
