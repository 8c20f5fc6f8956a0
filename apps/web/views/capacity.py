"""Quota requests and reservations in the portal: ask and decide; book on a calendar."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, time, timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.db.models import QuerySet
from django.forms import Form
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_http_methods, require_POST

from apps.accounts.models import Team, User
from apps.accounts.roles import Act
from apps.accounts.selectors import platform_may, teams_led_by, teams_visible_to
from apps.catalog.models import GpuClass
from apps.catalog.selectors import gpu_classes_offered
from apps.common.http import client_ip
from apps.quotas.models import QuotaRequest
from apps.quotas.selectors import (
    quota_request_for_user,
    quota_request_may_decide,
    quota_requests_to_decide,
    quota_requests_visible_to,
)
from apps.quotas.services import quota_request_cancel, quota_request_decide, quota_request_submit
from apps.reservations import core as reservations_core
from apps.reservations.models import Reservation
from apps.reservations.selectors import (
    calendar,
    capacity_milli,
    quota_request_capacity_note,
    reservation_for_user,
    reservation_may_manage,
    reservations_visible_to,
)
from apps.reservations.services import reservation_book, reservation_cancel, reservation_decide
from apps.scheduling.selectors import ReservationUse, reservation_uses
from apps.web.forms.capacity import CalendarForm, DecisionForm, QuotaRequestForm, ReservationForm
from apps.web.forms.errors import errors_by_field

CALENDAR_DAYS = 7
LIST_LIMIT = 100


def _user(request: HttpRequest) -> User:
    return request.user  # type: ignore[return-value]


def _form_errors(form: Form, exc: ValidationError) -> None:
    names = {"amount_milli": "amount", "size_milli": "size"}
    for field, errors in errors_by_field(exc).items():
        field = names.get(field, field)
        form.add_error(field if field in form.fields else None, list(errors))


# --- quota requests --------------------------------------------------------------------------


@dataclass(frozen=True)
class RequestRow:
    request: QuotaRequest
    capacity_note: str | None
    may_decide: bool


def _rows(requests: list[QuotaRequest], user: User) -> list[RequestRow]:
    return [
        RequestRow(
            r,
            quota_request_capacity_note(r) if r.state == QuotaRequest.State.PENDING else None,
            r.state == QuotaRequest.State.PENDING and quota_request_may_decide(user, r),
        )
        for r in requests
    ]


@login_required
@require_http_methods(["GET", "POST"])
def quota_requests_page(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    teams = teams_visible_to(user)  # a member's own teams; every team for admins
    now = timezone.now().replace(second=0, microsecond=0)
    form = QuotaRequestForm(
        request.POST or None,
        teams=teams,
        classes=gpu_classes_offered(),
        initial={"starts_at": now, "ends_at": now + timedelta(days=14)},
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            created = quota_request_submit(
                actor=user,
                team=data["team"],
                gpu_class=data["gpu_class"],
                kind=data["kind"],
                amount_milli=data["amount"],
                starts_at=data["starts_at"],
                ends_at=data["ends_at"],
                justification=data["justification"],
                source_ip=client_ip(request),
            )
        except PermissionDenied as exc:
            form.add_error(None, str(exc))
        except ValidationError as exc:
            _form_errors(form, exc)
        else:
            messages.success(request, f"Quota request #{created.pk} sent.")
            return redirect("quota-request-detail", request_id=created.pk)
    return render(
        request,
        "governance/quota_requests.html",
        {
            "form": form,
            "to_decide": _rows(quota_requests_to_decide(user), user),
            "requests": _rows(list(quota_requests_visible_to(user)[:LIST_LIMIT]), user),
        },
        status=400 if request.method == "POST" else 200,
    )


def _request_or_404(request: HttpRequest, request_id: int) -> QuotaRequest:
    try:
        return quota_request_for_user(_user(request), request_id)
    except QuotaRequest.DoesNotExist:
        raise Http404("No such quota request.") from None


@login_required
@require_http_methods(["GET", "POST"])
def quota_request_detail(request: HttpRequest, request_id: int) -> HttpResponse:
    user = _user(request)
    row = _request_or_404(request, request_id)
    form = DecisionForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            quota_request_decide(
                actor=user,
                request=row,
                approve=form.cleaned_data["decision"] == "approve",
                comment=form.cleaned_data["comment"],
                source_ip=client_ip(request),
            )
        except PermissionDenied as exc:
            messages.error(request, str(exc))
            return redirect("quota-request-detail", request_id=row.pk)
        except ValidationError as exc:
            _form_errors(form, exc)
        else:
            messages.success(request, f"Quota request #{row.pk} decided.")
            return redirect("quota-request-detail", request_id=row.pk)
    row = _request_or_404(request, request_id)
    (info,) = _rows([row], user)
    return render(
        request,
        "governance/quota_request.html",
        {
            "row": info,
            "form": form,
            "grant": getattr(row, "grant", None),
            "may_cancel": row.state == QuotaRequest.State.PENDING
            and (row.requested_by_id == user.pk or info.may_decide),
            "now": timezone.now(),
        },
        status=400 if request.method == "POST" else 200,
    )


@login_required
@require_POST
def quota_request_withdraw(request: HttpRequest, request_id: int) -> HttpResponse:
    row = _request_or_404(request, request_id)
    try:
        quota_request_cancel(actor=_user(request), request=row, source_ip=client_ip(request))
    except (PermissionDenied, ValidationError) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    else:
        messages.success(request, f"Quota request #{row.pk} withdrawn.")
    return redirect("quota-request-detail", request_id=row.pk)


# --- reservations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    hour: datetime
    free_milli: int
    booked_milli: int
    level: int  # 0 (nothing free) … 4 (all free), for the colour

    @property
    def label(self) -> str:
        return reservations_core.format_milli(self.free_milli)


@dataclass(frozen=True)
class Day:
    day: datetime
    cells: list[Cell]


def _calendar_days(gpu_class: GpuClass, start: datetime) -> list[Day]:
    hours = calendar(gpu_class, start=start, hours=24 * CALENDAR_DAYS)
    capacity = capacity_milli(gpu_class)
    days = []
    for d in range(CALENDAR_DAYS):
        cells = []
        for h in hours[d * 24 : (d + 1) * 24]:
            share = h.free_milli / capacity if capacity else 0.0
            level = 0 if h.free_milli <= 0 else min(4, 1 + int(share * 4))
            cells.append(Cell(h.start, h.free_milli, h.booked_milli, level))
        days.append(Day(start + timedelta(days=d), cells))
    return days


def _booking_teams(user: User) -> QuerySet[Team]:
    if platform_may(user, Act.ACT_FOR_TEAMS):
        return Team.objects.order_by("name")
    return teams_led_by(user)


@login_required
@require_http_methods(["GET", "POST"])
def reservations_page(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    classes = gpu_classes_offered()
    shown = CalendarForm(request.GET or None, classes=classes, auto_id="cal_%s")
    gpu_class = classes.first()
    tz = timezone.get_current_timezone()
    start = timezone.now().astimezone(tz).replace(minute=0, second=0, microsecond=0)
    start = start.replace(hour=0)
    if shown.is_valid():
        gpu_class = shown.cleaned_data["gpu_class"] or gpu_class
        if shown.cleaned_data["day"]:
            start = datetime.combine(shown.cleaned_data["day"], time(0), tzinfo=tz)
    teams = _booking_teams(user)
    next_hour = timezone.now().replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
    form = ReservationForm(
        request.POST or None,
        teams=teams,
        classes=classes,
        initial={
            "gpu_class": gpu_class,
            "starts_at": next_hour,
            "ends_at": next_hour + timedelta(hours=4),
            "size": "1",
        },
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            booked = reservation_book(
                actor=user,
                team=data["team"],
                gpu_class=data["gpu_class"],
                size_milli=data["size"],
                count=data["count"],
                starts_at=data["starts_at"],
                ends_at=data["ends_at"],
                note=data["note"],
                source_ip=client_ip(request),
            )
        except PermissionDenied as exc:
            form.add_error(None, str(exc))
        except ValidationError as exc:
            _form_errors(form, exc)
        else:
            if booked.state == Reservation.State.PENDING:
                messages.success(
                    request,
                    f"Reservation #{booked.pk} holds its place and waits for a platform admin.",
                )
            else:
                messages.success(request, f"Reservation #{booked.pk} booked.")
            return redirect(f"{request.path}?gpu_class={booked.gpu_class_id}")
    now = timezone.now()
    rows = (
        reservations_visible_to(user)
        .filter(ends_at__gt=now - timedelta(days=30))
        .order_by("-starts_at", "-id")[:LIST_LIMIT]
    )
    uses: list[ReservationUse] = reservation_uses(list(rows), now=now)
    return render(
        request,
        "governance/reservations.html",
        {
            "shown": shown,
            "gpu_class": gpu_class,
            "capacity_milli": capacity_milli(gpu_class) if gpu_class else 0,
            "days": _calendar_days(gpu_class, start) if gpu_class else [],
            "hours": range(24),
            "form": form,
            "may_book": teams.exists(),
            "uses": [
                (u, reservation_may_manage(user, u.reservation), u.reservation.ends_at > now)
                for u in uses
            ],
            "decision_form": DecisionForm(),
        },
        status=400 if request.method == "POST" else 200,
    )


def _reservation_or_404(request: HttpRequest, reservation_id: int) -> Reservation:
    try:
        return reservation_for_user(_user(request), reservation_id)
    except Reservation.DoesNotExist:
        raise Http404("No such reservation.") from None


@login_required
@require_POST
def reservation_decide_view(request: HttpRequest, reservation_id: int) -> HttpResponse:
    row = _reservation_or_404(request, reservation_id)
    form = DecisionForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose approve or reject; a comment has at most 2000 characters.")
        return redirect("reservations")
    try:
        reservation_decide(
            actor=_user(request),
            reservation=row,
            approve=form.cleaned_data["decision"] == "approve",
            comment=form.cleaned_data["comment"],
            source_ip=client_ip(request),
        )
    except (PermissionDenied, ValidationError) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    else:
        messages.success(request, f"Reservation #{row.pk} decided.")
    return redirect("reservations")


@login_required
@require_POST
def reservation_withdraw(request: HttpRequest, reservation_id: int) -> HttpResponse:
    row = _reservation_or_404(request, reservation_id)
    try:
        reservation_cancel(actor=_user(request), reservation=row, source_ip=client_ip(request))
    except (PermissionDenied, ValidationError) as exc:
        messages.error(request, " ".join(getattr(exc, "messages", [str(exc)])))
    else:
        messages.success(request, f"Reservation #{row.pk} withdrawn.")
    return redirect("reservations")
