"""The team volume, the storage quota and dataset mounts, against literal expected objects."""

from __future__ import annotations

from apps.orchestration import manifests as m
from tests.orchestration.test_manifests import JOB_ENV, TEAM_MOUNT, TEAM_VOLUME, spec

IMAGENET = m.DatasetMount(name="imagenet", claim="imagenet-pvc")
WEIGHTS = m.DatasetMount(
    name="llama-weights",
    uri="s3://models/llama/",
    secret="gpp-s-abc",
    secret_keys=("AWS_ACCESS_KEY_ID", "aws.secret"),
)
TEAM = m.TeamSpec(
    slug="vision",
    namespace="team-vision",
    object_counts={"count/persistentvolumeclaims": 100},
    volume_size="100Gi",
    storage_quota="1Ti",
)


def test_team_namespace_gets_a_read_write_many_team_volume_after_its_quota() -> None:
    objs = m.team_manifests(TEAM)
    kinds = [o["kind"] for o in objs]
    assert kinds.index("ResourceQuota") < kinds.index("PersistentVolumeClaim")
    assert objs[-1] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": "team-data",
            "namespace": "team-vision",
            "labels": {"app.kubernetes.io/managed-by": "gpupaas", "gpupaas.io/team": "vision"},
        },
        "spec": {"accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "100Gi"}}},
    }


def test_team_volume_takes_the_configured_storage_class() -> None:
    from dataclasses import replace

    claim = m.team_manifests(replace(TEAM, volume_storage_class="nfs"))[-1]
    assert claim["spec"]["storageClassName"] == "nfs"


def test_team_quota_holds_storage_and_the_claim_count() -> None:
    quota = next(o for o in m.team_manifests(TEAM) if o["kind"] == "ResourceQuota")
    assert quota["spec"] == {
        "hard": {"count/persistentvolumeclaims": "100", "requests.storage": "1Ti"}
    }


def test_without_a_size_no_team_volume_and_no_storage_quota() -> None:
    objs = m.team_manifests(m.TeamSpec(slug="vision", namespace="team-vision"))
    assert "PersistentVolumeClaim" not in [o["kind"] for o in objs]
    assert objs[2]["spec"] == {"hard": {}}


def test_job_mounts_the_team_volume_and_a_claim_dataset_read_only() -> None:
    (job,) = m.training_manifests(spec(datasets=(IMAGENET,)))
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["volumeMounts"] == [
        TEAM_MOUNT,
        {"name": "dataset-imagenet", "mountPath": "/datasets/imagenet", "readOnly": True},
    ]
    assert pod["volumes"] == [
        TEAM_VOLUME,
        {
            "name": "dataset-imagenet",
            "persistentVolumeClaim": {"claimName": "imagenet-pvc", "readOnly": True},
        },
    ]
    assert container["env"] == [{"name": "EPOCHS", "value": "3"}, *JOB_ENV]


def test_object_dataset_is_named_in_the_environment_with_its_secret_keys() -> None:
    (job,) = m.training_manifests(spec(datasets=(WEIGHTS,)))
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["env"] == [
        {"name": "EPOCHS", "value": "3"},
        *JOB_ENV,
        {"name": "GPUPAAS_DATASET_LLAMA_WEIGHTS_URI", "value": "s3://models/llama/"},
        {
            "name": "GPUPAAS_DATASET_LLAMA_WEIGHTS_AWS_ACCESS_KEY_ID",
            "valueFrom": {"secretKeyRef": {"name": "gpp-s-abc", "key": "AWS_ACCESS_KEY_ID"}},
        },
        {
            "name": "GPUPAAS_DATASET_LLAMA_WEIGHTS_AWS_SECRET",
            "valueFrom": {"secretKeyRef": {"name": "gpp-s-abc", "key": "aws.secret"}},
        },
    ]
    assert pod["volumes"] == [TEAM_VOLUME]  # no mount of the object store


def test_object_dataset_without_a_secret_has_its_uri_only() -> None:
    bare = m.DatasetMount(name="coco", uri="gs://public/coco")
    (job,) = m.training_manifests(spec(datasets=(bare,)))
    env = job["spec"]["template"]["spec"]["containers"][0]["env"]
    assert env[-1] == {"name": "GPUPAAS_DATASET_COCO_URI", "value": "gs://public/coco"}


def test_data_dirs_live_on_the_team_volume() -> None:
    (job,) = m.training_manifests(spec())
    env = {
        e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    mount = job["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["mountPath"]
    assert env["GPUPAAS_OUTPUT_DIR"].startswith(f"{mount}/")
    assert env["GPUPAAS_CHECKPOINT_DIR"].startswith(f"{mount}/")


def test_gang_sweep_and_notebook_mount_the_team_volume_and_datasets() -> None:
    gang = m.training_manifests(
        spec(
            replicas=2,
            placement=(m.ReplicaPlacement("a"), m.ReplicaPlacement("b")),
            datasets=(IMAGENET,),
        )
    )[-1]
    sweep = m.sweep_manifests(
        spec(
            kind="sweep",
            priority_class="batch",
            sweep_grid={"lr": ["1", "2"]},
            placement=(),
            datasets=(IMAGENET,),
        )
    )
    notebook = m.notebook_manifests(
        spec(kind="notebook", command=(), args=(), home_claim="home-u1", datasets=(IMAGENET,))
    )[0]
    for workload in (gang, *sweep, notebook):
        pod = workload["spec"]["template"]["spec"]
        names = [v["name"] for v in pod["volumes"]]
        assert TEAM_VOLUME in pod["volumes"], names
        assert "dataset-imagenet" in names
        mounts = pod["containers"][0]["volumeMounts"]
        assert TEAM_MOUNT in mounts
        assert {
            "name": "dataset-imagenet",
            "mountPath": "/datasets/imagenet",
            "readOnly": True,
        } in mounts
