"""Endpoint keys move here from credentials without a copy: the model enters this app's state
on its existing table (credentials_endpointkey), and its content type follows it, so that
permissions given on it are kept."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models


def content_type_to(app_label: str, from_label: str):
    def move(apps, schema_editor):
        content_type = apps.get_model("contenttypes", "ContentType")
        if not content_type.objects.filter(app_label=app_label, model="endpointkey").exists():
            content_type.objects.filter(app_label=from_label, model="endpointkey").update(
                app_label=app_label
            )

    return move


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0003_sign_in_lifecycle"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("credentials", "0003_endpoint_keys_to_serving"),
        ("serving", "0001_endpoint_samples_and_scaler_state"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="EndpointKey",
                    fields=[
                        (
                            "id",
                            models.BigAutoField(
                                auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                            ),
                        ),
                        ("endpoint_id", models.PositiveIntegerField(db_index=True)),
                        ("name", models.CharField(max_length=100)),
                        (
                            "lookup",
                            models.CharField(help_text="Shown to tell keys apart.", max_length=16),
                        ),
                        ("digest", models.CharField(editable=False, max_length=64, unique=True)),
                        ("created_at", models.DateTimeField(default=django.utils.timezone.now)),
                        ("last_used_at", models.DateTimeField(blank=True, null=True)),
                        ("revoked_at", models.DateTimeField(blank=True, null=True)),
                        (
                            "created_by",
                            models.ForeignKey(
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "team",
                            models.ForeignKey(
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="endpoint_keys",
                                to="accounts.team",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "credentials_endpointkey",
                        "ordering": ["-created_at", "-id"],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(
            content_type_to("serving", "credentials"), content_type_to("credentials", "serving")
        ),
    ]
