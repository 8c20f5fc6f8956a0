"""Register (or update) a cluster from the command line, for installs that are configured
rather than clicked: the Helm chart's migration hook registers the cluster it runs in
(``--in-cluster``), docker-compose the cluster of the mounted kubeconfig.

    python manage.py cluster_register NAME --in-cluster [--role hub]
    python manage.py cluster_register NAME --kubeconfig /etc/gpupaas/kubeconfig [--context C]

Idempotent: an unchanged cluster is left as it is (no audit entry, no setup task).
"""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser

from apps.catalog.models import Cluster
from apps.catalog.services import cluster_save


class Command(BaseCommand):
    help = "Register or update a cluster: in-cluster service account, or a kubeconfig file."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        how = parser.add_mutually_exclusive_group(required=True)
        how.add_argument("--in-cluster", action="store_true")
        how.add_argument("--kubeconfig", metavar="PATH")
        parser.add_argument("--context", default="")
        parser.add_argument("--role", choices=Cluster.Role.values, default=Cluster.Role.HUB)

    def handle(self, *args: Any, **options: Any) -> None:
        wanted = {
            "connection": (
                Cluster.Connection.IN_CLUSTER
                if options["in_cluster"]
                else Cluster.Connection.KUBECONFIG
            ),
            "kubeconfig_path": options["kubeconfig"] or "",
            "kubeconfig_context": options["context"],
            "role": options["role"],
        }
        cluster = Cluster.objects.filter(name=options["name"]).first() or Cluster(
            name=options["name"]
        )
        if cluster.pk and all(getattr(cluster, k) == v for k, v in wanted.items()):
            self.stdout.write(f"cluster {cluster.name}: unchanged")
            return
        for key, value in wanted.items():
            setattr(cluster, key, value)
        try:
            cluster.full_clean()
        except ValidationError as exc:
            raise CommandError(
                "; ".join(m for ms in exc.message_dict.values() for m in ms)
            ) from exc
        created = cluster.pk is None
        cluster_save(actor=None, cluster=cluster)
        self.stdout.write(f"cluster {cluster.name}: {'registered' if created else 'updated'}")
