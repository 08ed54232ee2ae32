"""Intake over pods that share their container values (as the Kubernetes adapter builds them):
the claim is the same as over pods built one by one."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.demand import Container
from scoctl.core.quantity import parse_resources
from tests.core.test_intake import decide, make_pod

SHARED = (Container("main", parse_resources({"cpu": "4", "memory": "16Gi"})),)


def test_pods_sharing_containers_but_not_pod_level_requests_keep_their_own_request():
    plain = make_pod("a", containers=SHARED)
    bigger = replace(make_pod("b", containers=SHARED),
                     pod_requests=parse_resources({"cpu": "8"}))
    overhead = replace(make_pod("c", containers=SHARED),
                       overhead=parse_resources({"memory": "1Gi"}))
    claim = decide((plain, bigger, overhead)).claims[0]
    assert claim.requests == parse_resources({"cpu": "16", "memory": "49Gi"})
    assert claim.largest_pod == parse_resources({"cpu": "8", "memory": "17Gi"})


@given(st.lists(st.tuples(st.sampled_from(["1", "2", "4"]), st.sampled_from(["1Gi", "8Gi"]),
                          st.booleans()), min_size=1, max_size=12))
def test_the_claim_over_shared_container_values_equals_the_claim_over_copies(shapes):
    shared = {(cpu, memory): (Container("main", parse_resources({"cpu": cpu,
                                                                  "memory": memory})),)
              for cpu, memory, _ in shapes}
    one_each = tuple(make_pod(f"p{i}", cpu=cpu, memory=memory, unschedulable=waiting)
                     for i, (cpu, memory, waiting) in enumerate(shapes))
    sharing = tuple(replace(pod, containers=shared[(cpu, memory)])
                    for pod, (cpu, memory, _) in zip(one_each, shapes, strict=True))
    assert decide(sharing) == decide(one_each)
