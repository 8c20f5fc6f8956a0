"""The portal's notices: the list (with a count in the menu), marking read, preferences."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.models import User
from apps.common.http import client_ip
from apps.notifications import core, selectors, services
from apps.web.forms.notifications import NotificationPreferenceForm

NOTICES_PER_PAGE = 25


@login_required
@require_GET
def notices(request: HttpRequest) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    page = Paginator(selectors.notices_for(user), NOTICES_PER_PAGE).get_page(
        request.GET.get("page")
    )
    return render(request, "notifications/notices.html", {"page": page})


@login_required
@require_POST
def notices_read(request: HttpRequest) -> HttpResponse:
    """Mark one notice read (``id``), or all of them; only the caller's own are touched."""
    user: User = request.user  # type: ignore[assignment]
    raw = request.POST.get("id", "")
    if raw:
        ids = [int(raw)] if raw.isdigit() and len(raw) < 19 else []
        services.notices_mark_read(user=user, ids=ids)
    else:
        services.notices_mark_read(user=user)
    return HttpResponseRedirect(reverse("notices"))


@login_required
@require_http_methods(["GET", "POST"])
def preferences(request: HttpRequest) -> HttpResponse:
    user: User = request.user  # type: ignore[assignment]
    current = selectors.preferences_of(user)
    form = NotificationPreferenceForm(
        request.POST or None,
        initial=NotificationPreferenceForm.initial_from(current),
        email_address=user.email,
    )
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            services.notification_preferences_set(
                actor=user,
                email_events=data["email_events"],
                webhook_events=data["webhook_events"],
                portal_events=data["portal_events"],
                digest_events=data["digest_events"],
                webhook_url=data["webhook_url"],
                source_ip=client_ip(request),
            )
        except core.WebhookUrlError as exc:
            form.add_error("webhook_url", str(exc))
        except ValueError as exc:
            form.add_error(None, str(exc))
        else:
            messages.success(request, "Your notification choices are saved.")
            return HttpResponseRedirect(reverse("notification-preferences"))
    return render(
        request,
        "notifications/preferences.html",
        {"form": form},
        status=400 if request.method == "POST" and form.errors else 200,
    )
