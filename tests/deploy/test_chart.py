"""The Helm chart (deploy/helm/gpupaas): lint, render, the cluster's verdict on what it
renders, and what its ServiceAccount may and may not do on the simulated cluster.

helm is built from its Go module on first use (deploy/devtools/helm.py, cached).
"""

from __future__ import annotations

import base64
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kubernetes.config import incluster_config

from apps.orchestration.kube import Kube, api_client_from_config
from deploy.devtools import helm
from deploy.devtools import kubesim as ks
from tests.plugins.kubesim import (
    admin_kubeconfig,
    apply_manifests,
    install_chart_rbac,
    render_chart,
    service_account_kubeconfig,
)

CHART = helm.CHART_DIR
VALUE_SETS = {
    "default": [],
    "production": ["-f", str(CHART / "ci" / "production-values.yaml")],
    "minimal": ["-f", str(CHART / "ci" / "minimal-values.yaml")],
    # A cluster that still runs ingress-nginx: the portal's Ingress, and Ingresses for the
    # workloads, in place of Gateway API.
    "ingress": [
        "-f",
        str(CHART / "ci" / "production-values.yaml"),
        "-f",
        str(CHART / "ci" / "ingress-values.yaml"),
    ],
}
PORTAL = "system:serviceaccount:gpupaas:gpupaas"


@pytest.fixture(scope="module")
def helm_binary() -> Path:
    try:
        return helm.ensure_binary()
    except ks.ToolchainMissingError as exc:
        pytest.fail(f"helm cannot be built: {exc}", pytrace=False)


