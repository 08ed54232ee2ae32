"""The transport under `KubernetesCluster`: the official client's configuration and connection
pool, one error mapping, paged raw-JSON lists and list-then-watch loops.

Configuration: an explicit kubeconfig path and context, else ``$KUBECONFIG``, else
``~/.kube/config`` when it exists, else the in-cluster service account.

Errors are mapped once, here: `ApiException` 429/5xx/409/410 and urllib3/socket failures become
`TemporaryError`; other refusals (400/401/403/404/422) and unreadable objects `PermanentError`.
A connect or read timeout (no answer within `timeouts.api`) is `Unanswered`, and trips the
client's `Guard` (`adapters.guard`): its other calls fail at once until the API answers again —
a list, or the informer's watch, is the probe —, so a stalled API server costs a pass one
timeout, not one per call.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any, NoReturn, Self, TypeVar

from scoctl.adapters.guard import Guard
from scoctl.core.quantity import QuantityError
from scoctl.errors import ConfigError, PermanentError, TemporaryError, Unanswered

log = logging.getLogger(__name__)

Raw = Mapping[str, Any]

_TEMPORARY_STATUS = frozenset({0, 409, 410, 429, 500, 502, 503, 504})
T = TypeVar("T")
E = TypeVar("E")


def api_errors() -> tuple[type[BaseException], ...]:
    """What a client call can raise for a reason outside scoctl (mapped by `_raise`)."""
    import urllib3
    from kubernetes.client.exceptions import ApiException

    return (ApiException, urllib3.exceptions.HTTPError, OSError, ValueError)


def _retries_without_timeouts() -> Any:
    """urllib3's default retries (3) minus timeouts: a request on a pooled connection the
    server had dropped is still retried at once, but a timed-out connect or read is final —
    urllib3 would wait the timeout four times per call; scoctl's own loops decide."""
    import urllib3
    from urllib3.exceptions import TimeoutError as TimeoutFailure

    class NoTimeoutRetry(urllib3.Retry):
        def increment(self, method: str | None = None, url: str | None = None,
                      response: Any = None, error: Exception | None = None, _pool: Any = None,
                      _stacktrace: Any = None) -> Any:
            if isinstance(error, TimeoutFailure):
                raise error
            return super().increment(method, url, response, error, _pool, _stacktrace)

    return NoTimeoutRetry(3)


def _status_message(exc: Any) -> str:
    """The Status message of an ApiException body, else its reason."""
    body = getattr(exc, "body", None)
    if body:
        try:
            data = json.loads(body)
            if isinstance(data, Mapping) and data.get("message"):
                return str(data["message"])
        except (ValueError, TypeError):
            pass
    return str(getattr(exc, "reason", "") or "")


def _retry_after(exc: Any) -> float | None:
    headers = getattr(exc, "headers", None) or {}
    value = headers.get("Retry-After") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


