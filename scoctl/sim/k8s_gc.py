"""The simulated garbage collector: what a delete does to the objects the deleted one owns.

Follows kubernetes/kubernetes pkg/controller/garbagecollector/garbage_collector.go and the
registry's deletion (staging/src/k8s.io/apiserver/pkg/registry/generic/registry/store.go
`Delete`, `updateForGracefulDeletionAndFinalizers`, `deletionFinalizersForGarbageCollection`):

* ``Background`` (the default but for Jobs and the Orphan-defaulted kinds): the owner goes at
  once; the collector then deletes its dependents (`attemptToDeleteItem`: an object without a
  solid owner left is deleted), each with its own default policy — a pod gracefully, so it is
  Terminating (``deletionTimestamp`` + ``deletionGracePeriodSeconds``) until the kubelet
  confirms it, never removed at once;
* ``Foreground``: the owner stays, with ``deletionTimestamp`` and the ``foregroundDeletion``
  finalizer, while its dependents are deleted (`processDeletingDependentsItem`: a dependent
  that has dependents of its own is deleted in the foreground too); once no dependent with
  ``blockOwnerDeletion`` is left the collector removes the finalizer and the owner goes;
* ``Orphan``: the dependents stay, their ownerReferences to the owner removed
  (`orphanDependents`).

The functions work on a `K8sEmulator`'s store; call them with its lock (``_cond``) held.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from scoctl.sim.k8s_emulator import K8sEmulator, ResourceType

Obj = dict[str, Any]
FOREGROUND = "foregroundDeletion"  # metav1.FinalizerDeleteDependents
ORPHAN = "orphan"  # metav1.FinalizerOrphanDependents
Key = tuple["ResourceType", str, str]


def _dependents(emu: K8sEmulator, uid: str) -> list[tuple[Key, Obj]]:
    """Every stored object with an ownerReference to `uid` (the collector's graph: a pod is
    never an owner here, so pods are not looked at as owners)."""
    out: list[tuple[Key, Obj]] = []
    for rt, state in emu._types.items():
        for (ns, name), obj in state.objects.items():
            refs = obj["metadata"].get("ownerReferences")
            if refs and any(r.get("uid") == uid for r in refs):
                out.append(((rt, ns, name), obj))
    return out


def _delete_dependent(emu: K8sEmulator, key: Key, policy: str) -> None:
    rt, ns, name = key
    if (ns, name) not in emu._types[rt].objects:
        return
    if rt.kind == "Pod":
        emu._delete_pod(ns, name, None)  # graceful: the pod's own grace period
    else:
        emu._delete(rt, ns, name, policy)


def collect(emu: K8sEmulator, uid: str, policy: str) -> None:
    """After the owner `uid` went (Background) or while it waits (Foreground): delete its
    dependents; with Orphan, drop their references to it."""
    for key, dep in _dependents(emu, uid):
        refs = dep["metadata"].get("ownerReferences") or []
        if policy == "Orphan":
            body = emu_clone(dep)
            kept = [r for r in refs if r.get("uid") != uid]
            if kept:
                body["metadata"]["ownerReferences"] = kept
            else:
                body["metadata"].pop("ownerReferences", None)
            body["metadata"].pop("resourceVersion", None)
            emu._replace(key[0], key[1], key[2], body)
            continue
        solid = [r for r in refs if r.get("uid") != uid and _exists(emu, key[1], r)]
        if solid:  # another owner still holds it (`attemptToDeleteItem`: solid owners)
            continue
        has_own = key[0].kind != "Pod" and bool(_dependents(emu, str(
            dep["metadata"].get("uid"))))
        _delete_dependent(emu, key, "Foreground" if policy == "Foreground" and has_own
                          else "Background")


def _exists(emu: K8sEmulator, ns: str, ref: Any) -> bool:
    for state in emu._types.values():
        for (ons, _), obj in state.objects.items():
            if obj["metadata"].get("uid") == ref.get("uid") and ons in (ns, ""):
                return not obj["metadata"].get("deletionTimestamp")
    return False


def emu_clone(obj: Obj) -> Obj:
    from scoctl.sim.k8s_emulator import _clone

    out: Obj = _clone(obj)
    return out


def start_foreground(emu: K8sEmulator, rt: ResourceType, ns: str, name: str) -> Obj:
    """`updateForGracefulDeletionAndFinalizers` with Foreground: the owner gets
    ``deletionTimestamp`` and the ``foregroundDeletion`` finalizer and stays (MODIFIED); its
    dependents are deleted; `finish_foreground` removes it once they are gone."""
    current = emu._types[rt].objects[(ns, name)]
    body = emu_clone(current)
    meta = body["metadata"]
    finalizers = list(meta.get("finalizers") or [])
    if FOREGROUND not in finalizers:
        finalizers.append(FOREGROUND)
    meta["finalizers"] = finalizers
    meta.setdefault("deletionTimestamp",
                    datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    meta["deletionGracePeriodSeconds"] = 0
    meta.pop("resourceVersion", None)
    stored = emu._replace(rt, ns, name, body, terminating=True)
    emu._foreground.add((rt, ns, name))
    collect(emu, str(meta.get("uid")), "Foreground")
    emu._cond.notify_all()
    return stored


def finish_foreground(emu: K8sEmulator) -> None:
    """`processDeletingDependentsItem`: an owner waiting in the foreground goes once no
    dependent with ``blockOwnerDeletion`` is left (its finalizer removed, then it is deleted);
    dependents still there but not yet being deleted are deleted now."""
    for key in sorted(emu._foreground, key=lambda k: (k[0].kind, k[1], k[2])):
        rt, ns, name = key
        obj = emu._types[rt].objects.get((ns, name))
        if obj is None or FOREGROUND not in (obj["metadata"].get("finalizers") or []):
            emu._foreground.discard(key)
            continue
        uid = str(obj["metadata"].get("uid"))
        blocking = [(k, d) for k, d in _dependents(emu, uid)
                    if any(r.get("uid") == uid and r.get("blockOwnerDeletion")
                           for r in d["metadata"].get("ownerReferences") or [])]
        if blocking:
            for dep_key, dep in blocking:
                if not dep["metadata"].get("deletionTimestamp"):
                    _delete_dependent(emu, dep_key, "Foreground")
            continue
        emu._foreground.discard(key)
        rest = [f for f in obj["metadata"].get("finalizers") or [] if f != FOREGROUND]
        if rest:  # another finalizer still holds it: only ours is removed
            body = emu_clone(obj)
            body["metadata"]["finalizers"] = rest
            body["metadata"].pop("resourceVersion", None)
            emu._replace(rt, ns, name, body, terminating=True)
            continue
        emu._delete(rt, ns, name, "Background", finalize=True)
