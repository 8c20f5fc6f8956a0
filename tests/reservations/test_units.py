"""Reservation units are what the class sells: 0.3-GPU units of a class sold in quarters are
refused with the units it sells, at the service (every door) and on the portal's form."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.exceptions import ValidationError
from django.test import Client
from django.utils import timezone

from apps.catalog.core import GpuClassSpec
from apps.catalog.models import GpuClass
from apps.reservations.core import sold_units, unit_error
from apps.reservations.models import Reservation
from apps.reservations.services import reservation_book
from tests.factories import GpuClassFactory
from tests.plugins.cast import Cast

QUARTERS = GpuClassSpec(
    name="L40S-48GB", sharing_mode="timeslice", memory_mib=46068, timeslice_replicas=4
)
MIG = GpuClassSpec(
    name="A100-80GB-MIG",
    sharing_mode="mig",
    memory_mib=81920,
    mig_profiles=("1g.10gb", "2g.20gb", "3g.40gb", "7g.80gb"),
)


def test_the_units_a_class_sells_are_what_the_cluster_grants() -> None:
    assert sold_units(QUARTERS) == (250, 500, 750, 1000)
    assert sold_units(MIG) == (143, 286, 500, 1000)
    assert sold_units(GpuClassSpec(name="H100", sharing_mode="whole", memory_mib=81920)) == (1000,)
    assert sold_units(GpuClassSpec(name="vGPU", sharing_mode="hami", memory_mib=81920)) == ()


def test_a_unit_the_class_does_not_sell_is_refused_naming_what_it_sells() -> None:
    assert unit_error(300, QUARTERS) == (
        "L40S-48GB is sold in time slices of 1/4 GPU: book units of 0.25, 0.5, 0.75, 1 GPU."
    )
    assert unit_error(250, QUARTERS) is None and unit_error(1000, QUARTERS) is None
    assert "MIG instances (1g.10gb, 2g.20gb, 3g.40gb, 7g.80gb)" in (unit_error(250, MIG) or "")
    assert unit_error(143, MIG) is None


@pytest.mark.django_db
def test_booking_0_3_gpu_units_of_a_class_sold_in_quarters_is_refused(cast: Cast) -> None:
    shared = GpuClassFactory(
        name="L40S-48GB",
        sharing_mode=GpuClass.Sharing.TIMESLICE,
        timeslice_replicas=4,
        capacity_gpus=4,
    )
    start = timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(hours=2)
    with pytest.raises(ValidationError) as info:
        reservation_book(
            actor=cast.lead,
            team=cast.team,
            gpu_class=shared,
            size_milli=300,
            count=4,
            starts_at=start,
            ends_at=start + timedelta(hours=2),
        )
    assert info.value.message_dict == {
        "size": [
            "L40S-48GB is sold in time slices of 1/4 GPU: book units of 0.25, 0.5, 0.75, 1 GPU."
        ]
    }
    assert not Reservation.objects.exists()

    client = Client()
    client.force_login(cast.lead)
    response = client.post(
        "/reservations/",
        {
            "team": cast.team.pk,
            "gpu_class": shared.pk,
            "count": "4",
            "size": "0.3",
            "starts_at": start.strftime("%Y-%m-%dT%H:%M"),
            "ends_at": (start + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M"),
        },
    )
    html = response.content.decode()
    assert "sold in time slices of 1/4 GPU: book units of 0.25, 0.5, 0.75, 1 GPU" in html
    assert not Reservation.objects.exists()
