import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def start_the_group_clock(apps, schema_editor):
    """Users who signed in through the provider before re-checks existed: their memberships
    count as confirmed now, so they lapse one interval after this migration unless confirmed."""
    User = apps.get_model("accounts", "User")
    User.objects.filter(oidc_identities__isnull=False, idp_checked_at__isnull=True).update(
        idp_checked_at=django.utils.timezone.now()
    )


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0002_apitoken_parent"),
    ]

    operations = [
        migrations.AddField(
            model_name="oidcidentity",
            name="refresh_token",
            field=models.TextField(blank=True, default="", editable=False),
        ),
        migrations.AddField(
            model_name="user",
            name="idp_checked_at",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
        migrations.CreateModel(
            name="UserSession",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("session_key", models.CharField(max_length=40, unique=True)),
                ("sid", models.CharField(blank=True, db_index=True, max_length=255)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "identity",
                    models.ForeignKey(
                        null=True,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="portal_sessions",
                        to="accounts.oidcidentity",
                    ),
                ),
                (
                    "user",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="portal_sessions",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
        ),
        migrations.RunPython(start_the_group_clock, migrations.RunPython.noop),
    ]
