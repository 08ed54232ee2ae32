"""Decoding the few protobuf request bodies kubectl sends the simulated Kubernetes API.

client-go's typed clients (kubectl ``create namespace``, ``auth can-i``, ``auth whoami``,
``drain``'s evictions) send ``Content-Type: application/vnd.kubernetes.protobuf`` and do not
retry in JSON on a 415. The apiserver's protobuf encoding (apimachinery
``runtime/serializer/protobuf/protobuf.go``) is the 4-byte magic ``k8s\\x00`` then a
``runtime.Unknown`` message: ``typeMeta`` (1: ``apiVersion`` 1, ``kind`` 2), ``raw`` (2: the
object's own message), ``contentEncoding`` (3), ``contentType`` (4).

Only the kinds in `SCHEMAS` are decoded (their field numbers from the types'
``generated.proto``), into the JSON form the rest of the emulator reads; any other kind is
`UnsupportedKind` (the emulator answers 415). Responses are always JSON, which every client-go
request accepts (``Accept: application/vnd.kubernetes.protobuf,application/json``).

As gogo-protobuf writes them, a non-pointer field is always on the wire (``""``, ``0``, an
empty message) and a pointer field only when set, so zero values are dropped except for the
fields marked `KEEP_ZERO` (``gracePeriodSeconds: 0`` means "now").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

MAGIC = b"k8s\x00"
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"


class UnsupportedKind(ValueError):
    """A protobuf body of a kind this decoder has no schema for, or malformed."""


@dataclass(frozen=True)
class Field:
    name: str
    kind: str  # "string" | "int" | "bool" | "bytes" | "message" | "map"
    schema: str = ""  # the message schema's name, for kind "message"
    repeated: bool = False
    keep_zero: bool = False


def _f(name: str, kind: str, schema: str = "", *, repeated: bool = False,
       keep_zero: bool = False) -> Field:
    return Field(name, kind, schema, repeated, keep_zero)


# field number → Field, per message (k8s.io/api/*/generated.proto,
# k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto)
SCHEMAS: Mapping[str, Mapping[int, Field]] = {
    "ObjectMeta": {1: _f("name", "string"), 2: _f("generateName", "string"),
                   3: _f("namespace", "string"), 5: _f("uid", "string"),
                   6: _f("resourceVersion", "string"),
                   11: _f("labels", "map"), 12: _f("annotations", "map"),
                   14: _f("finalizers", "string", repeated=True)},
    "Namespace": {1: _f("metadata", "message", "ObjectMeta"),
                  2: _f("spec", "message", "NamespaceSpec")},
    "NamespaceSpec": {1: _f("finalizers", "string", repeated=True)},
    "Preconditions": {1: _f("uid", "string"), 2: _f("resourceVersion", "string")},
    "DeleteOptions": {1: _f("gracePeriodSeconds", "int", keep_zero=True),
                      2: _f("preconditions", "message", "Preconditions"),
                      3: _f("orphanDependents", "bool", keep_zero=True),
                      4: _f("propagationPolicy", "string"),
                      5: _f("dryRun", "string", repeated=True)},
    "Eviction": {1: _f("metadata", "message", "ObjectMeta"),
                 2: _f("deleteOptions", "message", "DeleteOptions")},
    "ResourceAttributes": {1: _f("namespace", "string"), 2: _f("verb", "string"),
                           3: _f("group", "string"), 4: _f("version", "string"),
                           5: _f("resource", "string"), 6: _f("subresource", "string"),
                           7: _f("name", "string")},
    "NonResourceAttributes": {1: _f("path", "string"), 2: _f("verb", "string")},
    "SelfSubjectAccessReviewSpec": {
        1: _f("resourceAttributes", "message", "ResourceAttributes"),
        2: _f("nonResourceAttributes", "message", "NonResourceAttributes")},
    "SelfSubjectAccessReview": {1: _f("metadata", "message", "ObjectMeta"),
                                2: _f("spec", "message", "SelfSubjectAccessReviewSpec")},
    "SelfSubjectReview": {1: _f("metadata", "message", "ObjectMeta")},
    "TypeMeta": {1: _f("apiVersion", "string"), 2: _f("kind", "string")},
    "Unknown": {1: _f("typeMeta", "message", "TypeMeta"), 2: _f("raw", "bytes"),
                3: _f("contentEncoding", "string"), 4: _f("contentType", "string")},
    "MapEntry": {1: _f("key", "string", keep_zero=True), 2: _f("value", "string",
                                                               keep_zero=True)},
}
# the top-level kinds a body may carry
KINDS = frozenset({"Namespace", "DeleteOptions", "Eviction", "SelfSubjectAccessReview",
                   "SelfSubjectReview"})


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise UnsupportedKind("truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int, Any]]:
    """(field number, wire type, value: int or bytes) of each field on the wire."""
    out: list[tuple[int, int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            if pos + length > len(data):
                raise UnsupportedKind("truncated field")
            value, pos = data[pos:pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos:pos + 4], pos + 4
        else:
            raise UnsupportedKind(f"wire type {wire} not supported")
        out.append((number, wire, value))
    return out


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _value(spec: Field, wire: int, raw: Any) -> Any:
    if spec.kind == "int":
        return _signed(int(raw))
    if spec.kind == "bool":
        return bool(raw)
    if not isinstance(raw, bytes) or wire != 2:
        raise UnsupportedKind(f"{spec.name}: a length-delimited field expected")
    if spec.kind == "string":
        return raw.decode("utf-8")
    if spec.kind == "bytes":
        return raw
    return decode_message(spec.schema, raw)


def _is_zero(value: Any) -> bool:
    return value in ("", 0, False, None) or value == {} or value == []


def decode_message(schema: str, data: bytes) -> dict[str, Any]:
    """One message of `schema` as a JSON-like dict (unknown field numbers skipped)."""
    fields = SCHEMAS[schema]
    out: dict[str, Any] = {}
    for number, wire, raw in _fields(data):
        spec = fields.get(number)
        if spec is None:
            continue
        if spec.kind == "map":
            entry = decode_message("MapEntry", raw)
            out.setdefault(spec.name, {})[entry.get("key", "")] = entry.get("value", "")
            continue
        value = _value(spec, wire, raw)
        if spec.repeated:
            out.setdefault(spec.name, []).append(value)
        elif spec.keep_zero or not _is_zero(value):
            out[spec.name] = value
        else:
            out.pop(spec.name, None)
    return out


def decode(body: bytes) -> dict[str, Any]:
    """A protobuf request body (magic + ``runtime.Unknown``) as the object's JSON form, with
    ``apiVersion`` and ``kind``; raises UnsupportedKind for a kind outside `KINDS`."""
    if not body.startswith(MAGIC):
        raise UnsupportedKind("no k8s protobuf magic")
    envelope = decode_message("Unknown", body[len(MAGIC):])
    type_meta = envelope.get("typeMeta") or {}
    kind = str(type_meta.get("kind") or "")
    if kind not in KINDS:
        raise UnsupportedKind(f"kind {kind or '(none)'} not decoded from protobuf")
    if envelope.get("contentEncoding"):
        raise UnsupportedKind("an encoded protobuf body is not supported")
    obj = decode_message(kind, envelope.get("raw") or b"")
    return {"apiVersion": str(type_meta.get("apiVersion") or ""), "kind": kind, **obj}

