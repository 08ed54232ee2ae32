"""slurmrestd's data-parser versions (design: Operating): the adapter negotiates the newest one the
server offers (or the pinned one) and reads every supported shape into the same values.

tests/fixtures/slurmrestd/v0.0.NN.json are responses written for these tests from SchedMD's
published OpenAPI schemas and data-parser sources (each file's ``_source`` names them): the
same small cluster (two nodes, four jobs, two partitions) in the shape of each version. A
small HTTP server on 127.0.0.1 answers with them as slurmrestd would, and the real httpx client
talks to it; the live path on Debian's slurmrestd 22.05 is in test_slurm_adapter.py.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from scoctl.adapters.batch import SchedulerAuthFailed, SchedulerFailed, SchedulerUnparseable
from scoctl.adapters.slurm import (
    SlurmCli,
    SlurmRest,
    newest_readable,
    offered_versions,
    parse_jobs_json,
    parse_nodes_json,
)
from scoctl.config.schema import load_config
from scoctl.core.gres import Gres
from scoctl.core.model import SlurmJob, SlurmNode
from scoctl.errors import ConfigError

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "slurmrestd"
VERSIONS = sorted((p.stem for p in RECORDED.glob("v0.0.*.json")),
                  key=lambda v: int(v.rsplit(".", 1)[1]))
TOKEN = "recorded-token"

NODES = [
    SlurmNode(name="gpu-a100-1", cpus=32, memory_mb=512000, gres=(Gres("gpu", "a100", 4),),
              partitions=("ml",), state="idle", flags=frozenset({"CLOUD", "POWERED_DOWN"}),
              features=("a100",)),
    SlurmNode(name="local1", cpus=4, memory_mb=4000, gres=(Gres("gpu", "fake", 2),),
              partitions=("cpu", "ml"), state="mixed"),
]
SUBMITTED = 1796119000  # every recorded job's submit_time, in each version's shape
JOBS = [
    SlurmJob(job_id=101, name="train", state="PENDING", reason="Resources", partition="cpu",
             account="ml-team", user="root", comment="sco:workload=train-1", cpus=2,
             memory_per_cpu_mb=512, gres_per_node=(Gres("gpu", None, 1),), node_count=1,
             submitted=SUBMITTED),
    SlurmJob(job_id=102, name="hog", state="RUNNING", reason="None", partition="cpu",
             user="root", cpus=1, memory_per_node_mb=100, node_count=1, nodes="local1",
             submitted=SUBMITTED),
    SlurmJob(job_id=103, name="gone", state="COMPLETING", reason="None", partition="cpu",
             user="root", cpus=1, memory_per_node_mb=100, node_count=1, nodes="local1",
             submitted=SUBMITTED),
    SlurmJob(job_id=104, name="boot", state="CONFIGURING", reason="None", partition="ml",
             user="root", cpus=32, gres_per_node=(Gres("gpu", "a100", 4),), node_count=1,
             nodes="gpu-a100-1", submitted=SUBMITTED),
]


def recorded(version: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RECORDED / f"{version}.json").read_text())
    return data


class RecordedRestd:
    """slurmrestd answering from recorded responses of the versions it was given."""

    def __init__(self, versions: list[str]) -> None:
        self.docs = {v: recorded(v) for v in versions}
        self.requests: list[str] = []
        restd = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                restd.requests.append(self.path)
                status, body = restd.answer(self.path, self.headers.get("X-SLURM-USER-TOKEN"))
                payload = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answer(self, path: str, token: str | None) -> tuple[int, str]:
        if token != TOKEN:
            return 401, "Authentication failure"
        if path == "/openapi/v3":
            paths: dict[str, Any] = {}
            for doc in self.docs.values():
                paths.update(doc["openapi"]["paths"])
            return 200, json.dumps({"openapi": "3.0.3", "paths": paths})
        for version, doc in self.docs.items():
            prefix = f"/slurm/{version}/"
            if not path.startswith(prefix):
                continue
            rest = path[len(prefix):].strip("/")
            if rest in ("nodes", "jobs", "partitions"):
                return 200, json.dumps(doc[rest])
            if rest.startswith("job/"):
                unknown = doc["job_unknown"]
                return int(unknown["status"]), json.dumps(unknown["body"])
        return 404, "Unable find requested URL. Please view /openapi/v3 for API reference."


@pytest.fixture
def restd(request: pytest.FixtureRequest) -> Iterator[RecordedRestd]:
    server = RecordedRestd(list(request.param))
    server.thread.start()
    try:
        yield server
    finally:
        server.server.shutdown()
        server.server.server_close()


def sinfo_cli(tmp_path: Path) -> SlurmCli:
    """A SlurmCli whose sinfo marks `cpu` as the default partition, as the cluster above."""
    sinfo = tmp_path / "sinfo"
    sinfo.write_text('#!/bin/sh\nprintf "cpu*\\nml\\n"\n')
    sinfo.chmod(0o755)
    return SlurmCli(sinfo=str(sinfo))


@pytest.mark.parametrize("version", VERSIONS)
def test_every_version_parses_into_the_same_nodes_and_jobs(version: str) -> None:
    doc = recorded(version)
    assert offered_versions(json.dumps(doc["openapi"])) == [version]
    assert parse_nodes_json(json.dumps(doc["nodes"])) == NODES
    assert parse_jobs_json(json.dumps(doc["jobs"])) == JOBS
    with pytest.raises(SchedulerFailed) as caught:
        parse_jobs_json(json.dumps(doc["job_unknown"]["body"]))
    assert caught.value.slurm_errno == 2017


def test_the_versions_cover_v0_0_38_to_v0_0_42_and_later() -> None:
    assert {"v0.0.38", "v0.0.39", "v0.0.40", "v0.0.41", "v0.0.42"} <= set(VERSIONS)
    assert len(VERSIONS) > 5


def test_the_newest_readable_version_wins() -> None:
    assert newest_readable(["v0.0.36", "v0.0.37", "v0.0.38"]) == "v0.0.38"
    assert newest_readable(["v0.0.40", "v0.0.41", "v0.0.42"]) == "v0.0.42"
    assert newest_readable(["v0.0.9", "v0.0.41", "v0.0.100"]) == "v0.0.100"  # numbers, not text
    with pytest.raises(SchedulerUnparseable, match="v0.0.36, v0.0.37; scoctl reads v0.0.38"):
        newest_readable(["v0.0.36", "v0.0.37"])
    with pytest.raises(SchedulerUnparseable):
        offered_versions("<html>not OpenAPI</html>")


@pytest.mark.parametrize("restd", [[v] for v in VERSIONS], indirect=True,
                         ids=lambda v: v[0])
def test_the_adapter_negotiates_and_reads_each_version(restd: RecordedRestd,
                                                       tmp_path: Path) -> None:
    version = next(iter(restd.docs))
    with SlurmRest(restd.url, user="root", token=TOKEN, cli=sinfo_cli(tmp_path)) as rest:
        assert rest.nodes() == NODES
        assert rest.nodes("cpu") == [NODES[1]]
        assert rest.jobs() == JOBS and rest.jobs("ml") == [JOBS[3]]
        assert rest.job(99999) is None
        assert rest.default_partition() == "cpu"  # flags, or sinfo where the version hides them
        assert rest.api() == version
    assert restd.requests[0] == "/openapi/v3"
    assert restd.requests.count("/openapi/v3") == 1  # negotiated once
    assert all(r.startswith(f"/slurm/{version}/") for r in restd.requests[1:])


@pytest.mark.parametrize("restd", [["v0.0.38", "v0.0.40", "v0.0.42"]], indirect=True)
def test_a_server_offering_several_versions_is_read_at_the_newest_unless_pinned(
        restd: RecordedRestd, tmp_path: Path) -> None:
    with SlurmRest(restd.url, user="root", token=TOKEN, cli=sinfo_cli(tmp_path)) as rest:
        assert rest.jobs() == JOBS and rest.api() == "v0.0.42"
    restd.requests.clear()
    with SlurmRest(restd.url, user="root", token=TOKEN, api="v0.0.38") as pinned:
        assert pinned.nodes() == NODES and pinned.default_partition() == "cpu"
    assert restd.requests == ["/slurm/v0.0.38/nodes", "/slurm/v0.0.38/partitions"]


@pytest.mark.parametrize("restd", [["v0.0.38"]], indirect=True)
def test_negotiation_needs_the_token_too(restd: RecordedRestd) -> None:
    with SlurmRest(restd.url, user="root", token="wrong") as rest, \
            pytest.raises(SchedulerAuthFailed):
        rest.nodes()


def test_a_pinned_version_must_be_one_scoctl_reads(tmp_path: Path) -> None:
    def config(version: str) -> Path:
        path = tmp_path / "config.yaml"
        path.write_text(f"""
regions: [{{name: r1}}]
flavors: [{{name: f, vcpus: 1, ram: 1Gi}}]
pools: [{{name: p, region: r1, az: a, flavor: f, group: g, tier: reclaimable, depth: 1}}]
ranking: {{id: r, scores: {{p: 1}}}}
slurm: {{rest_url: "http://127.0.0.1:6820", rest_api_version: "{version}"}}
""", encoding="utf-8")
        return path

    assert load_config(config("v0.0.41")).slurm.rest_api_version == "v0.0.41"
    for bad in ("v0.0.37", "0.0.41", "latest"):
        with pytest.raises(ConfigError) as caught:
            load_config(config(bad))
        assert caught.value.field == "slurm.rest_api_version"
