"""Authentication and RBAC authorization for the Kubernetes emulator, as kube-apiserver does them.

Pure functions over values (the emulator gathers the RBAC objects under its lock and asks):

* `request_attributes`: the verb, API group, resource, subresource, namespace and name of a
  request, as ``staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go``
  ``RequestInfoFactory.NewRequestInfo`` derives them (``get``/``list``/``watch``/``create``/
  ``update``/``patch``/``delete``/``deletecollection``; ``watch=true`` makes a list a watch);
* `authenticate`: a bearer token to a `User` (a static token file's entries; no token or an
  unknown one: None, answered 401 ``Unauthorized``);
* `authorize`: ``plugin/pkg/auth/authorizer/rbac/rbac.go`` ``RBACAuthorizer.Authorize`` over the
  stored ClusterRoles, Roles and their bindings (``rbac.authorization.k8s.io/v1``): a
  ClusterRoleBinding grants its ClusterRole's rules everywhere, a RoleBinding its Role's (or
  ClusterRole's) rules in its own namespace; a rule matches by ``verbs``, ``apiGroups``,
  ``resources`` (``pods/eviction`` is its own resource, ``*/status`` any status) and
  ``resourceNames`` (``pkg/apis/rbac/v1/evaluation_helpers.go`` ``RuleAllows``); subjects are
  Users, Groups and ServiceAccounts (``system:serviceaccount:<ns>:<name>``, rbac.go
  ``appliesToUser``); the group ``system:masters`` is allowed everything
  (``authorizerfactory.NewPrivilegedGroups``), and every authenticated user may read the
  discovery paths (the bootstrap policy's ``system:discovery`` and
  ``system:public-info-viewer`` roles);
* `forbidden_message`: ``responsewriters/errors.go`` ``ForbiddenStatus`` +
  ``apierrors.NewForbidden``: ``<resource>[.<group>] ["<name>" ]is forbidden: User "<user>"
  cannot <verb> resource "<resource>[/<sub>]" in API group "<group>" in the namespace "<ns>"``
  (or ``at the cluster scope``).

`shipped_rbac` reads scoctl's role (``scoctl/data/rbac.yaml``, the same file as
``configs/kubernetes/rbac.yaml``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

Obj = dict[str, Any]

RBAC_GROUP = "rbac.authorization.k8s.io"
PRIVILEGED_GROUP = "system:masters"
AUTHENTICATED = "system:authenticated"
# the bootstrap policy's discovery roles (system:discovery, system:public-info-viewer), bound to
# system:authenticated: what a non-resource GET may read
DISCOVERY_PATHS = ("/api", "/api/*", "/apis", "/apis/*", "/version", "/version/", "/healthz",
                   "/livez", "/readyz", "/openapi", "/openapi/*")
SCOCTL_USER = "system:serviceaccount:kube-system:scoctl"


@dataclass(frozen=True)
class User:
    """An authenticated identity."""

    name: str
    groups: tuple[str, ...] = ()


def service_account(namespace: str, name: str) -> User:
    """The user a ServiceAccount token authenticates as (serviceaccount.MakeUsername and
    MakeGroupNames)."""
    return User(f"system:serviceaccount:{namespace}:{name}",
                ("system:serviceaccounts", f"system:serviceaccounts:{namespace}", AUTHENTICATED))


ADMIN = User("kubernetes-admin", (PRIVILEGED_GROUP, AUTHENTICATED))
# a request without credentials, where anonymous requests are allowed (user.Anonymous,
# user.AllUnauthenticated)
ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))
SCOCTL = service_account("kube-system", "scoctl")


@dataclass(frozen=True)
class Attributes:
    """What a request asks for (authorizer.AttributesRecord)."""

    verb: str
    path: str
    resource_request: bool
    group: str = ""
    version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def combined_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch", "GET": "get", "HEAD": "get",
          "DELETE": "delete"}


def request_attributes(method: str, path: str, query: Mapping[str, str]) -> Attributes:
    """The attributes of a request (requestinfo.go NewRequestInfo)."""
    parts = [p for p in path.split("/") if p]
    verb = _VERBS.get(method, method.lower())
    if not parts or parts[0] not in ("api", "apis"):
        return Attributes(verb, path, False)
    if parts[0] == "api":
        if len(parts) < 3:
            return Attributes(verb, path, False)
        group, version, rest = "", parts[1], parts[2:]
    else:
        if len(parts) < 4:
            return Attributes(verb, path, False)
        group, version, rest = parts[1], parts[2], parts[3:]
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]  # /namespaces/{ns}/{resource}/...; else the Namespace itself
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if method in ("GET", "HEAD"):
        if query.get("watch") in ("true", "1"):
            verb = "watch"
        elif not name:
            verb = "list"
    elif method == "DELETE" and not name:
        verb = "deletecollection"
    return Attributes(verb, path, True, group, version, resource, sub, namespace, name)


def authenticate(header: str | None, tokens: Mapping[str, User]) -> User | None:
    """The user of an ``Authorization: Bearer <token>`` header; None when there is none or the
    token is unknown (bearertoken.go: a malformed header or an empty token is no token)."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return tokens.get(token.strip())


def _has(values: Any, want: str) -> bool:
    return isinstance(values, list) and ("*" in values or want in values)


