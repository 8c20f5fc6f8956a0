"""Kueue beside it: the binary and its CRDs, the controller running against the simulated
cluster, and the same Jobs through its queues."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.admission.jobs import (
    CLASS_VALUE,
    KUEUE_CACHE,
    KUEUE_VERSION,
    PRODUCT,
    SUBMITTERS,
    JobSpec,
    PodWatch,
    Run,
    cpu_seconds,
    wait_done,
)


def kueue_binary() -> Path:
    binary = KUEUE_CACHE / "kueue"
    if not binary.exists():
        KUEUE_CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["go", "install", f"sigs.k8s.io/kueue/cmd/kueue@{KUEUE_VERSION}"],
            check=True,
            env={**os.environ, "GOBIN": str(KUEUE_CACHE), "GOTOOLCHAIN": "local"},
        )
    return binary


def kueue_crds() -> list[dict[str, Any]]:
    import yaml

    modcache = subprocess.run(
        ["go", "env", "GOMODCACHE"], check=True, capture_output=True, text=True
    ).stdout.strip()
    base = Path(modcache) / f"sigs.k8s.io/kueue@{KUEUE_VERSION}/config/components/crd/bases"
    crds = []
    for path in sorted(base.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        crd["spec"].pop("conversion", None)  # its webhook Service exists only in a cluster
        crds.append(crd)
    return crds


CERT_DIRS = (Path("/etc/kueue/metrics/certs"), Path("/visibility"))


@contextmanager
def kueue_running(kubeconfig: Path, workdir: Path) -> Iterator[subprocess.Popen[bytes]]:
    certs = workdir / "certs"
    certs.mkdir()
    subprocess.run(
        [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
            "-subj", "/CN=localhost",
            "-keyout", str(certs / "tls.key"), "-out", str(certs / "tls.crt"),
        ],
        check=True,
        capture_output=True,
    )  # fmt: skip
    made = []
    for directory in CERT_DIRS:
        if not directory.exists():
            # the outermost folder we create, so that removing it leaves nothing behind
            top = directory
            while not top.parent.exists():
                top = top.parent
            directory.mkdir(parents=True)
            made.append(top)
        for name in ("tls.crt", "tls.key"):
            shutil.copy(certs / name, directory / name)
    config = workdir / "kueue.yaml"
    config.write_text(
        f"""apiVersion: config.kueue.x-k8s.io/v1beta2
