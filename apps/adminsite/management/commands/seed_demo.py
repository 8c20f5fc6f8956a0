"""Demo data for the README's run command: teams, users, GPU classes, quotas, images.

Idempotent: running it twice changes nothing the second time. The GPU classes match the
default kubesim topology (deploy/kubesim/topologies/default.yaml).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.management.base import BaseCommand
from django.db import transaction

from apps.accounts.models import Membership, Team, User
from apps.accounts.services import team_create
from apps.catalog.models import Cluster, GpuClass, Image
from apps.common import taskqueue
from apps.quotas.models import TeamQuota
from apps.quotas.services import team_quota_set

TEAMS = [
    {
        "name": "Vision",
        "slug": "vision",
        "idp_group": "gpupaas-team-vision",
        "idp_lead_group": "gpupaas-team-vision-leads",
    },
    {
        "name": "NLP",
        "slug": "nlp",
        "idp_group": "gpupaas-team-nlp",
        "idp_lead_group": "gpupaas-team-nlp-leads",
    },
]

USERS: list[dict[str, Any]] = [
    {"username": "alice", "display_name": "Alice Martin", "teams": {"vision": "lead"}},
    {"username": "bob", "display_name": "Bob Chen", "teams": {"vision": "member", "nlp": "member"}},
    {"username": "carol", "display_name": "Carol Okafor", "teams": {"nlp": "lead"}},
    {"username": "dave", "display_name": "Dave Novak", "teams": {}},
    {"username": "admin", "display_name": "Platform Admin", "teams": {}, "staff": True},
]

GPU_CLASSES: list[dict[str, Any]] = [
    {
        # The real nodes of the development cluster (deploy/kubesim/topologies/realnodes.yaml),
        # whose pods really run.
        "name": "L4-24GB",
        "product_label": "NVIDIA-L4",
        "memory_mib": 23034,
        "sharing_mode": "whole",
        "hourly_cost": Decimal("0.8000"),
        "capacity_gpus": 6,
    },
    {
        "name": "H100-80GB",
        "product_label": "NVIDIA-H100-80GB-HBM3",
        "memory_mib": 81559,
        "sharing_mode": "whole",
        "hourly_cost": Decimal("4.5000"),
        "capacity_gpus": 32,
    },
    {
        "name": "A100-80GB-MIG",
        "product_label": "NVIDIA-A100-SXM4-80GB",
        "memory_mib": 81920,
        "sharing_mode": "mig",
        "mig_profiles": ["1g.10gb", "2g.20gb", "3g.40gb"],
        "hourly_cost": Decimal("2.9000"),
        "capacity_gpus": 16,
    },
    {
        "name": "L40S-48GB",
        "product_label": "NVIDIA-L40S",
        "memory_mib": 46068,
        "sharing_mode": "timeslice",
        "timeslice_replicas": 4,
        "hourly_cost": Decimal("1.8000"),
        "capacity_gpus": 8,
    },
    {
        "name": "A100-80GB-vGPU",
        "product_label": "NVIDIA-A100-SXM4-80GB",
        "memory_mib": 81920,
        "sharing_mode": "hami",
        "hami_split_count": 10,
        "hourly_cost": Decimal("2.9000"),
        "capacity_gpus": 8,
    },
]

IMAGES = [
    {
        "name": "PyTorch notebook",
        "reference": "quay.io/jupyter/pytorch-notebook:cuda12-2024-12-02",
        "kind": "notebook",
        "description": "JupyterLab with PyTorch and CUDA 12.",
    },
    {
        "name": "PyTorch training",
        "reference": "nvcr.io/nvidia/pytorch:24.12-py3",
        "kind": "training",
        "description": "NGC PyTorch with NCCL, for torchrun jobs.",
    },
    {
        "name": "vLLM server",
        "reference": "docker.io/vllm/vllm-openai:v0.6.4",
        "kind": "serving",
        "description": "OpenAI-compatible LLM server; health on /health, metrics on /metrics.",
    },
    {
        "name": "Triton inference server",
        "reference": "nvcr.io/nvidia/tritonserver:24.12-py3",
        "kind": "serving",
        "description": "NVIDIA Triton; health on /v2/health/ready, metrics on :8002/metrics.",
    },
    {
        "name": "Text Generation Inference",
        "reference": "ghcr.io/huggingface/text-generation-inference:2.4.1",
        "kind": "serving",
        "description": "Hugging Face TGI; health on /health, metrics on /metrics.",
    },
]

# team slug → class name → (guaranteed, limit) in milli-GPU
QUOTAS = {
    "vision": {
        "L4-24GB": (2000, 4000),
        "H100-80GB": (8000, 16000),
        "A100-80GB-MIG": (4000, 8000),
        "L40S-48GB": (2000, 4000),
    },
    "nlp": {
        "L4-24GB": (2000, 4000),
        "H100-80GB": (16000, 24000),
        "A100-80GB-vGPU": (4000, 8000),
        "L40S-48GB": (2000, 4000),
    },
}


class Command(BaseCommand):
    help = "Create the demo teams, users, GPU classes, images and quotas (idempotent)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--kubeconfig", default="", help="Register a cluster using this file.")

    @transaction.atomic
    def handle(self, *args: Any, **options: Any) -> None:
        teams = {}
        for team_spec in TEAMS:
            team = Team.objects.filter(slug=team_spec["slug"]).first() or team_create(
                actor=None, **team_spec
            )
            teams[team.slug] = team
        for spec in USERS:
            user, created = User.objects.get_or_create(
                username=spec["username"],
                defaults={
                    "display_name": spec["display_name"],
                    "email": f"{spec['username']}@example.com",
                    "is_staff": bool(spec.get("staff")),
                    "is_superuser": bool(spec.get("staff")),
                },
            )
            if created:
                # Demo users sign in through the development login only, never by password.
                user.set_unusable_password()
                user.save(update_fields=["password"])
            for slug, role in spec["teams"].items():
                Membership.objects.update_or_create(
                    user=user, team=teams[slug], defaults={"role": role}
                )
        classes = {}
        for spec in GPU_CLASSES:
            name = spec["name"]
            gpu_class, _ = GpuClass.objects.update_or_create(
                name=name, defaults={k: v for k, v in spec.items() if k != "name"}
            )
            gpu_class.full_clean()
            classes[name] = gpu_class
        for spec in IMAGES:
            image, _ = Image.objects.update_or_create(
                name=spec["name"], defaults={k: v for k, v in spec.items() if k != "name"}
            )
            image.full_clean()
        for slug, per_class in QUOTAS.items():
            for class_name, (guaranteed, limit) in per_class.items():
                if TeamQuota.objects.filter(
                    team=teams[slug],
                    gpu_class=classes[class_name],
                    guaranteed_milli=guaranteed,
                    limit_milli=limit,
                ).exists():
                    continue
                team_quota_set(
                    actor=None,
                    team=teams[slug],
                    gpu_class=classes[class_name],
                    guaranteed_milli=guaranteed,
                    limit_milli=limit,
                )
        if options["kubeconfig"]:
            cluster, _ = Cluster.objects.update_or_create(
                name="local",
                defaults={
                    "connection": Cluster.Connection.KUBECONFIG,
                    "kubeconfig_path": options["kubeconfig"],
                    "role": Cluster.Role.HUB,
                },
            )
            taskqueue.CLUSTER_SETUP.on_commit(cluster.pk)
        self.stdout.write(
            self.style.SUCCESS(
                f"Demo data ready: {len(teams)} teams, {len(USERS)} users, "
                f"{len(classes)} GPU classes."
            )
        )
