"""What every workload view of the API needs: the acting user, the workload they may see (another
team's is a 404), a state that does not allow an action as a 409."""

from __future__ import annotations

from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.request import Request

from apps.accounts.models import User
from apps.api.base import Conflict
from apps.workloads.models import Workload
from apps.workloads.selectors import workload_for_user


def _actor(request: Request) -> User:
    return request.user  # type: ignore[return-value]


def _visible(request: Request, workload_id: int) -> Workload:
    return workload_for_user(_actor(request), workload_id)


def _conflict_on_state(exc: DjangoValidationError) -> Conflict:
    return Conflict(" ".join(exc.messages))