def _pod_specs(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {
        f"{d['kind']}/{d['metadata']['name']}": d["spec"]["template"]["spec"]
        for d in docs
        if d["kind"] in {"Deployment", "Job"}
    }


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_lint_passes(helm_binary: Path, value_set: str) -> None:
    result = subprocess.run(
        [str(helm_binary), "lint", "--strict", str(CHART), *VALUE_SETS[value_set]],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_rendered_pods_are_locked_down(helm_binary: Path, value_set: str) -> None:
    docs = render_chart("gpupaas", "-n", "gpupaas", *VALUE_SETS[value_set])
    pods = _pod_specs(docs)
    assert pods, "no workloads rendered"
    talks_to_kubernetes = {"web", "stream", "worker", "watch"}
    for name, spec in pods.items():
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        component = name.rsplit("-", 1)[-1]
        assert spec["automountServiceAccountToken"] is (component in talks_to_kubernetes), name
        for container in spec["containers"]:
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] is True, name
            assert security["allowPrivilegeEscalation"] is False, name
            assert security["capabilities"] == {"drop": ["ALL"]}, name
            env = {e["name"]: e for e in container["env"]}
            for secret in ("SECRET_KEY", "DATABASE_URL", "REDIS_URL"):
                assert "secretKeyRef" in env[secret]["valueFrom"], (name, secret)
    migrate = next(d for d in docs if d["kind"] == "Job")
    assert migrate["metadata"]["annotations"]["helm.sh/hook"] == "pre-install,pre-upgrade"


def test_production_values_wire_oidc_prometheus_tls_and_policy(helm_binary: Path) -> None:
    docs = render_chart("gpupaas", "-n", "gpupaas", *VALUE_SETS["production"])
    web = next(
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-web")
    )
    env = {e["name"]: e for e in web["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["PROMETHEUS_URL"]["value"] == "http://prometheus-operated.monitoring.svc:9090"
    assert env["OIDC_RP_CLIENT_SECRET"]["valueFrom"]["secretKeyRef"]["name"] == "gpupaas-oidc"
    assert env["K8S_PORTAL_SERVICE_ACCOUNT"]["value"] == "gpupaas/gpupaas"
    (gateway,) = [d for d in docs if d["kind"] == "Gateway"]
    assert {
        ref["name"]
        for listener in gateway["spec"]["listeners"]
        for ref in listener["tls"]["certificateRefs"]
    } == {"gpu-corp-example-com-tls", "gpu-corp-workloads-tls"}
    for name, spec in _pod_specs(docs).items():
        mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
        if name.rsplit("-", 1)[-1] in {"web", "stream", "worker", "watch"}:
            assert mounts["clusters"]["readOnly"] is True, name
            assert {
                "name": "clusters",
                "secret": {"secretName": "gpupaas-remote-clusters", "defaultMode": 0o440},
            } in spec["volumes"]
        else:  # beat and the migrations reach no cluster
            assert "clusters" not in mounts, name
    policy = next(d for d in docs if d["kind"] == "NetworkPolicy")
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}


def test_database_pool_size_reaches_the_web_and_stream_pods_only_when_set(
    helm_binary: Path,
) -> None:
    def pool_env(*values: str) -> dict[str, str | None]:
        docs = render_chart("gpupaas", "-n", "gpupaas", *VALUE_SETS["production"], *values)
        found: dict[str, str | None] = {}
        for d in docs:
            if d["kind"] != "Deployment":
                continue
            env = {
                e["name"]: e.get("value")
                for e in d["spec"]["template"]["spec"]["containers"][0]["env"]
            }
            found[d["metadata"]["name"].rsplit("-", 1)[-1]] = env.get("DATABASE_POOL_SIZE")
        return found

    unset = pool_env()
    assert unset["web"] is None and unset["stream"] is None  # the server's own default (8)
    sized = pool_env("--set", "web.dbPoolSize=4", "--set", "stream.dbPoolSize=0")
    assert sized["web"] == "4"
    assert sized["stream"] == "0"  # no pool (behind PgBouncer): 0 is a value, not "unset"
    assert all(v is None for k, v in sized.items() if k not in {"web", "stream"})


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        (["--set", "host=Not A Host"], "host"),
        (["--set", "database.existingSecret="], "existingSecret"),
        (["--set", "oidc.issuer=https://login.example.com"], "clientId"),
        (["--set", "settings.SECRET_KEY=x"], "SECRET_KEY"),
        (["--set", "webb.replicas=2"], "webb"),
        (["--set", "podSecurityContext.runAsNonRoot=false"], "runAsNonRoot"),
    ],
)
def test_schema_refuses_bad_values(helm_binary: Path, values: list[str], complaint: str) -> None:
    result = subprocess.run(
        [str(helm_binary), "template", "gpupaas", str(CHART), *values],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode != 0
    assert "values don't meet the specifications of the schema" in result.stderr
    assert complaint in result.stderr


@pytest.mark.kubesim
@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_cluster_accepts_rendered_manifests(
    helm_binary: Path, value_set: str, kube_api_client: client.ApiClient, k8s_namespace: str
) -> None:
    """Server-side apply with dryRun=All: schema validation, defaulting and admission of
    every object, nothing stored."""
    # The chart's Gateway goes to a namespace of its own; here, the test's.
    where = ["--set", f"gateway.namespace={k8s_namespace}"] if value_set == "production" else []
    docs = render_chart("gpupaas", "-n", k8s_namespace, *VALUE_SETS[value_set], *where)
    answers = apply_manifests(kube_api_client, docs, dry_run=True)
    assert [a["kind"] for a in answers] == [d["kind"] for d in docs]
    kinds = {d["kind"] for d in docs}
    assert {"Deployment", "Job", "ClusterRole", "ServiceAccount"} <= kinds


def test_gateway_values_route_the_portal_and_the_workloads_through_the_gateway(
    helm_binary: Path,
) -> None:
    docs = render_chart("gpupaas", "-n", "gpupaas", *VALUE_SETS["production"])
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    assert "Ingress" not in by_kind
    (gateway,) = by_kind["Gateway"]
    listeners = {item["name"]: item for item in gateway["spec"]["listeners"]}
    assert set(listeners) == {"portal", "workloads"}
    assert all(item["protocol"] == "HTTPS" for item in listeners.values())
    assert listeners["portal"]["allowedRoutes"]["namespaces"]["selector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "gpupaas"}
    }
    assert listeners["workloads"]["allowedRoutes"]["namespaces"]["selector"] == {
        "matchLabels": {"app.kubernetes.io/managed-by": "gpupaas"}
    }
    (route,) = by_kind["HTTPRoute"]
    assert route["spec"]["parentRefs"][0]["sectionName"] == "portal"
    rules = route["spec"]["rules"]
    assert rules[-1]["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    streams = [r for r in rules if r["matches"][0]["path"]["type"] == "RegularExpression"]
    # Followed logs: to the stream pods, with a timeout above the longest stream (7,200 s).
    (stream,) = streams
    assert stream["backendRefs"][0]["name"].endswith("-stream")
    assert stream["timeouts"]["request"] == "7260s"
    (web,) = [d for d in by_kind["Deployment"] if d["metadata"]["name"].endswith("-web")]
    env = {
        e["name"]: e.get("value") for e in web["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["TRAFFIC_API"] == "gateway-api"
    assert (env["GATEWAY_NAME"], env["GATEWAY_NAMESPACE"]) == ("gpupaas", "gpupaas-gateway")
    assert env["GATEWAY_LISTENER"] == "workloads"
    assert env["GATEWAY_PROXY_NAMESPACE"] == "gpupaas-gateway"
    (policy,) = by_kind["NetworkPolicy"]
    allowed = [
        peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
        for rule in policy["spec"]["ingress"]
        for peer in rule["from"]
    ]
    assert "gpupaas-gateway" in allowed
    assert "ingress-nginx" not in allowed


def test_default_values_attach_to_an_existing_gateway(helm_binary: Path) -> None:
    """Gateway API by default: the portal's HTTPRoute on the platform's Gateway (made by the
    platform team, not by the chart), no Ingress, and the portal told to publish HTTPRoutes."""
    docs = render_chart("gpupaas", "-n", "gpupaas")
    kinds = {d["kind"] for d in docs}
    assert "Ingress" not in kinds and "Gateway" not in kinds
    (route,) = [d for d in docs if d["kind"] == "HTTPRoute"]
    (parent,) = route["spec"]["parentRefs"]
    assert (parent["kind"], parent["namespace"], parent["name"]) == (
        "Gateway",
        "gpupaas-gateway",
        "gpupaas",
    )
    assert "sectionName" not in parent  # whichever listener admits it
    (web,) = [
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-web")
    ]
    env = {
        e["name"]: e.get("value") for e in web["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["TRAFFIC_API"] == "gateway-api"
    assert env["GATEWAY_IMPLEMENTATION"] == "traefik"


def test_ingress_values_publish_ingresses_for_clusters_that_still_run_ingress_nginx(
    helm_binary: Path,
) -> None:
    docs = render_chart("gpupaas", "-n", "gpupaas", *VALUE_SETS["ingress"])
    assert not [d for d in docs if d["kind"] in {"Gateway", "HTTPRoute"}]
    ingresses = [d for d in docs if d["kind"] == "Ingress"]
    assert {i["spec"]["tls"][0]["secretName"] for i in ingresses} == {"gpu-corp-example-com-tls"}
    stream = next(i for i in ingresses if i["metadata"]["name"].endswith("-stream"))
    assert (
        stream["metadata"]["annotations"]["nginx.ingress.kubernetes.io/proxy-read-timeout"]
        == "7260"
    )
    (web,) = [
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"].endswith("-web")
    ]
    env = {
        e["name"]: e.get("value") for e in web["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["TRAFFIC_API"] == "ingress"
    (policy,) = [d for d in docs if d["kind"] == "NetworkPolicy"]
    allowed = [
        peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
        for rule in policy["spec"]["ingress"]
        for peer in rule["from"]
    ]
    assert "ingress-nginx" in allowed and "gpupaas-gateway" not in allowed


# --- the ServiceAccount's rights on the cluster -------------------------------------------


@pytest.fixture(scope="module")
def portal_api(
    kubesim: ks.Kubesim, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[client.ApiClient]:
    """An API client holding the chart's ServiceAccount token."""
    install_chart_rbac(kubesim)
    path = service_account_kubeconfig(
        kubesim, "gpupaas", "gpupaas", tmp_path_factory.mktemp("sa") / "portal.kubeconfig"
    )
    api = config.new_client_from_config(config_file=str(path))
    yield api
    api.close()


def _can(
    api: client.ApiClient,
    verb: str,
    resource: str,
    namespace: str = "",
    group: str = "",
    name: str = "",
) -> bool:
    review = client.V1SelfSubjectAccessReview(
        spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(
                verb=verb, resource=resource, namespace=namespace, group=group, name=name
            )
        )
    )
    answer = client.AuthorizationV1Api(api).create_self_subject_access_review(review)
    return bool(answer.status.allowed)


def _refused(call: Any) -> ApiException:
    with pytest.raises(ApiException) as caught:
        call()
    return caught.value


@pytest.mark.kubesim
def test_service_account_is_who_the_token_says(portal_api: client.ApiClient) -> None:
    review = client.AuthenticationV1Api(portal_api).create_self_subject_review(
        client.V1SelfSubjectReview()
    )
    assert review.status.user_info.username == PORTAL


@pytest.mark.kubesim
def test_service_account_may_do_its_cluster_work(portal_api: client.ApiClient) -> None:
    assert _can(portal_api, "create", "namespaces")
    assert _can(portal_api, "list", "nodes")
    assert _can(portal_api, "create", "priorityclasses", group="scheduling.k8s.io")
    assert _can(portal_api, "list", "pods")  # the status sweep, cluster-wide
    assert _can(portal_api, "list", "jobs", group="batch")
    # the watch process follows pods, Jobs and GPU nodes; it changes none of them
    assert _can(portal_api, "watch", "pods") and _can(portal_api, "watch", "nodes")
    assert _can(portal_api, "watch", "jobs", group="batch")
    assert not _can(portal_api, "watch", "secrets")
    # ... and nothing namespaced beyond reading until a team namespace binds it
    assert not _can(portal_api, "create", "jobs", "default", "batch")
    assert not _can(portal_api, "get", "pods", "default")


@pytest.mark.kubesim
def test_service_account_cannot_read_secrets_outside_team_namespaces(
    portal_api: client.ApiClient, kube_api_client: client.ApiClient
) -> None:
    admin = client.CoreV1Api(kube_api_client)
    plain = admin.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(generate_name="t-plain-"))
    ).metadata.name
    core = client.CoreV1Api(portal_api)
    try:
        for namespace in ("kube-system", "default", "gpupaas", plain):
            assert _refused(lambda ns=namespace: core.list_namespaced_secret(ns)).status == 403
            assert not _can(portal_api, "get", "secrets", namespace)
        assert _refused(core.list_secret_for_all_namespaces).status == 403
        assert _refused(lambda: core.read_namespaced_secret("x", "kube-system")).status == 403
    finally:
        admin.delete_namespace(plain)


@pytest.mark.kubesim
def test_service_account_cannot_create_pods_in_kube_system(portal_api: client.ApiClient) -> None:
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="intruder"),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox")]),
    )
    core = client.CoreV1Api(portal_api)
    assert _refused(lambda: core.create_namespaced_pod("kube-system", pod)).status == 403
    assert not _can(portal_api, "create", "pods", "kube-system")
    assert not _can(portal_api, "create", "pods/exec", "kube-system")


@pytest.mark.kubesim
def test_service_account_cannot_escalate(portal_api: client.ApiClient, kubesim: ks.Kubesim) -> None:
    rbac = client.RbacAuthorizationV1Api(portal_api)
    admin_role = client.V1RoleRef(
        api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="cluster-admin"
    )
    team_role = client.V1RoleRef(
        api_group="rbac.authorization.k8s.io", kind="ClusterRole", name="gpupaas-team"
    )
    me = [client.RbacV1Subject(kind="ServiceAccount", name="gpupaas", namespace="gpupaas")]
    crb = client.V1ClusterRoleBinding(
        metadata=client.V1ObjectMeta(name="gpupaas-escalate"), role_ref=admin_role, subjects=me
    )
    assert _refused(lambda: rbac.create_cluster_role_binding(crb)).status == 403
    # cluster-admin in a namespace of its own making: RBAC refuses to bind what it lacks
    core = client.CoreV1Api(portal_api)
    core.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(
                generate_name="t-escalate-", labels={"app.kubernetes.io/managed-by": "gpupaas"}
            )
        )
    )
    own = next(
        ns.metadata.name
        for ns in core.list_namespace(label_selector="app.kubernetes.io/managed-by=gpupaas").items
        if ns.metadata.name.startswith("t-escalate-")
    )
    as_admin = config.new_client_from_config(config_file=str(admin_kubeconfig(kubesim)))
    try:
        binding = client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="x"), role_ref=admin_role, subjects=me
        )
        assert _refused(lambda: rbac.create_namespaced_role_binding(own, binding)).status == 403
        # its team role outside the namespaces it manages: the admission policy refuses
        team_binding = client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="x"), role_ref=team_role, subjects=me
        )
        refused = _refused(lambda: rbac.create_namespaced_role_binding("kube-system", team_binding))
        assert refused.status in (403, 422) and "namespaces it manages" in str(refused.body)
        # ... nor to someone else, even in its own namespace
        other = client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="y"),
            role_ref=team_role,
            subjects=[
                client.RbacV1Subject(kind="ServiceAccount", name="default", namespace="kube-system")
            ],
        )
        refused = _refused(lambda: rbac.create_namespaced_role_binding(own, other))
        assert refused.status in (403, 422)
        # and it cannot make kube-system look like one of its namespaces
        mark = {"metadata": {"labels": {"app.kubernetes.io/managed-by": "gpupaas"}}}
        refused = _refused(lambda: core.patch_namespace("kube-system", mark))
        assert refused.status in (403, 422) and "namespaces it manages" in str(refused.body)
        # nor edit its own roles, nor impersonate
        patch = {"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}
        assert _refused(lambda: rbac.patch_cluster_role("gpupaas-team", patch)).status == 403
        assert not _can(portal_api, "escalate", "clusterroles", group="rbac.authorization.k8s.io")
        assert not _can(
            portal_api,
            "bind",
            "clusterroles",
            group="rbac.authorization.k8s.io",
            name="cluster-admin",
        )
        assert not _can(portal_api, "impersonate", "users")
        assert not _can(portal_api, "impersonate", "serviceaccounts", "kube-system")
        # the binding it is meant to make, it can
        ok = rbac.create_namespaced_role_binding(
            own,
            client.V1RoleBinding(
                metadata=client.V1ObjectMeta(name="gpupaas-portal"), role_ref=team_role, subjects=me
            ),
        )
        assert ok.metadata.name == "gpupaas-portal"
    finally:
        client.CoreV1Api(as_admin).delete_namespace(own)
        as_admin.close()


@pytest.mark.kubesim
def test_service_account_cannot_delete_or_change_nodes(
    portal_api: client.ApiClient, kubesim: ks.Kubesim
) -> None:
    core = client.CoreV1Api(portal_api)
    node = kubesim.nodes[0]
    assert core.read_node(node).metadata.name == node
    assert _refused(lambda: core.delete_node(node)).status == 403
    assert _refused(lambda: core.patch_node(node, {"spec": {"unschedulable": True}})).status == 403
    assert not _can(portal_api, "delete", "nodes")
    assert not _can(portal_api, "create", "pods/eviction", "kube-system")
    assert not _can(portal_api, "delete", "namespaces")


@pytest.mark.kubesim
def test_in_cluster_connection_uses_the_pods_service_account(
    portal_api: client.ApiClient,
    kubesim: ks.Kubesim,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A cluster registered "in-cluster" (no kubeconfig) talks to the API server with what
    Kubernetes mounts into the pod: the token and CA files and the KUBERNETES_SERVICE_*
    variables. Here they are made from the chart's ServiceAccount and kubesim's CA."""
    portal = yaml.safe_load(
        service_account_kubeconfig(kubesim, "gpupaas", "gpupaas", tmp_path / "k").read_text()
    )
    token_file, ca_file = tmp_path / "token", tmp_path / "ca.crt"
    token_file.write_text(portal["users"][0]["user"]["token"])
    ca_file.write_bytes(
        base64.b64decode(portal["clusters"][0]["cluster"]["certificate-authority-data"])
    )
    monkeypatch.setattr(incluster_config, "SERVICE_TOKEN_FILENAME", str(token_file))
    monkeypatch.setattr(incluster_config, "SERVICE_CERT_FILENAME", str(ca_file))
    host, port = kubesim.server.removeprefix("https://").rsplit(":", 1)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", port)
    monkeypatch.delenv("KUBECONFIG", raising=False)

    kube = Kube(api_client_from_config(kubeconfig=None))
    nodes = kube.list_objects("v1", "Node")
    assert {n["metadata"]["name"] for n in nodes} == set(kubesim.nodes)
    assert not kube.allowed("list", "secrets", namespace="kube-system")
    who = client.AuthenticationV1Api(kube.api_client).create_self_subject_review(
        client.V1SelfSubjectReview()
    )
    assert who.status.user_info.username == PORTAL


def test_rbac_grants_no_wildcards_and_no_cluster_wide_writes_or_secrets(helm_binary: Path) -> None:
    docs = render_chart("gpupaas", "-n", "gpupaas", "--show-only", "templates/rbac.yaml")
    roles = {d["metadata"]["name"]: d["rules"] for d in docs if d["kind"] == "ClusterRole"}
    assert set(roles) == {"gpupaas-cluster", "gpupaas-team"}
    for rules in roles.values():
        for rule in rules:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule.get(field, []), rule
            assert not {"escalate", "impersonate", "deletecollection"} & set(rule["verbs"])
    # DeviceTaintRules are cluster-scoped: the node health pass taints faulty GPUs' devices.
    cluster_scoped = {"namespaces", "priorityclasses", "nodes", "clusterroles", "devicetaintrules"}
    writes = {"create", "update", "patch", "delete", "bind"}
    for rule in roles["gpupaas-cluster"]:
        assert "secrets" not in rule["resources"]
        namespaced = set(rule["resources"]) - cluster_scoped
        if namespaced and set(rule["verbs"]) & writes:
            assert namespaced == {"rolebindings"}, rule  # narrowed by the admission policy
        if "clusterroles" in rule["resources"]:
            assert rule["resourceNames"] == ["gpupaas-team"] and rule["verbs"] == ["bind"]
    bindings = [d for d in docs if d["kind"] == "ClusterRoleBinding"]
    assert [b["roleRef"]["name"] for b in bindings] == ["gpupaas-cluster"]
