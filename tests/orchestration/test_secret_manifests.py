"""Secrets in manifests, against literal expected objects: values only in the Secret, the
pods refer to it by its stored name."""

from __future__ import annotations

from apps.orchestration import manifests as m
from tests.orchestration.test_manifests import spec


def test_credential_secret_is_labelled_and_holds_the_data_base64() -> None:
    assert m.credential_secret_manifest(
        namespace="team-vision",
        name="gpp-s-0a1b2c3d4e5f",
        team_slug="vision",
        personal=True,
        data={"token": "hf_abc", "user": "alice"},
    ) == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": "gpp-s-0a1b2c3d4e5f",
            "namespace": "team-vision",
            "labels": {
                "app.kubernetes.io/managed-by": "gpupaas",
                "gpupaas.io/team": "vision",
                "gpupaas.io/secret-scope": "personal",
            },
        },
        "type": "Opaque",
        "data": {"token": "aGZfYWJj", "user": "YWxpY2U="},
    }


def test_job_container_takes_secret_keys_and_whole_secrets_by_stored_name() -> None:
    refs = (
        m.SecretEnv(secret="gpp-s-team", env="HF_TOKEN", key="token"),
        m.SecretEnv(secret="gpp-s-wandb"),
    )
    (job,) = m.workload_manifests(spec(secret_env=refs))
    container = job["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [
        {"name": "EPOCHS", "value": "3"},
        {"name": "GPUPAAS_CHECKPOINT_DIR", "value": "/team/checkpoints/wl-42"},
        {"name": "GPUPAAS_OUTPUT_DIR", "value": "/team/outputs/wl-42"},
        {"name": "GPUPAAS_RESTART_COUNT", "value": "0"},
        {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": "gpp-s-team", "key": "token"}}},
    ]
    assert container["envFrom"] == [{"secretRef": {"name": "gpp-s-wandb"}}]


def test_without_secrets_the_container_has_no_env_from() -> None:
    (job,) = m.workload_manifests(spec())
    assert "envFrom" not in job["spec"]["template"]["spec"]["containers"][0]


def test_notebook_and_sweep_containers_take_secrets_too() -> None:
    ref = (m.SecretEnv(secret="gpp-s-x", env="TOKEN", key="t"),)
    wanted = {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "gpp-s-x", "key": "t"}}}
    notebook = m.workload_manifests(spec(kind="notebook", command=(), args=(), secret_env=ref))[0]
    assert wanted in notebook["spec"]["template"]["spec"]["containers"][0]["env"]
    sweep = m.workload_manifests(spec(kind="sweep", sweep_grid={"lr": ["1", "2"]}, secret_env=ref))
    for job in sweep:
        assert wanted in job["spec"]["template"]["spec"]["containers"][0]["env"]