kind: Configuration
namespace: kueue-system
health: {{healthProbeBindAddress: 127.0.0.1:18081}}
metrics: {{bindAddress: "0"}}
webhook: {{port: 19443, host: 127.0.0.1, certDir: {certs}}}
leaderElection: {{leaderElect: false}}
internalCertManagement: {{enable: false}}
integrations: {{frameworks: ["batch/job"]}}
clientConnection: {{qps: 500, burst: 1000}}
"""
    )
    log = (workdir / "kueue.log").open("wb")
    proc = subprocess.Popen(
        [str(kueue_binary()), f"--config={config}", f"--kubeconfig={kubeconfig}"],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.time() + 120
        while True:
            if proc.poll() is not None:
                tail = (workdir / "kueue.log").read_text()[-3000:]
                raise RuntimeError(f"kueue exited with {proc.returncode}:\n{tail}")
            try:
                with urllib.request.urlopen("http://127.0.0.1:18081/readyz", timeout=2) as r:
                    if r.read().strip() == b"ok":
                        break
            except OSError:
                pass
            if time.time() > deadline:
                raise RuntimeError("kueue not ready after 120 s")
            time.sleep(1)
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
        for directory in CERT_DIRS:
            for name in ("tls.crt", "tls.key"):
                (directory / name).unlink(missing_ok=True)
        for directory in made:
            shutil.rmtree(directory, ignore_errors=True)


def run_kueue(args: argparse.Namespace, jobs: list[JobSpec], kubesim: Any, workdir: Path) -> Run:
    from kubernetes import client as k8s
    from kubernetes import config as k8s_config

    from apps.orchestration.kube import Kube

    run = Run("kueue", capacity=args.nodes * 8, run_seconds=args.run_seconds)
    api = k8s_config.new_client_from_config(config_file=str(kubesim.kubeconfig))
    api.configuration.connection_pool_maxsize = 16
    core = k8s.CoreV1Api(api)
    ext = k8s.ApiextensionsV1Api(api)
    custom = k8s.CustomObjectsApi(api)
    batch = k8s.BatchV1Api(api)
    for crd in kueue_crds():
        ext.create_custom_resource_definition(crd)
    for crd in kueue_crds():
        name = crd["metadata"]["name"]
        for _ in range(120):
            status = ext.read_custom_resource_definition(name).status
            if any(c.type == "Established" and c.status == "True" for c in status.conditions or []):
                break
            time.sleep(0.5)
    core.create_namespace({"metadata": {"name": "kueue-system"}})
    namespaces = [f"team-{t}" for t in range(args.teams)]
    for ns in namespaces:
        core.create_namespace({"metadata": {"name": ns}})
    group, version = "kueue.x-k8s.io", "v1beta2"
    with kueue_running(kubesim.kubeconfig, workdir):
        custom.create_cluster_custom_object(
            group, version, "resourceflavors",
            {
                "apiVersion": f"{group}/{version}", "kind": "ResourceFlavor",
                "metadata": {"name": "h100"},
                "spec": {"nodeLabels": {"nvidia.com/gpu.product": PRODUCT}},
            },
        )  # fmt: skip
        for name, value in CLASS_VALUE.items():
            custom.create_cluster_custom_object(
                group, version, "workloadpriorityclasses",
                {
                    "apiVersion": f"{group}/{version}", "kind": "WorkloadPriorityClass",
                    "metadata": {"name": name}, "value": value,
                },
            )  # fmt: skip
        for t, ns in enumerate(namespaces):
            custom.create_cluster_custom_object(
                group, version, "clusterqueues",
                {
                    "apiVersion": f"{group}/{version}", "kind": "ClusterQueue",
                    "metadata": {"name": f"cq-{t}"},
                    "spec": {
                        "cohortName": "gpupaas",
                        "namespaceSelector": {},
                        "preemption": {
                            "withinClusterQueue": "LowerPriority",
                            "reclaimWithinCohort": "Any",
                        },
                        "resourceGroups": [{
                            "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                            "flavors": [{
                                "name": "h100",
                                "resources": [
                                    {"name": "cpu", "nominalQuota": "100000"},
                                    {"name": "memory", "nominalQuota": "100000Gi"},
                                    {
                                        "name": "nvidia.com/gpu",
                                        "nominalQuota": str(args.guarantee),
                                        "borrowingLimit": str(args.limit - args.guarantee),
                                    },
                                ],
                            }],
                        }],
                    },
                },
            )  # fmt: skip
            custom.create_namespaced_custom_object(
                group, version, ns, "localqueues",
                {
                    "apiVersion": f"{group}/{version}", "kind": "LocalQueue",
                    "metadata": {"name": "lq"}, "spec": {"clusterQueue": f"cq-{t}"},
                },
            )  # fmt: skip
        time.sleep(3)  # the queues become active
        view = PodWatch(Kube(api), run, jobs=True)
        view.start()

        def submit(spec: JobSpec) -> None:
            name = f"job-{spec.index}"
            body = {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kueue.x-k8s.io/queue-name": "lq",
                        "kueue.x-k8s.io/priority-class": spec.priority,
                    },
                },
                "spec": {
                    "suspend": True,
                    "backoffLimit": 0,
                    "template": {
                        "metadata": {
                            "annotations": {"kubesim.io/run-duration": f"{args.run_seconds}s"}
                        },
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{
                                "name": "main",
                                "image": "pytorch",
                                "command": ["python", "train.py"],
                                "resources": {
                                    "requests": {
                                        "cpu": "2", "memory": "8Gi",
                                        "nvidia.com/gpu": str(spec.gpus),
                                    },
                                    "limits": {"nvidia.com/gpu": str(spec.gpus)},
                                },
                            }],
                        },
                    },
                },
            }  # fmt: skip
            t0 = time.time()
            try:
                batch.create_namespaced_job(namespaces[spec.team], body)
            except Exception as exc:
                run.notes.append(f"submit {name}: {exc}")
                return
            run.submitted[name] = t0
            run.klass[name], run.team[name], run.gpus[name] = spec.priority, spec.team, spec.gpus

        with ThreadPoolExecutor(SUBMITTERS) as pool:
            list(pool.map(submit, jobs))
        run.submit_done = time.time()
        run.allocation = view.allocation()
        wait_done(run, len(run.submitted))
        run.cpu = cpu_seconds()
        view.stop.set()
    return run
