from __future__ import annotations

import pytest

from apps.catalog import core


def errors(mode: str, **kw: object) -> dict[str, str]:
    params: dict = {"timeslice_replicas": None, "mig_profiles": [], "hami_split_count": None}
    params.update(kw)
    return core.sharing_params_errors(mode=mode, memory_mib=81920, **params)


def test_each_mode_accepts_its_own_parameters() -> None:
    assert errors("whole") == {}
    assert errors("timeslice", timeslice_replicas=4) == {}
    assert errors("mig", mig_profiles=["1g.10gb", "3g.40gb", "7g.80gb"]) == {}
    assert errors("hami", hami_split_count=10) == {}


@pytest.mark.parametrize(
    ("mode", "params", "field"),
    [
        ("timeslice", {}, "timeslice_replicas"),
        ("timeslice", {"timeslice_replicas": 1}, "timeslice_replicas"),
        ("whole", {"timeslice_replicas": 4}, "timeslice_replicas"),
        ("mig", {}, "mig_profiles"),
        ("mig", {"mig_profiles": ["big"]}, "mig_profiles"),
        ("mig", {"mig_profiles": ["8g.80gb"]}, "mig_profiles"),
        ("mig", {"mig_profiles": ["7g.160gb"]}, "mig_profiles"),
        ("mig", {"mig_profiles": ["1g.10gb", "1g.10gb"]}, "mig_profiles"),
        ("whole", {"mig_profiles": ["1g.10gb"]}, "mig_profiles"),
        ("hami", {}, "hami_split_count"),
        ("hami", {"hami_split_count": 0}, "hami_split_count"),
        ("mig", {"mig_profiles": ["1g.10gb"], "hami_split_count": 4}, "hami_split_count"),
    ],
)
def test_parameters_that_do_not_fit_the_mode_are_refused(
    mode: str, params: dict, field: str
) -> None:
    assert field in errors(mode, **params)


def test_mig_profiles_sort_smallest_first() -> None:
    assert core.sort_mig_profiles(["3g.40gb", "1g.10gb", "2g.20gb"]) == [
        "1g.10gb",
        "2g.20gb",
        "3g.40gb",
    ]


@pytest.mark.parametrize(
    "ref",
    [
        "nvcr.io/nvidia/pytorch:24.12-py3",
        "python:3.11",
        "localhost:5000/a/b:1",
        "ghcr.io/org/img@sha256:" + "a" * 64,
    ],
)
def test_image_references_accepted(ref: str) -> None:
    assert core.image_reference_problem(ref) is None


@pytest.mark.parametrize("ref", ["", "UPPER/case", "has space:1", "img:tag:tag", "-bad"])
def test_image_references_refused(ref: str) -> None:
    assert core.image_reference_problem(ref)
