"""``gpupaas secret`` and ``--secret``: pure parsing, and live against the test server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from apps.credentials.models import Secret
from apps.workloads.models import Workload
from gpupaas_cli import exits, spec
from tests.cli.test_cli_live import CliFor
from tests.credentials.fakes import FakeCluster, _fake_cluster  # noqa: F401
from tests.plugins.cast import Cast

VALUE = "cli-s3cret-token-value"


def test_secret_refs_parse_name_env_and_key() -> None:
    assert spec.parse_secret_ref("hf:HF_TOKEN=token") == {
        "name": "hf",
        "env": "HF_TOKEN",
        "key": "token",
    }
    assert spec.parse_secret_ref("hf:HF_TOKEN") == {"name": "hf", "env": "HF_TOKEN"}
    assert spec.parse_secret_ref("wandb") == {"name": "wandb"}
    with pytest.raises(spec.SpecError):
        spec.parse_secret_ref(":X")


def test_secret_data_comes_from_literals_and_files(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("abc\n")
    assert spec.parse_secret_data(["user=me"], [f"pem={key}"]) == {"user": "me", "pem": "abc\n"}
    with pytest.raises(spec.SpecError, match="Give the value"):
        spec.parse_secret_data([], [])


def test_spec_file_secrets_pass_through() -> None:
    body = spec.build_request(
        {"kind": "job", "name": "n", "gpu_class": "c", "image": "i", "gpu": 1},
        {"secrets": [{"name": "hf", "env": "HF_TOKEN"}]},
    )
    assert body["secrets"] == [{"name": "hf", "env": "HF_TOKEN"}]


def test_secret_create_list_use_and_delete_from_the_cli(
    cast: Cast, cli_for: CliFor, fake_cluster: FakeCluster
) -> None:
    lead = cli_for(cast.lead)
    slug = cast.team.slug
    made = lead("secret", "create", "hf", "--team", slug, "--from-literal", f"token={VALUE}")
    assert made.exit_code == 0, made.output
    assert VALUE not in made.output
    listed = lead("secret", "list", "--team", slug, "--json")
    assert [(r["name"], r["scope"], r["keys"]) for r in json.loads(listed.stdout)] == [
        ("hf", "team", ["token"])
    ]
    owner = cli_for(cast.owner)
    refused = owner("secret", "create", "x", "--team", slug, "--from-literal", "k=v")
    assert refused.exit_code == exits.FORBIDDEN, refused.output
    args = ["--gpu-class", cast.gpu_class.name, "--image", cast.image.name, "--gpu", "1"]
    missing = owner("submit", "job", "--name", "j", *args, "--secret", "nope:X", "--", "python")
    assert missing.exit_code == exits.INVALID, missing.output
    assert "secrets: No secret named “nope”" in missing.stderr
    submitted = owner(
        "submit", "job", "--name", "j", *args, "--secret", "hf:HF_TOKEN", "--json", "--", "python"
    )
    assert submitted.exit_code == 0, submitted.output
    assert Workload.objects.get().secrets[0]["env"] == "HF_TOKEN"
    assert lead("secret", "delete", "hf", "--team", slug).exit_code == 0
    assert not Secret.objects.exists()
