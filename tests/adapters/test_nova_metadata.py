"""Server metadata after create, as a reclaimer sets ``sco:reclaim-at`` (design: Notices): the real
openstacksdk against BOTH backends (the emulator and the real Nova harness), the same code.
"""

from __future__ import annotations

import pytest

from scoctl.core.model import LaunchRequest, ServerInfo
from scoctl.core.model.vocabulary import META_RECLAIM_AT
from tests.fixtures.nova import NovaBackend

pytestmark = pytest.mark.nova

DEADLINE = "2026-05-01T12:00:00Z"


def active_server(backend: NovaBackend, tag: str) -> ServerInfo:
    backend.cloud.launch(LaunchRequest(name=f"md-{tag}", flavor=backend.small_flavor,
                                       image=backend.image, networks="none",
                                       tags=("sco:managed", f"t:{tag}")))
    [server] = backend.wait_for(lambda: backend.cloud.servers(tags=[f"t:{tag}"]),
                                lambda ss: len(ss) == 1 and ss[0].status == "ACTIVE")
    return server


def listed(backend: NovaBackend, tag: str) -> ServerInfo:
    [server] = backend.cloud.servers(tags=[f"t:{tag}"])
    return server


def test_metadata_set_after_create_shows_in_the_listing_and_can_be_removed(
        nova_cloud: NovaBackend) -> None:
    compute = nova_cloud.connection.compute
    server = active_server(nova_cloud, "a")
    compute.set_server_metadata(server.id, **{META_RECLAIM_AT: DEADLINE, "owner": "blazar"})
    assert listed(nova_cloud, "a").metadata == {META_RECLAIM_AT: DEADLINE, "owner": "blazar"}

    response = compute.put(f"/servers/{server.id}/metadata/{META_RECLAIM_AT}",
                           json={"meta": {META_RECLAIM_AT: "2026-05-01T13:00:00Z"}})
    assert response.status_code == 200, response.text
    assert response.json() == {"meta": {META_RECLAIM_AT: "2026-05-01T13:00:00Z"}}
    mismatch = compute.put(f"/servers/{server.id}/metadata/{META_RECLAIM_AT}",
                           json={"meta": {"other": "x"}})
    assert mismatch.status_code == 400

    compute.delete_server_metadata(server.id, [META_RECLAIM_AT])
    assert listed(nova_cloud, "a").metadata == {"owner": "blazar"}
    missing = compute.delete(f"/servers/{server.id}/metadata/{META_RECLAIM_AT}")
    assert missing.status_code == 404
    replaced = compute.put(f"/servers/{server.id}/metadata", json={"metadata": {"k": "v"}})
    assert replaced.status_code == 200 and replaced.json() == {"metadata": {"k": "v"}}
    assert compute.get(f"/servers/{server.id}/metadata").json() == {"metadata": {"k": "v"}}


def test_metadata_of_an_unknown_server_is_404(nova_cloud: NovaBackend) -> None:
    response = nova_cloud.connection.compute.post(
        "/servers/00000000-0000-0000-0000-000000000000/metadata",
        json={"metadata": {META_RECLAIM_AT: DEADLINE}})
    assert response.status_code == 404
