"""``gpupaas submit endpoint`` and ``gpupaas endpoint``: live against the test server, with
the rules' field messages for bad input."""

from __future__ import annotations

import json

import pytest

from apps.workloads import core
from apps.workloads.models import Workload
from gpupaas_cli import spec
from tests.cli.test_cli_live import CliFor
from tests.credentials.fakes import FakeCluster, _fake_cluster  # noqa: F401
from tests.factories import ImageFactory
from tests.plugins.cast import Cast


def test_a_spec_file_may_describe_an_endpoint() -> None:
    body = spec.build_request(
        {
            "kind": "endpoint",
            "name": "n",
            "gpu_class": "c",
            "image": "i",
            "gpu": 1,
            "endpoint": {"port": 8080, "model_path": "/team/m"},
        },
        {},
    )
    assert body["kind"] == "inference" and body["endpoint"]["port"] == 8080
    with pytest.raises(spec.SpecError, match="Unknown endpoint field"):
        spec.build_request(
            {
                "kind": "endpoint",
                "name": "n",
                "gpu_class": "c",
                "image": "i",
                "gpu": 1,
                "endpoint": {"prot": 1},
            },
            {},
        )


def test_deploy_scale_and_keys_from_the_cli(
    cast: Cast, cli_for: CliFor, fake_cluster: FakeCluster
) -> None:
    ImageFactory(name="vLLM", reference="docker.io/vllm/vllm-openai:v0.6.4", kind="serving")
    lead = cli_for(cast.lead)
    common = [
        "submit",
        "endpoint",
        "--name",
        "llm",
        "--gpu",
        "1",
        "--gpu-class",
        cast.gpu_class.name,
        "--image",
        "vLLM",
        "--team",
        cast.team.slug,
    ]
    bad = lead(*common, "--model-path", "/etc/passwd", "--port", "80")
    assert bad.exit_code != 0
    assert "The port is a whole number from 1024 to 65535." in bad.output
    assert "The model must be on the team's volumes" in bad.output
    made = lead(*common, "--model-path", "/team/models/llama", "--max-replicas", "3", "--json")
    assert made.exit_code == 0, made.output
    pk = json.loads(made.stdout)["id"]
    Workload.objects.filter(pk=pk).update(state=core.RUNNING)

    scaled = lead("endpoint", "scale", str(pk), "2")
    assert scaled.exit_code == 0, scaled.output
    assert Workload.objects.get(pk=pk).params["endpoint"]["target_replicas"] == 2
    refused = lead("endpoint", "scale", str(pk), "9")
    assert refused.exit_code != 0 and "between 1 and 3 replicas" in refused.output

    key = lead("endpoint", "key-create", str(pk), "chatbot")
    assert key.exit_code == 0, key.output
    plaintext = key.stdout.strip().splitlines()[-1]
    assert plaintext.startswith("gpe_")
    shown = lead("endpoint", "show", str(pk))
    assert shown.exit_code == 0, shown.output
    assert "chatbot" in shown.output and plaintext not in shown.output
    assert "1 of 2 asked" in shown.output
