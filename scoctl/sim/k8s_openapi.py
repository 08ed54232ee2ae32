"""The OpenAPI v3 documents of the simulated Kubernetes API (``/openapi/v3`` and
``/openapi/v3/<api|apis/group>/<version>``), as small as kubectl needs them.

kubectl's ``--validate=strict`` (the default) asks the server to validate (``fieldValidation=
Strict``) when the group-version's document shows a PATCH operation for the kind
(``x-kubernetes-group-version-kind``) with a ``fieldValidation`` query parameter
(k8s.io/kubectl/pkg/cmd/util `QueryParamVerifierV3`, `supportsQueryParamV3`); without any
document it refuses to apply ("failed to download openapi"). So each document has, per served
resource, its collection and item paths with their operations, the kind's extension and the
query parameters the emulator honours (``dryRun``, ``fieldManager``, ``fieldValidation``), and
a schema per kind with its top-level properties. The PATCH operations declare no request
body, so kubectl builds its strategic merge patches from its compiled-in types, as it does for
a kind the document does not describe (apply.go `gvkSupportsPatchOpenAPIV3`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any, Protocol

Obj = dict[str, Any]


class Served(Protocol):
    @property
    def group(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def plural(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def namespaced(self) -> bool: ...


def gv_path(group: str, version: str) -> str:
    """``api/v1`` or ``apis/<group>/<version>``: the key of a group-version in the root."""
    return f"apis/{group}/{version}" if group else f"api/{version}"


def _query(name: str, description: str) -> Obj:
    return {"name": name, "in": "query", "description": description,
            "schema": {"type": "string", "uniqueItems": True}}


WRITE_PARAMETERS = [
    _query("dryRun", "When present, indicates that modifications should not be persisted."),
    _query("fieldManager", "The name of the actor or entity making these changes."),
    _query("fieldValidation", "How to handle fields the type does not declare: Ignore, Warn "
                              "or Strict."),
]


def _schema_name(t: Served) -> str:
    group = t.group or "core"
    return f"io.k8s.api.{group}.{t.version}.{t.kind}"


def _operation(t: Served, action: str, write: bool) -> Obj:
    op: Obj = {"operationId": f"{action}{t.kind}",
               "x-kubernetes-action": action,
               "x-kubernetes-group-version-kind": {"group": t.group, "version": t.version,
                                                   "kind": t.kind},
               "responses": {"200": {"description": "OK", "content": {"application/json": {
                   "schema": {"$ref": f"#/components/schemas/{_schema_name(t)}"}}}}}}
    if write:
        op["parameters"] = list(WRITE_PARAMETERS)
    return op


def _paths(t: Served) -> dict[str, Obj]:
    prefix = f"/{gv_path(t.group, t.version)}"
    base = (f"{prefix}/namespaces/{{namespace}}/{t.plural}" if t.namespaced
            else f"{prefix}/{t.plural}")
    return {
        base: {"get": _operation(t, "list", False), "post": _operation(t, "post", True)},
        f"{base}/{{name}}": {"get": _operation(t, "get", False),
                             "put": _operation(t, "put", True),
                             "patch": _operation(t, "patch", True),
                             "delete": _operation(t, "delete", False)},
    }


def _schema(t: Served) -> Obj:
    return {"type": "object", "description": f"{t.kind} ({t.group or 'core'}/{t.version})",
            "properties": {"apiVersion": {"type": "string"}, "kind": {"type": "string"},
                           "metadata": {"type": "object"}, "spec": {"type": "object"},
                           "status": {"type": "object"}},
            "x-kubernetes-group-version-kind": [{"group": t.group, "version": t.version,
                                                 "kind": t.kind}]}


def document(group: str, version: str, served: Sequence[Served]) -> Obj | None:
    """The document of one group-version; None when nothing is served there."""
    types = [t for t in served if t.group == group and t.version == version]
    if not types:
        return None
    paths: dict[str, Obj] = {}
    for t in types:
        paths.update(_paths(t))
    return {"openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.32.0-scoctl-sim"},
            "paths": paths,
            "components": {"schemas": {_schema_name(t): _schema(t) for t in types}}}


def _digest(doc: Obj) -> str:
    return hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:32].upper()


def root(served: Sequence[Served]) -> Obj:
    """``/openapi/v3``: each group-version and the URL of its document (with its hash, as
    the apiserver's OpenAPI v3 handler writes it)."""
    paths: dict[str, Obj] = {}
    for t in served:
        key = gv_path(t.group, t.version)
        if key not in paths:
            doc = document(t.group, t.version, served)
            assert doc is not None
            paths[key] = {"serverRelativeURL": f"/openapi/v3/{key}?hash={_digest(doc)}"}
    return {"paths": paths}
