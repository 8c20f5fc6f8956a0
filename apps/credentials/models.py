from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from apps.accounts.models import Team
from apps.credentials import core


class Secret(models.Model):
    """A credential's metadata. The values live only in the Kubernetes Secret named
    ``k8s_name`` in the team namespace: never in this table, never in the audit trail.

    ``owner`` None: a team secret (leads and admins write it, members use it); else a personal
    secret (only its owner writes and uses it)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="secrets")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="personal_secrets",
    )
    name = models.CharField(max_length=core.MAX_NAME_LENGTH)
    keys = models.JSONField(default=list, blank=True, help_text="Key names; never values.")
    # Chosen once when created and stored; readers never recompute it.
    k8s_name = models.CharField(max_length=63, unique=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["team", "name"],
                condition=models.Q(owner__isnull=True),
                name="credentials_team_secret_name_unique",
            ),
            models.UniqueConstraint(
                fields=["team", "owner", "name"],
                condition=models.Q(owner__isnull=False),
                name="credentials_personal_secret_name_unique",
            ),
        ]
        ordering = ["team_id", "name", "owner_id"]

    def __str__(self) -> str:
        return f"{self.name} ({self.scope}) in {self.team_id}"

    @property
    def scope(self) -> str:
        return core.SCOPE_TEAM if self.owner_id is None else core.SCOPE_PERSONAL

    @property
    def owner_username(self) -> str | None:
        return self.owner.get_username() if self.owner is not None else None
