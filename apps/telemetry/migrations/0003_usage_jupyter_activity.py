from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("telemetry", "0002_usage_unmeasured_and_exporter_host_names"),
    ]

    operations = [
        migrations.AddField(
            model_name="workloadusage",
            name="jupyter_last_activity",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="workloadusage",
            name="jupyter_checked_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
