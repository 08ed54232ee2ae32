"""The claim delta as a pure rule (`core.claims.claim_write`): a new version only when the
normalised demand changes; a pod count alone is saved in place; the same claim is no write."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.claims import ObservedClaim, claim_write, part_json, part_of
from scoctl.core.model import ClaimPart, ClaimRecord
from scoctl.core.model.vocabulary import PartSource


def observed(cpu: int = 4, pods: int = 1, nodes: tuple[str, ...] = (),
             contract: str = "T1") -> ObservedClaim:
    return ObservedClaim("web", contract, {"cpu": cpu * 1000}, {"cpu": 1000}, pods, "k8s",
                         nodes=nodes)


def stored(claim: ObservedClaim, version: int = 3) -> ClaimRecord:
    return ClaimRecord(claim.workload, version, claim.contract, dict(claim.requests),
                       dict(claim.largest_pod), claim.pods, claim.tolerates_reclaimable,
                       claim.source, "2026-01-01T00:00:00Z", claim.nodes)


def test_a_first_claim_is_version_one() -> None:
    write = claim_write(None, observed())
    assert write is not None and (write.version, write.delta) == (1, True)


def test_the_same_demand_is_no_write_and_a_new_pod_count_alone_keeps_the_version() -> None:
    base = observed(pods=4)
    assert claim_write(stored(base), base) is None
    write = claim_write(stored(base), observed(pods=5))
    assert write is not None and (write.version, write.delta) == (3, False)


def test_a_changed_request_contract_or_node_list_is_a_new_version() -> None:
    base = stored(observed())
    for change in (observed(cpu=8), observed(contract="T2"), observed(nodes=("n1",))):
        write = claim_write(base, change)
        assert write is not None and (write.version, write.delta) == (4, True), change


def test_node_order_is_no_change() -> None:
    base = stored(observed(nodes=("n1", "n2")))
    assert claim_write(base, observed(nodes=("n2", "n1"))) is None


@given(st.integers(1, 64), st.integers(1, 64), st.integers(0, 50), st.integers(0, 50))
def test_a_new_version_comes_exactly_when_the_demand_changes(
        cpu_a: int, cpu_b: int, pods_a: int, pods_b: int) -> None:
    write = claim_write(stored(observed(cpu_a, pods_a)), observed(cpu_b, pods_b))
    if cpu_a != cpu_b:
        assert write is not None and write.delta and write.version == 4
    elif pods_a != pods_b:
        assert write is not None and not write.delta and write.version == 3
    else:
        assert write is None


def test_a_parts_source_is_stored_read_back_and_a_change_of_it_is_a_new_version() -> None:
    # design: Buffers: the buffer is a part of the claim with source `buffer`
    buffer = ClaimPart({"cpu": 3000}, {"cpu": 1000}, 3, {"p1": "tier committed"},
                       source=PartSource.BUFFER)
    assert part_json(buffer)["source"] == "buffer" and part_of(part_json(buffer)) == buffer
    # a part stored before parts had a source is some of the pods
    old = {k: v for k, v in part_json(buffer).items() if k != "source"}
    assert part_of(old).source == PartSource.PODS
    with_buffer = replace(observed(), parts=(buffer,))
    as_pods = replace(with_buffer, parts=(replace(buffer, source=PartSource.PODS),))
    write = claim_write(replace(stored(with_buffer), parts=with_buffer.parts), as_pods)
    assert write is not None and write.delta
    assert claim_write(replace(stored(with_buffer), parts=with_buffer.parts), with_buffer) is None
