"""The image side of the node bootstrap (design: Operating): the bundled user-data, rendered as
acquire
renders it, is unpacked into a throw-away root the way cloud-init would (write_files, then
runcmd), and configs/node/scoctl-node-join runs there with recording `kubeadm` / `slurmd` on
PATH. The exact command lines and the kubelet flags they leave behind are checked."""

from __future__ import annotations

import os
import subprocess
from importlib import resources
from pathlib import Path

import pytest
import yaml

from scoctl.core.userdata import RECLAIMABLE_TAINT, BootContract, render_user_data

REPO = Path(__file__).resolve().parents[2]
JOIN_SCRIPT = REPO / "configs" / "node" / "scoctl-node-join"
SERVER_ID = "6f1c2a9e-0d1b-4c5e-9a7f-3b2e1d0c9f8a"
TOKEN = "abcdef.0123456789abcdef"
ENDPOINT = "10.0.0.10:6443"
CA_HASH = "sha256:" + "0123456789abcdef" * 4


def contract(**slurm: object) -> BootContract:
    return BootContract(workload="orders-daily", contract="T1", pool="c4.xlarge.az1.spot",
                        tier="reclaimable", generation=7, launch="l-0123456789ab",
                        region="region-a", az="az1", flavor="c4.xlarge", **slurm)  # type: ignore[arg-type]


def rendered(boot: BootContract) -> dict[str, object]:
    template = resources.files("scoctl.data").joinpath("user-data.yaml").read_text("utf-8")
    assert template == (REPO / "configs" / "user-data.yaml").read_text("utf-8")
    text = render_user_data(template, boot, TOKEN, join_endpoint=ENDPOINT, join_ca_hash=CA_HASH)
    assert text.startswith("#cloud-config\n")
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    return doc


class Node:
    """A throw-away root holding what cloud-init would have written, and recorders on PATH."""

    def __init__(self, tmp: Path, doc: dict[str, object], *, image_env: str = "") -> None:
        self.root = tmp / "root"
        self.log = tmp / "calls"
        for entry in doc["write_files"]:  # type: ignore[attr-defined]
            path = self.root / str(entry["path"]).lstrip("/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(str(entry["content"]))
            path.chmod(int(str(entry["permissions"]), 8))
        (self.root / "var/lib/cloud/data").mkdir(parents=True)
        (self.root / "var/lib/cloud/data/instance-id").write_text(SERVER_ID + "\n")
        if image_env:
            (self.root / "etc/scoctl/node.env").write_text(image_env)
        sbin = self.root / "usr/local/sbin"
        sbin.mkdir(parents=True)
        (sbin / "scoctl-node-join").write_bytes(JOIN_SCRIPT.read_bytes())
        (sbin / "scoctl-node-join").chmod(0o755)
        self.bin = tmp / "bin"
        self.bin.mkdir()
        for tool in ("kubeadm", "slurmd"):  # one line per call, one argument per field
            recorder = self.bin / tool
            recorder.write_text(f'#!/bin/sh\nprintf "%s" "{tool}" >> {self.log}\n'
                                f'for a in "$@"; do printf "\\t%s" "$a" >> {self.log}; done\n'
                                f"echo >> {self.log}\n")
            recorder.chmod(0o755)
        self.runcmd = doc["runcmd"]

    def boot(self) -> subprocess.CompletedProcess[str]:
        """Run the user-data's runcmd inside the root, as cloud-init does after write_files."""
        assert self.runcmd == [["/usr/local/sbin/scoctl-node-join"]]
        command = str(self.root) + self.runcmd[0][0]  # type: ignore[index]
        env = {"PATH": f"{self.bin}:/usr/bin:/bin", "SCO_ROOT": str(self.root),
               "SCO_METADATA_URL": "http://127.0.0.1:9/none"}
        return subprocess.run([command], env=env, capture_output=True, text=True, timeout=30,
                              check=False)

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [line.split("\t") for line in self.log.read_text().splitlines()]

    def file(self, path: str) -> Path:
        return self.root / path.lstrip("/")


def test_a_kubernetes_node_joins_with_its_labels_taint_and_server_id(tmp_path: Path) -> None:
    node = Node(tmp_path, rendered(contract()))
    assert oct(node.file("/etc/scoctl/join.env").stat().st_mode & 0o777) == "0o600"
    done = node.boot()
    assert done.returncode == 0, done.stderr
    assert node.calls() == [["kubeadm", "join", ENDPOINT, "--token", TOKEN,
                             "--discovery-token-ca-cert-hash", CA_HASH]]
    labels = ",".join([f"sco/instance={SERVER_ID}", "sco/managed=true",
                       "sco/workload=orders-daily", "sco/pool=c4.xlarge.az1.spot",
                       "sco/contract=T1", "sco/tier=reclaimable", "sco/reclaimable=true",
                       "node.kubernetes.io/instance-type=c4.xlarge",
                       "topology.kubernetes.io/zone=az1", "topology.kubernetes.io/region=region-a"])
    assert node.file("/etc/default/kubelet").read_text() == (
        f'KUBELET_EXTRA_ARGS="--node-labels={labels} --register-with-taints={RECLAIMABLE_TAINT}"\n')
    assert not node.file("/etc/scoctl/join.env").exists()  # the token is gone once used


def test_a_slurm_node_starts_slurmd_under_its_node_name(tmp_path: Path) -> None:
    boot = contract(slurm_node_name="c4x-007",
                    slurm_features=("c4.xlarge.az1.spot", "c4.xlarge", "reclaimable"))
    node = Node(tmp_path / "cloud", rendered(boot))
    done = node.boot()
    assert done.returncode == 0, done.stderr
    assert node.calls() == [["slurmd", "-N", "c4x-007"]]  # shape and features: slurm.conf

    dynamic = Node(tmp_path / "dynamic", rendered(boot), image_env="SCO_SLURM_DYNAMIC=1\n")
    assert dynamic.boot().returncode == 0
    assert dynamic.calls() == [["slurmd", "-Z", "-N", "c4x-007", "--conf",
                                "Feature=c4.xlarge.az1.spot,c4.xlarge,reclaimable"]]
    assert not dynamic.file("/etc/scoctl/join.env").exists()


@pytest.mark.parametrize(("broken", "named"), [
    ("/etc/scoctl/join.env", "SCO_JOIN_ENDPOINT"),
    ("/var/lib/cloud/data/instance-id", "no server id"),
])
def test_a_node_missing_what_the_join_needs_fails_loudly_and_joins_nothing(
        tmp_path: Path, broken: str, named: str) -> None:
    node = Node(tmp_path, rendered(contract()))
    node.file(broken).unlink()
    done = node.boot()
    assert done.returncode == 1
    assert named in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert node.calls() == []


def test_the_script_is_installable_as_shipped() -> None:
    assert os.access(JOIN_SCRIPT, os.X_OK)
    assert JOIN_SCRIPT.read_text().startswith("#!/bin/sh\n")
