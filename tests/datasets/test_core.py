"""What a dataset registration may be, on plain data."""

from __future__ import annotations

from apps.datasets import core


def test_a_claim_and_an_object_prefix_are_accepted() -> None:
    assert core.problems(name="imagenet", kind="claim", claim="imagenet-pvc") == {}
    assert core.problems(name="w", kind="object", uri="s3://b/prefix/") == {}
    assert core.problems(name="w", kind="object", uri="gs://bucket") == {}
    assert core.mount_path("imagenet") == "/datasets/imagenet"


def test_bad_names_kinds_claims_and_prefixes_are_field_messages() -> None:
    assert set(core.problems(name="Bad_Name", kind="claim", claim="c")) == {"name"}
    assert set(core.problems(name="x" * 41, kind="claim", claim="c")) == {"name"}
    assert set(core.problems(name="x", kind="nfs")) == {"kind"}
    assert set(core.problems(name="x", kind="claim")) == {"claim"}
    assert set(core.problems(name="x", kind="claim", claim="Bad Claim")) == {"claim"}
    assert set(core.problems(name="x", kind="claim", claim="c", uri="s3://b")) == {"uri"}
    assert set(core.problems(name="x", kind="object")) == {"uri"}
    assert set(core.problems(name="x", kind="object", uri="http://b/p")) == {"uri"}
    assert set(core.problems(name="x", kind="object", uri="s3://b/a b")) == {"uri"}
    assert set(core.problems(name="x", kind="object", uri="s3://b", claim="c")) == {"claim"}
