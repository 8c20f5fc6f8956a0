from __future__ import annotations

from typing import Any

import django.core.validators
from django.db import migrations, models


def charge_existing(apps: Any, schema_editor: Any) -> None:
    """Charge every recorded workload what its class grants one replica (rules.charge_of)."""
    from apps.catalog.core import GpuClassSpec
    from apps.catalog.resources import ResourceMappingError, charged_milli

    Workload = apps.get_model("workloads", "Workload")
    specs: dict[int, GpuClassSpec] = {}
    changed = []
    for w in Workload.objects.select_related("gpu_class").iterator(chunk_size=1000):
        c = w.gpu_class
        spec = specs.get(c.pk)
        if spec is None:
            spec = specs[c.pk] = GpuClassSpec(
                name=c.name,
                sharing_mode=c.sharing_mode,
                memory_mib=c.memory_mib,
                timeslice_replicas=c.timeslice_replicas,
                mig_profiles=tuple(c.mig_profiles or ()),
                hami_split_count=c.hami_split_count,
            )
        try:
            w.charged_milli = charged_milli(w.gpu_milli, spec)
        except ResourceMappingError:
            w.charged_milli = w.gpu_milli
        changed.append(w)
        if len(changed) >= 1000:
            Workload.objects.bulk_update(changed, ["charged_milli"])
            changed = []
    if changed:
        Workload.objects.bulk_update(changed, ["charged_milli"])


class Migration(migrations.Migration):
    dependencies = [("workloads", "0006_workload_live_indexes")]

    operations = [
        migrations.AddField(
            model_name="workload",
            name="charged_milli",
            field=models.PositiveIntegerField(
                null=True, verbose_name="charged per replica (milli-GPU)"
            ),
        ),
        migrations.RunPython(charge_existing, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="workload",
            name="charged_milli",
            field=models.PositiveIntegerField(
                validators=[django.core.validators.MinValueValidator(1)],
                verbose_name="charged per replica (milli-GPU)",
            ),
        ),
    ]
