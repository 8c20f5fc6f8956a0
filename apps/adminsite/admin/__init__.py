"""Every registration of the Django admin; Django's autodiscovery imports this package."""

from apps.adminsite.admin import (
    accounts,
    audit,
    catalog,
    datasets,
    notifications,
    quotas,
    telemetry,
    workloads,
)

__all__ = [
    "accounts",
    "audit",
    "catalog",
    "datasets",
    "notifications",
    "quotas",
    "telemetry",
    "workloads",
]
