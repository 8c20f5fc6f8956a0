"""Manifest builders against literal expected objects."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from apps.catalog.resources import GpuClassSpec
from apps.orchestration import manifests as m
from tests.catalog.test_resources import A100_HAMI, A100_MIG, H100, L40S

POD_SECURITY = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "runAsGroup": 100,
    "fsGroup": 100,
    "seccompProfile": {"type": "RuntimeDefault"},
}
CONTAINER_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": False,
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
LABELS = {
    "app.kubernetes.io/managed-by": "gpupaas",
    "gpupaas.io/workload-id": "42",
    "gpupaas.io/team": "vision",
    "gpupaas.io/kind": "training",
}


# What every job is told: its checkpoint and output directories (the same on every start)
# and how many times it has been requeued before.
JOB_ENV = [
    {"name": "GPUPAAS_CHECKPOINT_DIR", "value": "/team/checkpoints/wl-42"},
    {"name": "GPUPAAS_OUTPUT_DIR", "value": "/team/outputs/wl-42"},
    {"name": "GPUPAAS_RESTART_COUNT", "value": "0"},
]
TEAM_MOUNT = {"name": "team", "mountPath": "/team"}
TEAM_VOLUME = {"name": "team", "persistentVolumeClaim": {"claimName": "team-data"}}


def spec(**kw: Any) -> m.WorkloadSpec:
    values: dict[str, Any] = {
        "id": 42,
        "name": "resnet",
        "kind": "training",
        "team_slug": "vision",
        "namespace": "team-vision",
        "owner": "alice",
        "image": "nvcr.io/nvidia/pytorch:24.12-py3",
        "gpu_limits": {"nvidia.com/gpu": "2"},
        "gpu_product": "NVIDIA-H100-80GB-HBM3",
        "sharing_mode": "whole",
        "priority_class": "training",
        "gpus_per_replica": 2,
        "cpu_milli": 8000,
        "memory_mib": 65536,
        "command": ("torchrun",),
        "args": ("train.py",),
        "env": {"EPOCHS": "3"},
        "max_runtime_seconds": 3600,
        "retries": 2,
        "placement": (m.ReplicaPlacement("h100-0"),),
    }
    values.update(kw)
    return m.WorkloadSpec(**values)


def test_single_replica_training_job() -> None:
    assert m.training_manifests(spec()) == [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "wl-42", "namespace": "team-vision", "labels": LABELS},
            "spec": {
                "backoffLimit": 2,
                "completions": 1,
                "parallelism": 1,
                "podFailurePolicy": {
                    "rules": [
                        {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}
                    ]
                },
                "activeDeadlineSeconds": 3600,
                "template": {
                    "metadata": {"labels": LABELS},
                    "spec": {
                        "serviceAccountName": "gpupaas-workload",
                        "automountServiceAccountToken": False,
                        "enableServiceLinks": False,
                        "priorityClassName": "gpupaas-training",
                        "terminationGracePeriodSeconds": 120,
                        "restartPolicy": "Never",
                        "securityContext": POD_SECURITY,
                        "affinity": {
                            "nodeAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": {
                                    "nodeSelectorTerms": [
                                        {
                                            "matchExpressions": [
                                                {
                                                    "key": "nvidia.com/gpu.product",
                                                    "operator": "In",
                                                    "values": ["NVIDIA-H100-80GB-HBM3"],
                                                }
                                            ],
                                            "matchFields": [
                                                {
                                                    "key": "metadata.name",
                                                    "operator": "In",
                                                    "values": ["h100-0"],
                                                }
                                            ],
                                        }
                                    ]
                                }
                            }
                        },
                        "containers": [
                            {
                                "name": "main",
                                "image": "nvcr.io/nvidia/pytorch:24.12-py3",
                                "imagePullPolicy": "IfNotPresent",
                                "resources": {
                                    "requests": {
                                        "cpu": "8000m",
                                        "memory": "65536Mi",
                                        "nvidia.com/gpu": "2",
                                    },
                                    "limits": {
                                        "cpu": "8000m",
                                        "memory": "65536Mi",
                                        "nvidia.com/gpu": "2",
                                    },
                                },
                                "securityContext": CONTAINER_SECURITY,
                                "env": [{"name": "EPOCHS", "value": "3"}, *JOB_ENV],
                                "command": ["torchrun"],
                                "args": ["train.py"],
                                "volumeMounts": [TEAM_MOUNT],
                            }
                        ],
                        "volumes": [TEAM_VOLUME],
                    },
                },
            },
        }
    ]


def _node_term(node: str, product: str = "NVIDIA-H100-80GB-HBM3") -> dict[str, Any]:
    return {
        "matchExpressions": [
            {"key": "nvidia.com/gpu.product", "operator": "In", "values": [product]}
        ],
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}],
    }


COMPLETION_INDEX = "metadata.annotations['batch.kubernetes.io/job-completion-index']"


def test_multi_node_job_is_indexed_with_headless_service_and_rendezvous_env() -> None:
    objs = m.training_manifests(
        spec(replicas=3, placement=tuple(m.ReplicaPlacement(f"h100-{i}") for i in (2, 0, 1)))
    )
    service, peers, job = objs
    assert service == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "wl-42", "namespace": "team-vision", "labels": LABELS},
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {"gpupaas.io/workload-id": "42"},
            "ports": [{"name": "rendezvous", "port": 29500}],
        },
    }
    assert peers == {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "wl-42-peers", "namespace": "team-vision", "labels": LABELS},
        "spec": {
            "podSelector": {"matchLabels": {"gpupaas.io/workload-id": "42"}},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [
                {"from": [{"podSelector": {"matchLabels": {"gpupaas.io/workload-id": "42"}}}]}
            ],
            "egress": [
                {"to": [{"podSelector": {"matchLabels": {"gpupaas.io/workload-id": "42"}}}]}
            ],
        },
    }
    assert job == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "wl-42", "namespace": "team-vision", "labels": LABELS},
        "spec": {
            # The gang fails whole at once; the platform restarts it whole (retries there).
            "backoffLimit": 0,
            "completions": 3,
            "parallelism": 3,
            "podFailurePolicy": {
                "rules": [
                    {"action": "FailJob", "onPodConditions": [{"type": "DisruptionTarget"}]},
                    {
                        "action": "FailJob",
                        "onExitCodes": {
                            "containerName": "main",
                            "operator": "NotIn",
                            "values": [0],
                        },
                    },
                ]
            },
            "completionMode": "Indexed",
            "activeDeadlineSeconds": 3600,
            "template": {
                "metadata": {"labels": LABELS},
                "spec": {
                    "serviceAccountName": "gpupaas-workload",
                    "automountServiceAccountToken": False,
                    "enableServiceLinks": False,
                    "priorityClassName": "gpupaas-training",
                    "terminationGracePeriodSeconds": 120,
                    "restartPolicy": "Never",
                    "securityContext": POD_SECURITY,
                    # Only on the nodes the scheduler chose (one term each: a field selector
                    # takes one value), and one replica per node.
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    _node_term("h100-0"),
                                    _node_term("h100-1"),
                                    _node_term("h100-2"),
                                ]
                            }
                        },
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "labelSelector": {
                                        "matchLabels": {"gpupaas.io/workload-id": "42"}
                                    },
                                    "topologyKey": "kubernetes.io/hostname",
                                }
                            ]
                        },
                    },
                    "containers": [
                        {
                            "name": "main",
                            "image": "nvcr.io/nvidia/pytorch:24.12-py3",
                            "imagePullPolicy": "IfNotPresent",
                            "resources": {
                                "requests": {
                                    "cpu": "8000m",
                                    "memory": "65536Mi",
                                    "nvidia.com/gpu": "2",
                                },
                                "limits": {
                                    "cpu": "8000m",
                                    "memory": "65536Mi",
                                    "nvidia.com/gpu": "2",
                                },
                            },
                            "securityContext": CONTAINER_SECURITY,
                            "env": [
                                {"name": "EPOCHS", "value": "3"},
                                *JOB_ENV,
                                # Pod 0's stable name: <job>-<index> under the headless
                                # Service that is the pods' subdomain.
                                {"name": "MASTER_ADDR", "value": "wl-42-0.wl-42"},
                                {"name": "MASTER_PORT", "value": "29500"},
                                {"name": "NNODES", "value": "3"},
                                {"name": "NPROC_PER_NODE", "value": "2"},
                                {"name": "PET_MASTER_ADDR", "value": "wl-42-0.wl-42"},
                                {"name": "PET_MASTER_PORT", "value": "29500"},
                                {"name": "PET_NNODES", "value": "3"},
                                {"name": "PET_NPROC_PER_NODE", "value": "2"},
                                {"name": "WORLD_SIZE", "value": "6"},
                                {
                                    "name": "NODE_RANK",
                                    "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}},
                                },
                                {
                                    "name": "PET_NODE_RANK",
                                    "valueFrom": {"fieldRef": {"fieldPath": COMPLETION_INDEX}},
                                },
                            ],
                            "command": ["torchrun"],
                            "args": ["train.py"],
                            "ports": [{"name": "rendezvous", "containerPort": 29500}],
                            "volumeMounts": [TEAM_MOUNT],
                        }
                    ],
                    "volumes": [TEAM_VOLUME],
                    "subdomain": "wl-42",
                },
            },
        },
    }


def test_gang_placed_on_fewer_nodes_than_replicas_is_refused_not_left_unschedulable() -> None:
    stacked = spec(replicas=2, placement=(m.ReplicaPlacement("h100-0"),) * 2)
    with pytest.raises(m.ManifestError, match="2 replicas must run on 2 different nodes"):
        m.training_manifests(stacked)


def test_gang_of_a_shared_class_asks_whole_gpus_by_the_class_resource_names() -> None:
    hami = m.training_manifests(
        spec(
            replicas=2,
            gpus_per_replica=1,
            sharing_mode="hami",
            gpu_product="NVIDIA-A100-SXM4-80GB",
            gpu_limits={
                "nvidia.com/gpu": "1",
                "nvidia.com/gpumem": "81920",
                "nvidia.com/gpucores": "100",
            },
            placement=(
                m.ReplicaPlacement("hami-0", ("GPU-aaa",)),
                m.ReplicaPlacement("hami-1", ("GPU-bbb",)),
            ),
        )
    )[-1]
    template = hami["spec"]["template"]
    # One template for every index: each pod finds its own node's GPU among the UUIDs.
    assert template["metadata"]["annotations"] == {"nvidia.com/use-gpuuuid": "GPU-aaa,GPU-bbb"}
    affinity = template["spec"]["affinity"]["nodeAffinity"]
    assert affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"] == [
        _node_term("hami-0", "NVIDIA-A100-SXM4-80GB"),
        _node_term("hami-1", "NVIDIA-A100-SXM4-80GB"),
    ]
    assert template["spec"]["containers"][0]["resources"]["limits"] == {
        "cpu": "8000m",
        "memory": "65536Mi",
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "81920",
        "nvidia.com/gpucores": "100",
    }
    timeslice = m.training_manifests(
        spec(
            replicas=2,
            gpus_per_replica=1,
            sharing_mode="timeslice",
            gpu_product="NVIDIA-L40S",
            gpu_limits={"nvidia.com/gpu.shared": "4"},
            placement=(m.ReplicaPlacement("l40s-ts-0"), m.ReplicaPlacement("l40s-ts-1")),
        )
    )[-1]
    container = timeslice["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu.shared"] == "4"
    assert {"name": "WORLD_SIZE", "value": "2"} in container["env"]


def test_sweep_is_one_batch_job_per_grid_point() -> None:
    jobs = m.sweep_manifests(
        spec(
            kind="sweep",
            priority_class="batch",
            replicas=4,
            sweep_grid={"lr": ["0.1", "0.01"], "batch-size": ["32", "64"]},
            placement=tuple(m.ReplicaPlacement(f"n{i}") for i in range(4)),
        )
    )
    assert [j["metadata"]["name"] for j in jobs] == ["wl-42-0", "wl-42-1", "wl-42-2", "wl-42-3"]
    envs = [
        {e["name"]: e["value"] for e in j["spec"]["template"]["spec"]["containers"][0]["env"]}
        for j in jobs
    ]
    assert [(e["SWEEP_BATCH_SIZE"], e["SWEEP_LR"], e["SWEEP_INDEX"]) for e in envs] == [
        ("32", "0.1", "0"),
        ("32", "0.01", "1"),
        ("64", "0.1", "2"),
        ("64", "0.01", "3"),
    ]
    pods = [j["spec"]["template"]["spec"] for j in jobs]
    assert {p["priorityClassName"] for p in pods} == {"gpupaas-batch"}
    assert [
        p["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
            "nodeSelectorTerms"
        ][0]["matchFields"][0]["values"]
        for p in pods
    ] == [["n0"], ["n1"], ["n2"], ["n3"]]
    assert jobs[2]["metadata"]["labels"]["gpupaas.io/sweep-point"] == "2"


def test_notebook_has_statefulset_service_ingress_and_token_from_secret() -> None:
    nb = spec(
        kind="notebook",
        priority_class="development",
        command=(),
        args=(),
        env={},
        read_only_root=True,
        home_claim="home-alice",
        notebook_host="gpu.example.com",
    )
    statefulset, service, ingress = m.notebook_manifests(nb)
    container = statefulset["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["start-notebook.py"]
    assert container["args"] == [
        "--ServerApp.base_url=/notebooks/team-vision/42/",
        "--ServerApp.ip=0.0.0.0",
        "--ServerApp.port=8888",
    ]
    assert container["env"] == [
        {
            "name": "JUPYTER_TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "wl-42-token", "key": "token"}},
        }
    ]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["volumeMounts"] == [
        {"name": "home", "mountPath": "/home/jovyan/work"},
        TEAM_MOUNT,
        {"name": "tmp", "mountPath": "/tmp"},  # noqa: S108
    ]
    pod = statefulset["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "home", "persistentVolumeClaim": {"claimName": "home-alice"}},
        TEAM_VOLUME,
        {"name": "tmp", "emptyDir": {}},
    ]
    assert pod["automountServiceAccountToken"] is False
    assert pod["restartPolicy"] == "Always"
    assert statefulset["spec"]["replicas"] == 1
    assert service["spec"] == {
        "selector": {"gpupaas.io/workload-id": "42"},
        "ports": [{"name": "http", "port": 80, "targetPort": 8888}],
    }
    assert ingress["spec"] == {
        "rules": [
            {
                "host": "gpu.example.com",
                "http": {
                    "paths": [
                        {
                            "path": "/notebooks/team-vision/42/",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "wl-42", "port": {"number": 80}}},
                        }
                    ]
                },
            }
        ]
    }
    secret = m.notebook_token_secret(spec=nb, token="t0k")
    assert secret["stringData"] == {"token": "t0k"}
    assert "t0k" not in str(m.notebook_manifests(nb))


def test_notebook_ingress_is_guarded_by_the_portal_on_its_own_host_with_tls() -> None:
    nb = spec(
        kind="notebook",
        priority_class="development",
        command=(),
        args=(),
        env={},
        home_claim="home-u1",
        notebook_host="wl-42.nb.gpu.example.com",
        notebook_tls_secret="nb-wildcard-cert",
        notebook_auth_url="http://gpupaas-web.gpupaas.svc/notebooks/auth/",
        notebook_signin_url="https://gpu.example.com/notebooks/signin/",
    )
    ingress = m.notebook_manifests(nb)[2]
    assert ingress["metadata"]["annotations"] == {
        "nginx.ingress.kubernetes.io/auth-url": "http://gpupaas-web.gpupaas.svc/notebooks/auth/",
        "nginx.ingress.kubernetes.io/auth-signin": "https://gpu.example.com/notebooks/signin/",
        "nginx.ingress.kubernetes.io/auth-method": "GET",
        "nginx.ingress.kubernetes.io/auth-response-headers": "Authorization",
    }
    assert ingress["spec"] == {
        "rules": [
            {
                "host": "wl-42.nb.gpu.example.com",
                "http": {
                    "paths": [
                        {
                            "path": "/notebooks/team-vision/42/",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "wl-42", "port": {"number": 80}}},
                        }
                    ]
                },
            }
        ],
        "tls": [{"hosts": ["wl-42.nb.gpu.example.com"], "secretName": "nb-wildcard-cert"}],
    }


def test_notebook_ingress_without_tls_secret_or_host_has_no_tls() -> None:
    base = {"kind": "notebook", "priority_class": "development", "home_claim": "home-u1"}
    shared = m.notebook_manifests(spec(**base, notebook_host="nb.example.com"))[2]
    assert "tls" not in shared["spec"]
    assert "annotations" not in shared["metadata"]
    hostless = m.notebook_manifests(spec(**base, notebook_tls_secret="cert"))[2]
    assert "tls" not in hostless["spec"]


def test_hami_placement_pins_gpu_uuids() -> None:
    job = m.training_manifests(
        spec(
            sharing_mode="hami",
            gpu_limits={
                "nvidia.com/gpu": "1",
                "nvidia.com/gpumem": "20480",
                "nvidia.com/gpucores": "25",
            },
            placement=(m.ReplicaPlacement("hami-0", ("GPU-aaa",)),),
        )
    )[0]
    assert job["spec"]["template"]["metadata"]["annotations"] == {
        "nvidia.com/use-gpuuuid": "GPU-aaa"
    }


def test_priority_classes_express_the_design_table() -> None:
    classes = {p["metadata"]["name"]: p for p in m.priority_class_manifests()}
    assert {n: (p["value"], p["preemptionPolicy"]) for n, p in classes.items()} == {
        "gpupaas-production": (1_000_000, "PreemptLowerPriority"),
        "gpupaas-training": (100_000, "PreemptLowerPriority"),
        "gpupaas-development": (10_000, "PreemptLowerPriority"),
        "gpupaas-batch": (1_000, "Never"),
    }
    assert all(p["globalDefault"] is False for p in classes.values())


def test_quota_hard_per_gpu_resource() -> None:
    hard = m.quota_hard(
        [
            m.TeamQuotaSpec(H100, 16000),
            m.TeamQuotaSpec(L40S, 2000),
            m.TeamQuotaSpec(
                GpuClassSpec("A100-MIG", "mig", 81920, "x", mig_profiles=("1g.10gb", "3g.40gb")),
                4000,
            ),
            m.TeamQuotaSpec(A100_HAMI, 2000),
        ]
    )
    assert hard == {
        "requests.nvidia.com/gpu": "36",  # 16 whole H100 + 2 GPUs × 10 HAMi vGPUs
        "requests.nvidia.com/gpu.shared": "8",
        "requests.nvidia.com/gpumem": "163840",
        "requests.nvidia.com/mig-1g.10gb": "32",
        "requests.nvidia.com/mig-3g.40gb": "8",
    }
    assert A100_MIG.sharing_mode == "mig"


def test_quota_hard_caps_the_devices_claims_of_dra_classes_may_request() -> None:
    """A DRA class's limit becomes the devices its claims may request of the driver's device
    class (the key the API server's claim quota counts, without "requests."); classes of one
    device class add up, and device-plugin classes keep their extended resources beside."""
    dra = {"allocation_mode": "dra"}
    hard = m.quota_hard(
        [
            m.TeamQuotaSpec(replace(H100, **dra), 4000),  # 4 whole GPUs
            m.TeamQuotaSpec(replace(L40S, **dra), 2000),  # 2 GPUs × 4 slices: 8 claims
            m.TeamQuotaSpec(
                GpuClassSpec(
                    "A100-MIG",
                    "mig",
                    81920,
                    "x",
                    mig_profiles=("1g.10gb", "3g.40gb"),
                    allocation_mode="dra",
                ),
                2000,
            ),
            m.TeamQuotaSpec(A100_HAMI, 1000),
        ]
    )
    assert hard == {
        "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "12",
        "mig.nvidia.com.deviceclass.resource.k8s.io/devices": "16",  # 2 GPUs of 1g.10gb
        "requests.nvidia.com/gpu": "10",  # the HAMi class, still on the device plugin
        "requests.nvidia.com/gpumem": "81920",
    }


def test_team_namespace_is_restricted_with_default_deny() -> None:
    objs = m.team_manifests(
        m.TeamSpec(slug="vision", namespace="team-vision", quotas=(m.TeamQuotaSpec(H100, 8000),))
    )
    kinds = [(o["kind"], o["metadata"]["name"]) for o in objs]
    assert kinds == [
        ("Namespace", "team-vision"),
        ("ServiceAccount", "gpupaas-workload"),
        ("ResourceQuota", "gpupaas-quota"),
        ("LimitRange", "gpupaas-defaults"),
        ("NetworkPolicy", "default-deny"),
        ("NetworkPolicy", "allow-dns"),
        ("NetworkPolicy", "allow-notebook-ingress"),
    ]
    namespace, account, quota, _, deny, _, notebook_in = objs
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    assert account["automountServiceAccountToken"] is False
    assert quota["spec"] == {"hard": {"requests.nvidia.com/gpu": "8"}}
    assert deny["spec"] == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    assert notebook_in["spec"]["ingress"][0]["ports"] == [{"protocol": "TCP", "port": 8888}]


def test_placement_indices_become_gpu_uuids_for_pinning() -> None:
    from apps.orchestration.selectors import placement_replicas

    placement = {"cluster": "sim", "replicas": [{"node": "hami-0", "gpus": [2], "units": 250}]}
    assert placement_replicas(placement, {"hami-0": ["GPU-a", "GPU-b", "GPU-c"]}) == (
        m.ReplicaPlacement("hami-0", ("GPU-c",)),
    )
    assert placement_replicas(placement) == (m.ReplicaPlacement("hami-0"),)
    assert placement_replicas({}) == ()


def test_a_requeued_job_keeps_its_directories_and_knows_its_restart_count() -> None:
    (job,) = m.training_manifests(spec(restart_count=1, grace_seconds=7))
    pod = job["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env["GPUPAAS_RESTART_COUNT"] == "1"
    assert env["GPUPAAS_CHECKPOINT_DIR"] == "/team/checkpoints/wl-42"
    assert pod["terminationGracePeriodSeconds"] == 7


def test_each_point_of_a_sweep_has_its_own_checkpoint_directory() -> None:
    jobs = m.sweep_manifests(
        spec(kind="sweep", priority_class="batch", sweep_grid={"lr": ["1", "2"]}, placement=())
    )
    dirs = [
        {e["name"]: e.get("value") for e in j["spec"]["template"]["spec"]["containers"][0]["env"]}[
            "GPUPAAS_CHECKPOINT_DIR"
        ]
        for j in jobs
    ]
    assert dirs == ["/team/checkpoints/wl-42/point-0", "/team/checkpoints/wl-42/point-1"]
    # The grace period of the batch class, as the scheduler waits for it.
    assert {j["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] for j in jobs} == {30}


def test_a_trial_of_a_sweep_is_one_job_that_knows_its_index() -> None:
    (job,) = m.sweep_manifests(
        spec(
            kind="sweep",
            priority_class="batch",
            sweep_grid={"lr": ["0.01"], "bs": ["64"]},
            sweep_index=7,
            placement=(),
        )
    )
    env = {
        e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert (env["SWEEP_INDEX"], env["SWEEP_LR"], env["SWEEP_BS"]) == ("7", "0.01", "64")
    assert job["metadata"]["labels"]["gpupaas.io/sweep-point"] == "0"


def test_least_privileged_portal_binds_its_team_role_right_after_the_namespace() -> None:
    team = m.TeamSpec(
        slug="vision",
        namespace="team-vision",
        portal_service_account="platform/gpupaas",
        portal_team_role="gpupaas-team",
    )
    manifests = m.team_manifests(team)
    assert [x["kind"] for x in manifests[:3]] == ["Namespace", "RoleBinding", "ServiceAccount"]
    binding = manifests[1]
    assert binding["metadata"]["namespace"] == "team-vision"
    assert binding["metadata"]["labels"][m.LABEL_MANAGED_BY] == m.MANAGED_BY
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "gpupaas-team",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "gpupaas", "namespace": "platform"}
    ]


def test_portal_with_an_admin_kubeconfig_binds_nothing() -> None:
    manifests = m.team_manifests(m.TeamSpec(slug="vision", namespace="team-vision"))
    assert "RoleBinding" not in {x["kind"] for x in manifests}
