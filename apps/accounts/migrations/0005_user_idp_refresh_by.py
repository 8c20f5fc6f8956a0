from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0004_team_may_burst"),
    ]

    operations = [
        migrations.AddField(
            model_name="user",
            name="idp_refresh_by",
            field=models.DateTimeField(blank=True, editable=False, null=True),
        ),
    ]
