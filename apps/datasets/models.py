from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from apps.accounts.models import Team
from apps.credentials.models import Secret
from apps.datasets import core


class Dataset(models.Model):
    """Data registered for a team by a lead or an admin, mounted read-only in the team's
    notebooks and jobs that name it: a volume claim of the team namespace, or an object-store
    prefix (with the keys of a team secret, if one is named)."""

    class Kind(models.TextChoices):
        CLAIM = core.KIND_CLAIM, "Volume claim"
        OBJECT = core.KIND_OBJECT, "Object-store prefix"

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=core.MAX_NAME_LENGTH)
    kind = models.CharField(max_length=8, choices=Kind.choices)
    claim = models.CharField(
        "volume claim", max_length=253, blank=True, help_text="In the team namespace."
    )
    uri = models.CharField("object-store prefix", max_length=core.MAX_URI_LENGTH, blank=True)
    secret = models.ForeignKey(
        Secret,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="datasets",
        help_text="A team secret whose keys the pods get (object-store datasets).",
    )
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="datasets_team_name_unique"),
        ]
        ordering = ["team_id", "name"]

    def __str__(self) -> str:
        return f"{self.name} in {self.team_id}"

    @property
    def mount_path(self) -> str:
        return core.mount_path(self.name)

    @property
    def secret_name(self) -> str:
        return self.secret.name if self.secret is not None else ""

    @property
    def secret_k8s_name(self) -> str:
        return self.secret.k8s_name if self.secret is not None else ""

    @property
    def secret_keys(self) -> list[str]:
        return list(self.secret.keys) if self.secret is not None else []
