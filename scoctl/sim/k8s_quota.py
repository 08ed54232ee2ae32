"""ResourceQuota admission of the simulated kube-apiserver, pure.

Follows kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/resourcequota/
controller.go `checkRequest` with the pod evaluator (pkg/quota/v1/evaluator/core/pods.go
`PodUsageFunc`): a new pod is refused with 403 when, for some quota of its namespace, the usage
of a resource the quota limits plus the pod's request would exceed ``spec.hard``:
``pods "<name>" is forbidden: exceeded quota: <quota>, requested: <r>=<q>, used: <r>=<q>,
limited: <r>=<q>`` (only the exceeded resources, `prettyPrint`: sorted ``name=quantity``
joined by ``,``); a quota on ``requests.cpu`` / ``requests.memory`` (or limits) refuses a pod
that does not set it: ``failed quota: <quota>: must specify requests.cpu``. The usage is summed
over the namespace's pods not yet finished (Succeeded / Failed), what the quota controller
converges ``status.used`` to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from scoctl.sim import k8s_scheduler

_COMPUTE = ("cpu", "memory", "ephemeral-storage")


def _limits(pod: Mapping[str, Any]) -> dict[str, int]:
    total: dict[str, int] = {}
    for i, container in enumerate((pod.get("spec") or {}).get("containers") or []):
        limits = k8s_scheduler.resource_list((container.get("resources") or {}).get("limits"),
                                             f"spec.containers[{i}].resources.limits")
        for name, value in limits.items():
            total[name] = total.get(name, 0) + value
    return total


def pod_usage(pod: Mapping[str, Any]) -> dict[str, int]:
    """`PodUsageFunc`: what a pod counts against quota, keyed as quotas name resources
    (``pods``, ``count/pods``, ``requests.<r>`` and the bare ``cpu`` / ``memory``,
    ``limits.<r>``), cpu in millicores."""
    requests = k8s_scheduler.pod_requests(pod)
    usage: dict[str, int] = {"pods": 1, "count/pods": 1}
    for name, value in requests.items():
        usage[f"requests.{name}"] = value
        if name in _COMPUTE:
            usage[name] = value
    for name, value in _limits(pod).items():
        usage[f"limits.{name}"] = value
    return usage


def _missing(pod: Mapping[str, Any], hard: Mapping[str, Any]) -> list[str]:
    """`podComputeUsageHelper` / `enforcePodContainerConstraints`: compute resources the quota
    tracks that some container does not set."""
    out: list[str] = []
    for key in sorted(hard):
        kind, _, resource = key.partition(".")
        if kind not in ("requests", "limits") or resource not in ("cpu", "memory"):
            continue
        for container in (pod.get("spec") or {}).get("containers") or []:
            values = ((container.get("resources") or {}).get(kind) or {})
            if kind == "requests" and resource not in values and resource in (
                    (container.get("resources") or {}).get("limits") or {}):
                continue  # a limit alone defaults the request
            if resource not in values:
                out.append(key)
                break
    return out


def quantity_text(resource: str, amount: int) -> str:
    """A usage as resource.Quantity's String() writes it: cpu as cores or ``<n>m``, other
    amounts with the largest binary suffix that divides them."""
    if resource.endswith("cpu"):
        return str(amount // 1000) if amount % 1000 == 0 else f"{amount}m"
    if resource.endswith(("memory", "storage")) and amount:
        for suffix, size in (("Ei", 2**60), ("Pi", 2**50), ("Ti", 2**40), ("Gi", 2**30),
                             ("Mi", 2**20), ("Ki", 2**10)):
            if amount % size == 0:
                return f"{amount // size}{suffix}"
    return str(amount)


def _amount(key: str, value: Any) -> int:
    resource = key.rpartition(".")[2] if key.startswith(("requests.", "limits.")) else key
    return k8s_scheduler.amount("cpu" if resource == "cpu" else resource, value)


def admission_error(pod: Mapping[str, Any], quotas: Sequence[Mapping[str, Any]],
                    pods: Sequence[Mapping[str, Any]]) -> str | None:
    """The reason quota admission refuses `pod` (without the ``pods "<name>" is forbidden:``
    prefix), or None when every quota of its namespace admits it. `pods` are the namespace's
    stored pods; `quotas` its ResourceQuotas."""
    ns = (pod.get("metadata") or {}).get("namespace")
    mine = [q for q in quotas if (q.get("metadata") or {}).get("namespace") == ns]
    if not mine:
        return None
    try:
        request = pod_usage(pod)
    except ValueError:
        return None  # validation refuses the quantity, not quota
    used: dict[str, int] = {}
    for other in pods:
        if (other.get("metadata") or {}).get("namespace") != ns or (
                (other.get("status") or {}).get("phase") in ("Succeeded", "Failed")):
            continue
        try:
            for key, value in pod_usage(other).items():
                used[key] = used.get(key, 0) + value
        except ValueError:
            continue
    for quota in sorted(mine, key=lambda q: str((q.get("metadata") or {}).get("name"))):
        name = str((quota.get("metadata") or {}).get("name"))
        hard: Mapping[str, Any] = (quota.get("spec") or {}).get("hard") or {}
        missing = _missing(pod, hard)
        if missing:
            return f"failed quota: {name}: must specify {','.join(missing)}"
        exceeded = sorted(k for k in hard if request.get(k, 0) > 0
                          and used.get(k, 0) + request[k] > _amount(k, hard[k]))
        if exceeded:
            return (f"exceeded quota: {name}, requested: {_show(exceeded, request)}, used: "
                    f"{_show(exceeded, used)}, limited: "
                    f"{','.join(f'{k}={hard[k]}' for k in exceeded)}")
    return None


def _show(keys: Sequence[str], values: Mapping[str, int]) -> str:
    """`prettyPrint`: ``name=quantity`` for `keys`, joined by ``,``."""
    return ",".join(f"{k}={quantity_text(k, values.get(k, 0))}" for k in keys)
