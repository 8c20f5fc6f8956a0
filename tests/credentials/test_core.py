from __future__ import annotations

import pytest

from apps.credentials import core


@pytest.mark.parametrize("name", ["hf", "wandb-key", "s3", "a" * core.MAX_NAME_LENGTH])
def test_dns_label_names_are_accepted(name: str) -> None:
    assert core.name_problem(name) is None


@pytest.mark.parametrize("name", ["", "HF", "-hf", "hf-", "h_f", "a" * 41, "hf\n", "é"])
def test_names_that_cannot_be_a_label_are_refused(name: str) -> None:
    assert core.name_problem(name)


def test_values_are_checked_without_naming_them() -> None:
    assert core.data_problem({}) == core.VALUES_MISSING
    assert core.data_problem({"token": ""}) == "The value of token is empty."
    assert "cannot name a key" in (core.data_problem({"bad key": "x"}) or "")
    too_big = core.data_problem({"token": "s3cr3t" * 20000})
    assert too_big and "s3cr3t" not in too_big
    many = {f"k{i}": "v" for i in range(core.MAX_KEYS + 1)}
    assert "at most 16" in (core.data_problem(many) or "")
    assert core.problems(name="hf", data={"token": "x", "user.name": "y"}) == {}
