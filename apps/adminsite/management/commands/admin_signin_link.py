"""Print a one-time link that signs a platform admin in to the Django admin: the break-glass
path for an operator with a shell on the portal, when the identity provider is down or
failed sign-ins (from an address that everyone shares, say) have locked the password form.

    python manage.py admin_signin_link USERNAME

The link works once, within ten minutes, whatever the lockout; it is audited when made and
when used.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.urls import reverse

from apps.accounts.services import ADMIN_SIGNIN_LINK_SECONDS, admin_signin_link_create


class Command(BaseCommand):
    help = "Print a one-time sign-in link to the admin for a staff account (break glass)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            token = admin_signin_link_create(username=options["username"])
        except ValidationError as exc:
            raise CommandError(" ".join(exc.messages)) from None
        path = reverse("admin:signin_link", kwargs={"token": token})
        minutes = ADMIN_SIGNIN_LINK_SECONDS // 60
        self.stdout.write(f"Valid once, for {minutes} minutes:")
        self.stdout.write(f"{settings.PORTAL_URL.rstrip('/')}{path}")
