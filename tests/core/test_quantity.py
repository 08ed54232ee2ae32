from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.quantity import (
    QuantityError,
    add,
    fits,
    format_resources,
    parse_cpu,
    parse_memory,
    parse_quantity,
    parse_slurm_mem_mb,
    to_json_resources,
)


@pytest.mark.parametrize(("text", "millicores"), [
    ("500m", 500), (16, 16000), ("1.5", 1500), ("100m", 100), (0.25, 250), ("1e1", 10000)])
def test_cpu_quantities_in_millicores(text, millicores):
    assert parse_cpu(text) == millicores


@pytest.mark.parametrize(("text", "size"), [
    ("64Gi", 64 * 2**30), ("16Gi", 17179869184), ("1G", 10**9), ("512Mi", 512 * 2**20),
    ("1k", 1000), (1024, 1024), ("1.5Gi", 3 * 2**29)])
def test_memory_quantities_in_bytes(text, size):
    assert parse_memory(text) == size


@pytest.mark.parametrize("bad", ["", "abc", "5 Gi", "1Zi", True, None, "-1"])
def test_bad_quantities_are_refused(bad):
    with pytest.raises(QuantityError):
        parse_memory(bad)


@pytest.mark.parametrize(("text", "mb"), [
    ("4G", 4096), ("512", 512), ("512M", 512), ("1T", 1024 * 1024), ("1024K", 1), ("1K", 1),
    ("2g", 2048)])
def test_slurm_mem_units_are_binary_and_plain_numbers_are_mb(text, mb):
    assert parse_slurm_mem_mb(text) == mb


def test_slurm_mem_refuses_garbage():
    with pytest.raises(QuantityError, match="Slurm memory"):
        parse_slurm_mem_mb("lots")


def test_42_pods_of_4_vcpu_16gi_sum_to_168_vcpu_672gi():
    pod = {"cpu": parse_cpu(4), "memory": parse_memory("16Gi")}
    total: dict[str, int] = {}
    for _ in range(42):
        total = add(total, pod)
    assert total == {"cpu": 168000, "memory": 672 * 2**30}
    assert to_json_resources(total) == {"cpu": 168, "memory": 721554505728}
    assert format_resources(total) == "168 vCPU · 672Gi"


@given(st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]),
                       st.integers(0, 10**6)),
       st.dictionaries(st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]),
                       st.integers(0, 10**6)))
def test_fits_is_a_per_resource_conjunction(request, capacity):
    assert fits(request, capacity) == all(v <= capacity.get(k, 0) for k, v in request.items())


@given(st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "hugepages-2Mi"]),
       st.one_of(st.integers(min_value=-3, max_value=10**6),
                 st.from_regex(r"\A[0-9]{1,4}(\.[0-9]{1,3})?(m|k|M|G|Ki|Mi|Gi|Ti)?\Z")))
def test_a_remembered_quantity_is_the_quantity_worked_out_afresh(name: str, value: object) -> None:
    """`parse_quantity` remembers strings and whole numbers: the answer, or the refusal, is the
    same as working it out again, every time it is asked."""
    from scoctl.core.quantity import _parse_quantity

    try:
        expected: int | type[QuantityError] = _parse_quantity(name, value)
    except QuantityError:
        expected = QuantityError
    for _ in range(2):
        try:
            got: int | type[QuantityError] = parse_quantity(name, value)
        except QuantityError:
            got = QuantityError
        assert got == expected


def test_a_boolean_is_no_quantity_even_after_its_number_was_remembered() -> None:
    assert parse_quantity("cpu", 1) == 1000
    with pytest.raises(QuantityError):
        parse_quantity("cpu", True)