class KubeClient:
    """The official client's API objects over one connection pool, with scoctl's error mapping
    (`_raise`), calls (`_call`, `_unless_gone`), paged raw lists (`_list_raw`) and watches
    (`_watch`)."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None, *,
                 page_size: int = 2000, connect_timeout: float = 5.0,
                 read_timeout: float = 60.0) -> None:
        try:
            import yaml
            from kubernetes import client, config
            from kubernetes.config.config_exception import ConfigException
        except ImportError as exc:  # pragma: no cover - a dependency of scoctl
            raise ConfigError("the 'kubernetes' package is not installed") from exc
        cfg_loader: Any = config
        self.page_size = page_size
        self._timeout = (connect_timeout, read_timeout)
        cfg: Any = client.Configuration()
        path = kubeconfig or os.environ.get("KUBECONFIG") or ""
        if not path and os.path.exists(os.path.expanduser("~/.kube/config")):
            path = "~/.kube/config"
        try:
            if path:
                cfg_loader.load_kube_config(config_file=os.path.expanduser(path),
                                            context=context, client_configuration=cfg,
                                            persist_config=False)
            else:
                cfg_loader.load_incluster_config(client_configuration=cfg)
        except (ConfigException, yaml.YAMLError, OSError, ValueError, TypeError,
                KeyError) as exc:
            where = path or "in-cluster service account"
            raise ConfigError(f"cannot load the Kubernetes configuration: {exc}",
                              file=os.path.expanduser(path) if path else None,
                              field="kubernetes.kubeconfig" if path else where) from exc
        self.host = str(cfg.host)
        self.guard = Guard("Kubernetes API")
        cfg.retries = _retries_without_timeouts()
        self._api: Any = client.ApiClient(cfg)
        self._core: Any = client.CoreV1Api(self._api)
        self._apps: Any = client.AppsV1Api(self._api)
        self._batch: Any = client.BatchV1Api(self._api)
        self._custom: Any = client.CustomObjectsApi(self._api)

    def close(self) -> None:
        """Release the connection pool."""
        self._api.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- error mapping

    def _raise(self, exc: BaseException, doing: str) -> NoReturn:
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import MaxRetryError
        from urllib3.exceptions import TimeoutError as TimeoutFailure

        reason = exc.reason if isinstance(exc, MaxRetryError) else exc
        if isinstance(reason, TimeoutFailure | TimeoutError):
            unanswered = Unanswered(f"Kubernetes API {doing}: no answer in time: {reason}")
            self.guard.trip(unanswered)
            raise unanswered from exc
        if isinstance(exc, ApiException):
            status = int(exc.status or 0)
            message = _status_message(exc)
            text = f"Kubernetes API {doing}: {status} {message}".rstrip()
            if status in _TEMPORARY_STATUS:
                raise TemporaryError(text, delay=_retry_after(exc)) from exc
            raise PermanentError(text) from exc
        if isinstance(exc, ValueError):  # pydantic ValidationError: an unreadable object
            raise PermanentError(f"Kubernetes API {doing}: unreadable answer: {exc}") from exc
        raise TemporaryError(f"Kubernetes API {doing}: {type(exc).__name__}: {exc}") from exc

    def _call(self, doing: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        kwargs.setdefault("_request_timeout", self._timeout)
        self.guard.check()
        try:
            out = fn(*args, **kwargs)
        except api_errors() as exc:
            self._answered(exc)
            self._raise(exc, doing)
        self.guard.answered()
        return out

    def _answered(self, exc: BaseException) -> None:
        """The API itself refused (an HTTP status): it is not stalled."""
        from kubernetes.client.exceptions import ApiException

        if isinstance(exc, ApiException) and exc.status:
            self.guard.answered()

    def _or_gone(self, doing: str, call: Callable[[], T]) -> T | None:
        """`call()`, with None for a 404 (the object is gone, or its CRD not installed) and
        every other failure mapped as `_call` maps it."""
        from kubernetes.client.exceptions import ApiException

        self.guard.check()
        try:
            out = call()
        except ApiException as exc:
            self._answered(exc)
            if exc.status == 404:
                return None
            self._raise(exc, doing)
        except api_errors() as exc:
            self._raise(exc, doing)
        self.guard.answered()
        return out

    def _unless_gone(self, doing: str, fn: Callable[..., Any], *args: Any,
                     **kwargs: Any) -> bool:
        """`_call`, where 404 (the object is gone already) is False and any answer True."""
        kwargs.setdefault("_request_timeout", self._timeout)
        return self._or_gone(doing, lambda: fn(*args, **kwargs) or True) is not None

    def _read_unless_gone(self, doing: str, fn: Callable[..., Any], *args: Any,
                          **kwargs: Any) -> Raw | None:
        """One object (or one list) as raw JSON, within the API timeout and its connection given
        back; None when it is not there (404)."""
        return self._or_gone(doing, lambda: self._read_json(fn, *args, **kwargs))

    def _list_raw(self, doing: str, fn: Callable[..., Any], *args: Any,
                  **kwargs: Any) -> tuple[list[Raw], str]:
        """Every item of a (paged) list as raw dicts, and the list's resourceVersion.

        A continue token that expired mid-list (410) restarts the list, as the API asks.
        """
        from kubernetes.client.exceptions import ApiException

        for _ in range(3):
            items: list[Raw] = []
            cont: str | None = None
            while True:
                try:
                    page = self._read_json(fn, *args, limit=self.page_size, _continue=cont,
                                           **kwargs)
                except ApiException as exc:
                    self._answered(exc)
                    if exc.status == 410 and cont:
                        break
                    self._raise(exc, doing)
                except api_errors() as exc:
                    self._raise(exc, doing)
                self.guard.answered()  # a list is the probe: no check before it
                items.extend(page.get("items") or ())
                meta = page.get("metadata") or {}
                cont = meta.get("continue") or None
                if not cont:
                    return items, str(meta.get("resourceVersion") or "")
        raise TemporaryError(f"Kubernetes API {doing}: the list kept expiring (410)")

    def _read_json(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Raw:
        kwargs.setdefault("_request_timeout", self._timeout)
        resp = fn(*args, _preload_content=False, **kwargs)
        try:
            data = resp.data
        finally:
            resp.release_conn()
        out = json.loads(data)
        if not isinstance(out, Mapping):
            raise ValueError("the answer is not a JSON object")
        return out

    def _watch(self, what: str, fn: Callable[..., Any], args: tuple[Any, ...],
               relist: Callable[[], tuple[str, E]], event: Callable[[Any, str, Raw], E],
               resource_version: str | None, timeout: float, *,
               label_selector: str | None = None,
               field_selector: str | None = None) -> Iterator[E]:
        """List-then-watch one kind for about `timeout` seconds (see `Cluster.watch_pods`):
        `relist` gives the RESYNC event and its version, `event` one ADDED / MODIFIED /
        DELETED event of a raw object."""
        from kubernetes import watch as watch_module
        from kubernetes.client.exceptions import ApiException

        watch: Any = watch_module
        deadline = time.monotonic() + timeout
        rv = resource_version or ""
        selectors: dict[str, Any] = {}
        if label_selector:
            selectors["label_selector"] = label_selector
        if field_selector:
            selectors["field_selector"] = field_selector
        if not rv:
            rv, first = relist()
            yield first
        while True:
            left = deadline - time.monotonic()
            if left < 1:
                return
            stream = watch.Watch()
            try:
                for ev in stream.stream(fn, *args, resource_version=rv,
                                        timeout_seconds=max(1, int(left)),
                                        allow_watch_bookmarks=True,
                                        _request_timeout=(self._timeout[0], left + 10),
                                        **selectors):
                    self.guard.answered()
                    raw = ev.get("raw_object") or {}
                    kind = ev.get("type")
                    new_rv = str((raw.get("metadata") or {}).get("resourceVersion") or rv)
                    if kind not in ("ADDED", "MODIFIED", "DELETED"):
                        rv = new_rv  # BOOKMARK: only the version moves on
                        continue
                    try:
                        item = event(kind, new_rv, raw)
                    except (QuantityError, ValueError, TypeError) as exc:
                        log.warning("skipping unreadable %s in watch: %s", what[:-1], exc)
                        rv = new_rv
                        continue
                    rv = new_rv
                    yield item
            except ApiException as exc:
                if exc.status == 410:
                    rv, again = relist()
                    yield again
                    continue
                self._raise(exc, f"watch {what}")
            except api_errors() as exc:
                self._raise(exc, f"watch {what}")
            finally:
                stream.stop()
