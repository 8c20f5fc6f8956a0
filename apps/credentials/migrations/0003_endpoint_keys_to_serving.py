"""Endpoint keys are serving's (apps.serving.models.EndpointKey): the model leaves this app's
state only; its table, credentials_endpointkey, stays as it is and serving's 0002 takes it."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("credentials", "0002_endpoint_keys"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="EndpointKey")],
            database_operations=[],
        ),
    ]
