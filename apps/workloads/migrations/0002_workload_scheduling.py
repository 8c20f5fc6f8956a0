from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("workloads", "0001_initial"),
    ]

    operations = [
        migrations.AddField(
            model_name="workload",
            name="borrowed",
            field=models.BooleanField(
                default=False,
                help_text="Runs above the team's guarantee on idle capacity; reclaimable.",
            ),
        ),
        migrations.AddField(
            model_name="workload",
            name="queue_position",
            field=models.PositiveIntegerField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="workload",
            name="estimated_start_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="workload",
            name="scheduling_advice",
            field=models.JSONField(blank=True, default=list),
        ),
        migrations.AddField(
            model_name="workload",
            name="preempted_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
