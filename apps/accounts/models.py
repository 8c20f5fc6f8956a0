from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models.functions import Lower
from django.utils import timezone

from apps.accounts import core


class User(AbstractUser):
    """A person. Platform roles (admin, operator, auditor, billing) are read by
    ``apps.accounts.selectors.platform_roles``; team roles live in :class:`Membership`."""

    display_name = models.CharField(max_length=150, blank=True)
    # When the identity provider last confirmed the memberships and admin status it gave this
    # user (at sign-in or by a re-check); None when nothing the user holds came from it. They
    # are confirmed again after OIDC_GROUPS_MAX_AGE_SECONDS (apps/accounts/oidc.py).
    idp_checked_at = models.DateTimeField(null=True, blank=True, editable=False)
    # When the provider's refresh token must be used again to stay alive (half its life, from
    # the provider's token response); the next request then re-checks, even before
    # OIDC_GROUPS_MAX_AGE_SECONDS. None when the provider gave no lifetime.
    idp_refresh_by = models.DateTimeField(null=True, blank=True, editable=False)

    def __str__(self) -> str:
        return self.display_name or self.username


class OidcIdentity(models.Model):
    """The identity provider's name for a user: issuer + subject, never the e-mail."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identities"
    )
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)
    last_login_at = models.DateTimeField(null=True, blank=True)
    last_groups = models.JSONField(default=list, blank=True)
    # The provider's refresh token from the last sign-in, used only to ask the provider for the
    # user's current groups (never shown, never sent anywhere but the provider's token endpoint).
    refresh_token = models.TextField(blank=True, default="", editable=False)

    class Meta:
        verbose_name = "OIDC identity"
        verbose_name_plural = "OIDC identities"
        constraints = [
            models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.subject} @ {self.issuer}"


class UserSession(models.Model):
    """A portal session opened by a sign-in through the provider, so that the provider's
    back-channel logout, a deactivation or lapsed groups can end it (Django's sessions cannot
    be looked up by user)."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="portal_sessions"
    )
    identity = models.ForeignKey(
        OidcIdentity, on_delete=models.CASCADE, related_name="portal_sessions", null=True
    )
    session_key = models.CharField(max_length=40, unique=True)
    # The provider's session id (the ID token's ``sid``), empty when it sends none.
    sid = models.CharField(max_length=255, blank=True, db_index=True)
    created_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"session of {self.user} since {self.created_at:%Y-%m-%d %H:%M}"


class Team(models.Model):
    """A group of people sharing GPU quotas; one Kubernetes namespace per team."""

    slug = models.SlugField(max_length=core.SLUG_MAX_LENGTH, unique=True)
    name = models.CharField(max_length=100)
    namespace = models.CharField(max_length=63, unique=True, editable=False)
    idp_group = models.CharField(
        "identity-provider group",
        max_length=200,
        blank=True,
        help_text="Members of this group in the identity provider become team members.",
    )
    idp_lead_group = models.CharField(
        "identity-provider lead group",
        max_length=200,
        blank=True,
        help_text="Members of this group become team leads.",
    )
    allow_burst = models.BooleanField(
        "may burst",
        default=False,
        db_default=False,
        help_text="Work that could not start on the hub and spoke clusters within its class's "
        "burst wait may run on a burst cluster, at that cluster's GPU price.",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(Lower("name"), name="team_name_unique_ci"),
            models.UniqueConstraint(
                fields=["idp_group"],
                condition=~models.Q(idp_group=""),
                name="team_idp_group_unique",
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        MEMBER = core.ROLE_MEMBER, "Member"
        LEAD = core.ROLE_LEAD, "Lead"

    class Source(models.TextChoices):
        IDP = "idp", "Identity provider"
        MANUAL = "manual", "Added by hand"

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.MEMBER)
    source = models.CharField(max_length=10, choices=Source.choices, default=Source.MANUAL)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "team"], name="membership_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.team} ({self.role})"


class ApiToken(models.Model):
    """A personal API token. Only a SHA-256 digest is stored; the secret is shown once."""

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100)
    lookup = models.CharField(max_length=16, unique=True, editable=False)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    scopes = models.JSONField(default=list)
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # The token that created this one through the API, if any: this token never outlives nor
    # out-scopes it, and is revoked with it.
    parent = models.ForeignKey(
        "self",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="children",
        editable=False,
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} (gpp_{self.lookup}_…)"

    @property
    def ends_at(self) -> datetime | None:
        """When it stops working: its expiry, or sooner if API_TOKEN_MAX_LIFETIME_DAYS says so."""
        return core.token_lifetime_end(
            created_at=self.created_at,
            expires_at=self.expires_at,
            max_lifetime_days=settings.API_TOKEN_MAX_LIFETIME_DAYS,
        )

    def is_active(self, now: datetime | None = None) -> bool:
        moment = now or timezone.now()
        if self.revoked_at is not None:
            return False
        ends_at = self.ends_at
        return ends_at is None or ends_at > moment
