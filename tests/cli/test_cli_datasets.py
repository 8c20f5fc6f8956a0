"""``--dataset`` and ``datasets:`` in a spec: pure parsing, and live against the test server."""

from __future__ import annotations

import pytest

from apps.datasets.models import Dataset
from apps.workloads.models import Workload
from gpupaas_cli import exits, spec
from tests.cli.test_cli_live import CliFor
from tests.plugins.cast import Cast

BASE = {"kind": "job", "name": "n", "gpu_class": "c", "image": "i", "gpu": 1}


def test_spec_file_datasets_pass_through_and_flags_win() -> None:
    assert spec.build_request({**BASE, "datasets": ["a"]}, {})["datasets"] == ["a"]
    assert spec.build_request({**BASE, "datasets": ["a"]}, {"datasets": ["b"]})["datasets"] == ["b"]


def test_spec_file_datasets_must_be_a_list_of_names() -> None:
    with pytest.raises(spec.SpecError, match="datasets must be a list"):
        spec.build_request({**BASE, "datasets": "imagenet"}, {})
    with pytest.raises(spec.SpecError, match="datasets must be a list"):
        spec.build_request({**BASE, "datasets": [{"name": "x"}]}, {})


def test_submit_with_dataset_from_the_cli(cast: Cast, cli_for: CliFor) -> None:
    Dataset.objects.create(team=cast.team, name="imagenet", kind="claim", claim="imagenet-pvc")
    Dataset.objects.create(team=cast.other_team, name="private", kind="claim", claim="p")
    owner = cli_for(cast.owner)
    args = ["--gpu-class", cast.gpu_class.name, "--image", cast.image.name, "--gpu", "1"]
    refused = owner("submit", "job", "--name", "j", *args, "--dataset", "private", "--", "python")
    assert refused.exit_code == exits.INVALID, refused.output
    assert "datasets: No dataset named “private”" in refused.stderr
    assert not Workload.objects.exists()
    ok = owner("submit", "job", "--name", "j", *args, "--dataset", "imagenet", "--", "python")
    assert ok.exit_code == 0, ok.output
    assert Workload.objects.get().datasets[0]["name"] == "imagenet"
