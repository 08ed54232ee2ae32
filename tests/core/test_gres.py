"""GRES strings as Slurm prints them, parsed into counts the gate can compare."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from scoctl.core.gres import (
    Gres,
    GresError,
    format_gres,
    gpu_count,
    gpu_gres_names,
    gres_count,
    parse_gres,
    resource_name,
    to_resources,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu:4", (Gres("gpu", None, 4),)),
        ("gpu:a100:4", (Gres("gpu", "a100", 4),)),
        ("gpu:a100:4,mps:100", (Gres("gpu", "a100", 4), Gres("mps", None, 100))),
        ("gpu:a100:4(S:0-1)", (Gres("gpu", "a100", 4),)),
        ("gpu:a100:4(IDX:0-3)", (Gres("gpu", "a100", 4),)),
        ("gpu:a100:2(IDX:0,2-3),mps:1K", (Gres("gpu", "a100", 2), Gres("mps", None, 1024))),
        ("gpu:a100:2,gpu:v100:2(S:1)", (Gres("gpu", "a100", 2), Gres("gpu", "v100", 2))),
        ("gres:gpu:fake:1", (Gres("gpu", "fake", 1),)),  # squeue --json tres_per_node (22.05)
        ("gres/gpu:fake:1", (Gres("gpu", "fake", 1),)),  # later releases
        ("gres/gpu:a100=4", (Gres("gpu", "a100", 4),)),  # TRES spelling
        ("gres/gpu=2", (Gres("gpu", None, 2),)),
        ("gpu", (Gres("gpu", None, 1),)),  # --gres=gpu means one
        ("gpu:a100", (Gres("gpu", "a100", 1),)),
        (" gpu:h100:8 ", (Gres("gpu", "h100", 8),)),
        ("gpu:a100:4,bandwidth:lustre:no_consume:4G",  # slurm.conf's no_consume flag
         (Gres("gpu", "a100", 4), Gres("bandwidth", "lustre", 4 * 2**30))),
        ("gpu:no_consume:2", (Gres("gpu", None, 2),)),
        ("(null)", ()),
        ("", ()),
        ("N/A", ()),
        (None, ()),
    ],
)
def test_parse_gres_reads_every_spelling_slurm_prints(
    text: str | None, expected: tuple[Gres, ...]
) -> None:
    assert parse_gres(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "this is not slurm",
        "gpu:a:b:c",
        "4:gpu",
        "gpu:a100:x",
        "gpu:a100:4(S:0-1",
        "gpu)",
        "gpu:a100:4(S:0)junk",
        '{"gres": 1}',
        "gpu:-1",
    ],
)
def test_parse_gres_rejects_garbage(text: str) -> None:
    with pytest.raises(GresError):
        parse_gres(text)


def test_gpu_count_with_and_without_a_type_filter() -> None:
    entries = parse_gres("gpu:a100:2,gpu:v100:3,mps:100,gpu:1")
    assert gpu_count(entries) == 6
    assert gpu_count(entries, "a100") == 2
    assert gpu_count(entries, "A100") == 2  # Slurm compares types case-insensitively
    assert gpu_count(entries, "h100") == 0


def test_untyped_gpus_never_match_a_type_filter() -> None:
    assert gpu_count(parse_gres("gpu:8"), "a100") == 0
    assert gpu_count(parse_gres("gpu:8")) == 8


def test_gres_map_names_resources_typed_key_first() -> None:
    gres_map = {"gpu": "nvidia.com/gpu", "gpu:mi250": "amd.com/gpu"}
    entries = parse_gres("gpu:a100:4,gpu:mi250:2,mps:100")
    assert resource_name(entries[0], gres_map) == "nvidia.com/gpu"
    assert resource_name(entries[1], gres_map) == "amd.com/gpu"
    assert to_resources(entries, gres_map) == {
        "nvidia.com/gpu": 4,
        "amd.com/gpu": 2,
        "mps": 100,
    }


def test_gpu_gres_names_follow_the_map_and_keep_plain_gpu_when_unmapped() -> None:
    assert gpu_gres_names({}, "nvidia.com/gpu") == {"gpu"}
    assert gpu_gres_names({"gpu": "nvidia.com/gpu"}, "nvidia.com/gpu") == {"gpu"}
    assert gpu_gres_names({"gpu": "amd.com/gpu"}, "nvidia.com/gpu") == frozenset()
    assert gpu_gres_names({"tesla": "nvidia.com/gpu"}, "nvidia.com/gpu") == {"tesla", "gpu"}
    entries = parse_gres("tesla:4,gpu:2")
    assert gpu_count(entries, None, {"tesla": "nvidia.com/gpu"}) == 6
    assert gres_count(entries, ["tesla"]) == 4


names = st.sampled_from(["gpu", "mps", "shard", "nic", "fpga"])
types = st.one_of(st.none(), st.sampled_from(["a100", "h100", "v100", "fake", "mi250"]))
suffixes = st.sampled_from(["", "(S:0)", "(S:0-1)", "(IDX:0-3)", "(IDX:0,2)", "(S:0,1)"])
entries_strategy = st.lists(
    st.tuples(names, types, st.integers(0, 4096), suffixes), min_size=0, max_size=5
)


@given(entries_strategy)
def test_parse_inverts_formatting_whatever_the_suffixes(
    raw: list[tuple[str, str | None, int, str]],
) -> None:
    text = ",".join(f"{n}:{t}:{c}{s}" if t else f"{n}:{c}{s}" for n, t, c, s in raw)
    parsed = parse_gres(text)
    assert parsed == tuple(Gres(n, t, c) for n, t, c, _ in raw)
    assert parse_gres(format_gres(parsed)) == parsed


@given(entries_strategy, types)
def test_gpu_count_is_the_sum_of_matching_gpu_entries(
    raw: list[tuple[str, str | None, int, str]], wanted: str | None
) -> None:
    entries = tuple(Gres(n, t, c) for n, t, c, _ in raw)
    expected = sum(c for n, t, c, _ in raw if n == "gpu" and (wanted is None or t == wanted))
    assert gpu_count(entries, wanted) == expected
    assert gpu_count(entries, wanted) <= gpu_count(entries)
