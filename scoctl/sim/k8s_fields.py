"""Field validation of request bodies in the simulated Kubernetes API, as the apiserver decodes
them:

* ``fieldValidation`` (handlers/rest.go `fieldValidation`, KEP-2885): ``Strict`` rejects a body
  with a field its type does not declare (400 BadRequest, ``<Kind> in version "<v>" cannot be
  handled as a <Kind>: strict decoding error: unknown field "spec.foo"``), ``Warn`` (the
  default) answers each as a ``Warning: 299`` header, ``Ignore`` drops them silently; a value
  other than those three is 400. The declared fields are those of the Go types
  (k8s.io/api core/v1, apps/v1, batch/v1, policy/v1, rbac/v1) for the parts listed in
  `SCHEMAS`: the top level and metadata of every built-in kind, and in depth the pod template
  (PodSpec, Container, ResourceRequirements) of Pods, Deployments, ReplicaSets, DaemonSets and
  Jobs; a part not described is not checked. Custom resources are not checked here.
* quantities (apimachinery api/resource/quantity.go `ParseQuantity`): a resource quantity that
  does not parse fails decoding: 400 ``quantities must match the regular expression
  '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Protocol

Obj = dict[str, Any]
Schema = Mapping[str, Any]  # field → None (not checked), a Schema, or [Schema] (a list of them)

VALIDATION_MODES = ("Strict", "Warn", "Ignore")
QUANTITY_PATTERN = r"^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
# quantity.go `parseQuantityString`: a number, then a binary/decimal suffix or an exponent
_QUANTITY = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E|"
                       r"[eE][+-]?\d+)?$")


class Typed(Protocol):
    @property
    def kind(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def custom(self) -> bool: ...


def _fields(*names: str, **nested: Any) -> Schema:
    return {**dict.fromkeys(names), **nested}


OBJECT_META = _fields(
    "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
    "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels",
    "annotations", "ownerReferences", "finalizers", "managedFields")
RESOURCES = _fields("limits", "requests", "claims")
CONTAINER = _fields(
    "name", "image", "command", "args", "workingDir", "ports", "envFrom", "env",
    "resizePolicy", "restartPolicy", "restartPolicyRules", "volumeMounts", "volumeDevices",
    "livenessProbe", "readinessProbe", "startupProbe", "lifecycle", "terminationMessagePath",
    "terminationMessagePolicy", "imagePullPolicy", "securityContext", "stdin", "stdinOnce",
    "tty", resources=RESOURCES)
POD_SPEC = _fields(
    "volumes", "restartPolicy", "terminationGracePeriodSeconds", "activeDeadlineSeconds",
    "dnsPolicy", "nodeSelector", "serviceAccountName", "serviceAccount",
    "automountServiceAccountToken", "nodeName", "hostNetwork", "hostPID", "hostIPC",
    "shareProcessNamespace", "securityContext", "imagePullSecrets", "hostname", "subdomain",
    "affinity", "schedulerName", "tolerations", "hostAliases", "priorityClassName", "priority",
    "dnsConfig", "readinessGates", "runtimeClassName", "enableServiceLinks",
    "preemptionPolicy", "overhead", "topologySpreadConstraints", "setHostnameAsFQDN", "os",
    "hostUsers", "schedulingGates", "resourceClaims", "ephemeralContainers", "hostnameOverride",
    containers=[CONTAINER], initContainers=[CONTAINER], resources=RESOURCES)
TEMPLATE = _fields(metadata=OBJECT_META, spec=POD_SPEC)


def _top(*names: str, spec: Schema | None = None) -> Schema:
    return _fields("apiVersion", "kind", "status", *names, metadata=OBJECT_META, spec=spec)


SCHEMAS: Mapping[str, Schema] = {
    "Pod": _top(spec=POD_SPEC),
    "Namespace": _top(spec=_fields("finalizers")),
    "Node": _top(spec=_fields("podCIDR", "podCIDRs", "providerID", "unschedulable", "taints",
                              "configSource", "externalID")),
    "Deployment": _top(spec=_fields("replicas", "selector", "strategy", "minReadySeconds",
                                    "revisionHistoryLimit", "paused",
                                    "progressDeadlineSeconds", template=TEMPLATE)),
    "ReplicaSet": _top(spec=_fields("replicas", "minReadySeconds", "selector",
                                    template=TEMPLATE)),
    "DaemonSet": _top(spec=_fields("selector", "updateStrategy", "minReadySeconds",
                                   "revisionHistoryLimit", template=TEMPLATE)),
    "Job": _top(spec=_fields("parallelism", "completions", "activeDeadlineSeconds",
                             "podFailurePolicy", "successPolicy", "backoffLimit",
                             "backoffLimitPerIndex", "maxFailedIndexes", "selector",
                             "manualSelector", "ttlSecondsAfterFinished", "completionMode",
                             "suspend", "podReplacementPolicy", "managedBy",
                             template=TEMPLATE)),
    "PodDisruptionBudget": _top(spec=_fields("minAvailable", "selector", "maxUnavailable",
                                             "unhealthyPodEvictionPolicy")),
    "ResourceQuota": _top(spec=_fields("hard", "scopes", "scopeSelector")),
    "PersistentVolumeClaim": _top(),
    "PersistentVolume": _top(),
    "Secret": _fields("apiVersion", "kind", "immutable", "data", "stringData", "type",
                      metadata=OBJECT_META),
    "ServiceAccount": _fields("apiVersion", "kind", "secrets", "imagePullSecrets",
                              "automountServiceAccountToken", metadata=OBJECT_META),
    "ClusterRole": _fields("apiVersion", "kind", "rules", "aggregationRule",
                           metadata=OBJECT_META),
    "Role": _fields("apiVersion", "kind", "rules", metadata=OBJECT_META),
    "ClusterRoleBinding": _fields("apiVersion", "kind", "subjects", "roleRef",
                                  metadata=OBJECT_META),
    "RoleBinding": _fields("apiVersion", "kind", "subjects", "roleRef", metadata=OBJECT_META),
}
# PersistentVolume(Claim) specs are stored as given: their top level only
_QUANTITY_MAPS = ("requests", "limits")


def unknown_fields(schema: Schema, value: Any, where: str = "") -> list[str]:
    """The paths (``spec.containers[0].foo``) of the fields in `value` `schema` does not
    declare, in the order met."""
    out: list[str] = []
    if not isinstance(value, dict):
        return out
    for key, sub in value.items():
        path = f"{where}.{key}" if where else key
        if key.startswith("$"):  # a strategic merge patch directive ($patch, $setElementOrder/…)
            continue
        if key not in schema:
            out.append(path)
            continue
        declared = schema[key]
        if isinstance(declared, list) and isinstance(sub, list):
            for i, item in enumerate(sub):
                out += unknown_fields(declared[0], item, f"{path}[{i}]")
        elif isinstance(declared, Mapping):
            out += unknown_fields(declared, sub, path)
    return out


def prune(obj: Any, paths: list[str]) -> None:
    """Drop the fields at `paths` (as `unknown_fields` names them) from `obj`: the decoder
    keeps no field its type does not declare."""
    for path in paths:
        parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
        node = obj
        for part in parts[:-1]:
            node = node[int(part[1:-1])] if part.startswith("[") else node[part]
        node.pop(parts[-1], None)


def _pod_specs(kind: str, obj: Mapping[str, Any]) -> list[tuple[str, Any]]:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return []
    if kind == "Pod":
        return [("spec", spec)]
    template = spec.get("template")
    if isinstance(template, dict) and isinstance(template.get("spec"), dict):
        return [("spec.template.spec", template["spec"])]
    return []


def bad_quantities(kind: str, obj: Mapping[str, Any]) -> list[str]:
    """The container request and limit values that do not parse as quantities."""
    out: list[str] = []
    for where, spec in _pod_specs(kind, obj):
        for group in ("containers", "initContainers"):
            for container in spec.get(group) or []:
                resources = container.get("resources") if isinstance(container, dict) else None
                if not isinstance(resources, dict):
                    continue
                for part in _QUANTITY_MAPS:
                    for value in (resources.get(part) or {}).values():
                        if not isinstance(value, int | float) and not _QUANTITY.match(
                                str(value)):
                            out.append(f"{where}.{group}: {value}")
    return out


def check_fields(rt: Typed, obj: dict[str, Any], mode: str | None,
                 warnings: list[str]) -> str | None:
    """Decode-time checks of a create or update body (or a merge patch's partial object): the
    message of the 400 BadRequest for a quantity that does not parse or (``Strict``) an
    undeclared field, else None; under ``Warn`` (also when no mode is given: upstream's
    default) a warning appended per undeclared field; under ``Warn`` and ``Ignore`` the
    undeclared fields dropped from `obj`, as decoding drops them."""
    if mode not in (None, "", *VALIDATION_MODES):
        return (f'fieldValidation parameter unsupported: "{mode}" (must be one of: '
                + ", ".join(f'"{m}"' for m in VALIDATION_MODES) + ")")
    if rt.custom:
        return None
    handled = f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}'
    if bad_quantities(rt.kind, obj):
        return f"{handled}: quantities must match the regular expression '{QUANTITY_PATTERN}'"
    schema = SCHEMAS.get(rt.kind)
    if schema is None:
        return None
    unknown = unknown_fields(schema, obj)
    if unknown and mode == "Strict":
        listed = ", ".join(f'unknown field "{u}"' for u in unknown)
        return f"{handled}: strict decoding error: {listed}"
    if mode != "Ignore":
        warnings += [f'unknown field \\"{u}\\"' for u in unknown]
    prune(obj, unknown)
    return None
