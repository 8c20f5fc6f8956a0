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
    KUEUE_VERSION,
    PRODUCT,
    SUBMITTERS,
    CpuMeter,
    JobSpec,
    PodWatch,
    Run,
    kueue_cache,
    wait_done,
)


def kueue_binary(version: str = KUEUE_VERSION) -> Path:
    cache = kueue_cache(version)
    binary = cache / "kueue"
    if not binary.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["go", "install", f"sigs.k8s.io/kueue/cmd/kueue@{version}"],
            check=True,
            env={**os.environ, "GOBIN": str(cache), "GOTOOLCHAIN": "local"},
        )
    return binary


def kueue_crds(version: str = KUEUE_VERSION) -> list[dict[str, Any]]:
    import yaml

    modcache = subprocess.run(
        ["go", "env", "GOMODCACHE"], check=True, capture_output=True, text=True
    ).stdout.strip()
    base = Path(modcache) / f"sigs.k8s.io/kueue@{version}/config/components/crd/bases"
    crds = []
    for path in sorted(base.glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        crd["spec"].pop("conversion", None)  # its webhook Service exists only in a cluster
        crds.append(crd)
    return crds


CERT_DIRS = (Path("/etc/kueue/metrics/certs"), Path("/visibility"))


@contextmanager
def kueue_running(
    kubeconfig: Path, workdir: Path, version: str = KUEUE_VERSION
) -> Iterator[subprocess.Popen[bytes]]:
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
        [str(kueue_binary(version)), f"--config={config}", f"--kubeconfig={kubeconfig}"],
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


def run_kueue(
    args: argparse.Namespace, jobs: list[JobSpec], kubesim: Any, workdir: Path, meter: CpuMeter
) -> Run:
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
    crds = kueue_crds(args.kueue_version)
    for crd in crds:
        ext.create_custom_resource_definition(crd)
    for crd in crds:
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
    with kueue_running(kubesim.kubeconfig, workdir, args.kueue_version) as manager:
        meter.add_root(manager.pid, "Kueue manager")
        # The cohort holds the GPUs no team is guaranteed, as gpupaas lends its unassigned
        # capacity: every ClusterQueue may borrow them (up to its borrowing limit), not only
        # what other teams were guaranteed and do not use.
        unassigned = max(0, args.nodes * 8 - args.teams * args.guarantee)
        custom.create_cluster_custom_object(
            group, version, "cohorts",
            {
                "apiVersion": f"{group}/{version}", "kind": "Cohort",
                "metadata": {"name": "gpupaas"},
                "spec": {
                    "resourceGroups": [{
                        "coveredResources": ["cpu", "memory", "nvidia.com/gpu"],
                        "flavors": [{
                            "name": "h100",
                            "resources": [
                                {"name": "cpu", "nominalQuota": "0"},
                                {"name": "memory", "nominalQuota": "0"},
                                {"name": "nvidia.com/gpu", "nominalQuota": str(unassigned)},
                            ],
                        }],
                    }],
                },
            },
        )  # fmt: skip
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
        view = PodWatch(Kube(api), run)
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
        run.cpu = meter.stop()  # while Kueue's manager still runs
        view.stop.set()
    run.notes.extend(log_errors(workdir / "kueue.log"))
    return run


def log_errors(log: Path, keep: Path | None = None) -> list[str]:
    """Kueue's error lines, counted by message (its log is JSON lines; the expected one about
    ProvisioningRequest, which needs a cluster autoscaler, is left out), the log kept under
    var/bench/ for reading."""
    import json
    from collections import Counter

    if not log.is_file():
        return []
    keep = keep or Path(__file__).resolve().parents[2] / "var" / "bench" / "kueue.log"
    keep.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(log, keep)
    counts: Counter[str] = Counter()
    for line in log.read_text(errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if not isinstance(entry, dict) or entry.get("level") != "error":
            continue
        text = f"{entry.get('msg', '')}: {str(entry.get('error', ''))[:160]}"
        if "ProvisioningRequest" in text or "provisioningrequest" in text.lower():
            continue
        counts[text] += 1
    return [f"kueue log error ×{n}: {text}" for text, n in counts.most_common(5)] + (
        [f"kueue log: {sum(counts.values())} error lines in all (kept in {keep})"]
        if counts
        else [f"kueue log: no error lines (kept in {keep})"]
    )
