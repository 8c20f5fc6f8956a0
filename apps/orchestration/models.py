"""What orchestration remembers of the names it gave in the cluster."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from apps.accounts.models import Team


class HomeVolume(models.Model):
    """A person's home volume (PersistentVolumeClaim) in a team's namespace.

    The claim's name is chosen once, keyed by the user's id (``home-u<id>``), stored here and
    never recomputed: volumes made before this table keep the name they had (see migration
    0002), and no two people ever share one, whatever their usernames.
    """

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="home_volumes"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="home_volumes")
    claim = models.CharField(max_length=63)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="home_volume_one_per_team"),
            models.UniqueConstraint(fields=["team", "claim"], name="home_volume_claim_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.claim} in {self.team.namespace}"
