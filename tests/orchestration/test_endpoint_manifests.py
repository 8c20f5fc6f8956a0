"""An endpoint's objects, built as plain dicts and checked against literal expectations."""

from __future__ import annotations

from typing import Any

from apps.orchestration import manifests as m
from tests.orchestration.test_manifests import spec

LABELS = {
    "app.kubernetes.io/managed-by": "gpupaas",
    "gpupaas.io/workload-id": "42",
    "gpupaas.io/team": "vision",
    "gpupaas.io/kind": "inference",
}


def endpoint(**kw: Any) -> m.WorkloadSpec:
    shape = m.EndpointShape(
        port=8080,
        health_path="/v2/health/ready",
        model_uri="s3://models/llama",
        model_secret="cred-t-7",
        model_secret_keys=("AWS_ACCESS_KEY_ID",),
        revision=3,
        progress_deadline_seconds=600,
        **kw,
    )
    return spec(
        kind="inference",
        priority_class="production",
        replicas=2,
        gpus_per_replica=1,
        gpu_limits={"nvidia.com/gpu": "1"},
        command=(),
        args=(),
        max_runtime_seconds=None,
        endpoint=shape,
    )


def test_a_deployment_that_never_takes_a_ready_replica_away() -> None:
    deployment, service, allow = m.workload_manifests(endpoint())
    assert deployment["kind"] == "Deployment"
    assert deployment["metadata"] == {"name": "wl-42", "namespace": "team-vision", "labels": LABELS}
    dspec = deployment["spec"]
    assert dspec["replicas"] == 2
    assert dspec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    assert (dspec["progressDeadlineSeconds"], dspec["minReadySeconds"]) == (600, 10)
    template = dspec["template"]
    assert template["metadata"]["annotations"] == {"gpupaas.io/revision": "3"}
    pod = template["spec"]
    assert pod["priorityClassName"] == "gpupaas-production"
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["restartPolicy"] == "Always"
    # Any node of the class: pinning nodes would roll out on every scale.
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [
            {
                "matchExpressions": [
                    {
                        "key": "nvidia.com/gpu.product",
                        "operator": "In",
                        "values": ["NVIDIA-H100-80GB-HBM3"],
                    }
                ]
            }
        ]
    }
    (server,) = pod["containers"]
    probe = {"httpGet": {"path": "/v2/health/ready", "port": 8080}}
    assert server["readinessProbe"] == {**probe, "periodSeconds": 5, "failureThreshold": 3}
    assert server["livenessProbe"] == {**probe, "periodSeconds": 10, "failureThreshold": 3}
    assert server["startupProbe"] == {**probe, "periodSeconds": 10, "failureThreshold": 60}
    # Told to stop, it serves 5 s more while the endpoints stop sending it calls.
    assert server["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
    assert pod["terminationGracePeriodSeconds"] == 60
    assert server["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    assert server["securityContext"]["allowPrivilegeEscalation"] is False
    env = server["env"]
    assert {"name": "GPUPAAS_MODEL_URI", "value": "s3://models/llama"} in env
    assert {
        "name": "GPUPAAS_MODEL_AWS_ACCESS_KEY_ID",
        "valueFrom": {"secretKeyRef": {"name": "cred-t-7", "key": "AWS_ACCESS_KEY_ID"}},
    } in env
    assert service["spec"] == {
        "selector": {"gpupaas.io/workload-id": "42"},
        "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
    }
    assert allow == {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "wl-42-ingress", "namespace": "team-vision", "labels": LABELS},
        "spec": {
            "podSelector": {"matchLabels": {"gpupaas.io/workload-id": "42"}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {
                            "namespaceSelector": {
                                "matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}
                            }
                        }
                    ],
                    "ports": [{"protocol": "TCP", "port": 8080}],
                }
            ],
        },
    }


def test_with_a_host_every_call_is_authorised_by_the_portal() -> None:
    *_, ingress = m.workload_manifests(
        endpoint(host="serve.example.com", auth_url="http://portal.svc/endpoints/auth/")
    )
    assert ingress["kind"] == "Ingress"
    assert ingress["metadata"]["annotations"] == {
        "nginx.ingress.kubernetes.io/use-regex": "true",
        "nginx.ingress.kubernetes.io/rewrite-target": "/$2",
        "nginx.ingress.kubernetes.io/auth-url": "http://portal.svc/endpoints/auth/42/",
        "nginx.ingress.kubernetes.io/auth-method": "GET",
    }
    assert ingress["spec"] == {
        "rules": [
            {
                "host": "serve.example.com",
                "http": {
                    "paths": [
                        {
                            "path": "/endpoints/team-vision/42(/|$)(.*)",
                            "pathType": "ImplementationSpecific",
                            "backend": {"service": {"name": "wl-42", "port": {"number": 80}}},
                        }
                    ]
                },
            }
        ]
    }