def rule_allows(rule: Mapping[str, Any], attrs: Attributes) -> bool:
    """evaluation_helpers.go RuleAllows: one PolicyRule against a request."""
    if not _has(rule.get("verbs"), attrs.verb):
        return False
    if not attrs.resource_request:
        for url in rule.get("nonResourceURLs") or []:
            if url == "*" or url == attrs.path or (
                    url.endswith("*") and attrs.path.startswith(url[:-1])):
                return True
        return False
    if not _has(rule.get("apiGroups"), attrs.group):
        return False
    combined, sub = attrs.combined_resource, attrs.subresource
    if not any(r == "*" or r == combined or (sub and r == f"*/{sub}")
               for r in rule.get("resources") or []):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _applies(subject: Mapping[str, Any], user: User, namespace: str) -> bool:
    """rbac.go appliesToUser."""
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "User":
        return name == user.name
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or namespace
        return bool(ns) and f"system:serviceaccount:{ns}:{name}" == user.name
    return False


@dataclass(frozen=True)
class Policy:
    """The RBAC objects in force: ClusterRoles and Roles by (namespace, name), bindings."""

    cluster_roles: Mapping[str, Obj]
    roles: Mapping[tuple[str, str], Obj]
    cluster_bindings: Sequence[Obj]
    bindings: Sequence[Obj]


def policy_of(objects: Iterable[Mapping[str, Any]]) -> Policy:
    """A Policy from ClusterRole, Role, ClusterRoleBinding and RoleBinding objects."""
    cluster_roles: dict[str, Obj] = {}
    roles: dict[tuple[str, str], Obj] = {}
    cluster_bindings: list[Obj] = []
    bindings: list[Obj] = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        kind = obj.get("kind")
        if kind == "ClusterRole":
            cluster_roles[str(meta.get("name"))] = dict(obj)
        elif kind == "Role":
            roles[(str(meta.get("namespace")), str(meta.get("name")))] = dict(obj)
        elif kind == "ClusterRoleBinding":
            cluster_bindings.append(dict(obj))
        elif kind == "RoleBinding":
            bindings.append(dict(obj))
    return Policy(cluster_roles, roles, cluster_bindings, bindings)


def _rules(policy: Policy, ref: Mapping[str, Any], namespace: str) -> list[Mapping[str, Any]]:
    if ref.get("kind") == "ClusterRole":
        role = policy.cluster_roles.get(str(ref.get("name")))
    elif ref.get("kind") == "Role" and namespace:
        role = policy.roles.get((namespace, str(ref.get("name"))))
    else:
        role = None
    return list((role or {}).get("rules") or [])


def granting_rules(policy: Policy, user: User, attrs: Attributes) -> list[Mapping[str, Any]]:
    """The rules that allow `attrs` to `user` (rule.go VisitRulesFor: the ClusterRoleBindings,
    then the RoleBindings of the request's namespace)."""
    out: list[Mapping[str, Any]] = []
    for binding in policy.cluster_bindings:
        if any(_applies(s, user, "") for s in binding.get("subjects") or []):
            out += [r for r in _rules(policy, binding.get("roleRef") or {}, "")
                    if rule_allows(r, attrs)]
    if attrs.namespace:
        for binding in policy.bindings:
            ns = str((binding.get("metadata") or {}).get("namespace") or "")
            if ns != attrs.namespace:
                continue
            if any(_applies(s, user, ns) for s in binding.get("subjects") or []):
                out += [r for r in _rules(policy, binding.get("roleRef") or {}, ns)
                        if rule_allows(r, attrs)]
    return out


def authorize(policy: Policy, user: User, attrs: Attributes) -> bool:
    """Whether `user` may do `attrs`: the privileged group, discovery, else RBAC."""
    if PRIVILEGED_GROUP in user.groups:
        return True
    if not attrs.resource_request and attrs.verb == "get" and AUTHENTICATED in user.groups:
        return rule_allows({"verbs": ["get"], "nonResourceURLs": list(DISCOVERY_PATHS)}, attrs)
    return bool(granting_rules(policy, user, attrs))


def forbidden_message(user: User, attrs: Attributes) -> str:
    """The message of the 403 Status (ForbiddenStatus, forbiddenMessage, NewForbidden; RBAC
    gives no reason when no rule matched)."""
    if not attrs.resource_request:
        return f'forbidden: User "{user.name}" cannot {attrs.verb} path "{attrs.path}"'
    detail = (f'User "{user.name}" cannot {attrs.verb} resource "{attrs.combined_resource}" '
              f'in API group "{attrs.group}"')
    detail += (f' in the namespace "{attrs.namespace}"' if attrs.namespace
               else " at the cluster scope")
    qualified = f"{attrs.resource}.{attrs.group}" if attrs.group else attrs.resource
    named = f' "{attrs.name}"' if attrs.name else ""
    return f"{qualified}{named} is forbidden: {detail}"


def shipped_rbac() -> list[Obj]:
    """The objects of scoctl's shipped role (``configs/kubernetes/rbac.yaml``, packaged as
    ``scoctl/data/rbac.yaml``): its ServiceAccount, ClusterRole, Role and bindings."""
    import yaml

    text = resources.files("scoctl.data").joinpath("rbac.yaml").read_text("utf-8")
    return [dict(d) for d in yaml.safe_load_all(text) if d]
