"""The preemption question: a submission or clone that would preempt running work of the user or
their teammates is answered 409 with ``would_preempt`` unless ``confirm_preemption`` is true."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiResponse,
)

from apps.accounts.models import Team, User
from apps.api.base import Conflict, error_responses
from apps.catalog.models import GpuClass
from apps.scheduling.services import (
    PreemptionVictim,
    teammates_to_preempt,
)
from apps.workloads import rules


class WouldPreempt(Conflict):
    """Submitting now would preempt running work of the person's or their teammates'."""

    default_code = "would_preempt"

    def __init__(self, victims: list[PreemptionVictim]) -> None:
        names = "; ".join(v.describe() for v in victims)
        super().__init__(
            f"To start it now the scheduler would preempt: {names}. Submit again with "
            "confirm_preemption true to go ahead."
        )
        self.body_extra = {"would_preempt": _victims(victims)}


WOULD_PREEMPT_RESPONSE = OpenApiResponse(
    response=error_responses(409)[409].response,
    description=(
        "Starting it now would preempt running work of yours or your teammates; nothing was "
        "submitted. The body lists it in `would_preempt` (as the dry run's answer); submit "
        "again with `confirm_preemption: true` to go ahead."
    ),
    examples=[
        OpenApiExample(
            "would preempt",
            value={
                "code": "would_preempt",
                "message": "To start it now the scheduler would preempt: #12 notebook “big” "
                "(yours, 8 GPUs H100-80GB). Submit again with confirm_preemption true to go "
                "ahead.",
                "fields": {},
                "would_preempt": [
                    {
                        "id": 12,
                        "name": "big",
                        "kind": "notebook",
                        "owner": "alice",
                        "team": "vision",
                        "gpus": "8 GPUs H100-80GB",
                        "total_milli": 8000,
                        "yours": True,
                        "same_team": True,
                    }
                ],
            },
            response_only=True,
            status_codes=["409"],
        )
    ],
)


def _victims(victims: list[PreemptionVictim]) -> list[dict[str, Any]]:
    return [
        {
            "id": v.id,
            "name": v.name,
            "kind": v.kind,
            "owner": v.owner,
            "team": v.team,
            "gpus": v.gpus,
            "total_milli": v.total_milli,
            "yours": v.yours,
            "same_team": v.same_team,
        }
        for v in victims
    ]


def _preemption_guard(
    actor: User, team: Team, gpu_class: GpuClass, *, confirmed: bool
) -> Callable[[rules.WorkloadRequest, rules.Charge], None]:
    """Before a submission is written: the scheduler's dry run; 409 if it would preempt the
    person's or a teammate's running work and they have not confirmed."""

    def guard(request_: rules.WorkloadRequest, charge: rules.Charge) -> None:
        if confirmed:
            return
        victims = teammates_to_preempt(
            actor=actor, team=team, gpu_class=gpu_class, request=request_, charge=charge
        )
        if victims:
            raise WouldPreempt(victims)

    return guard
