"""Who may open which portal pages, beyond signing in."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import redirect

from apps.accounts.models import Team
from apps.accounts.roles import Act
from apps.accounts.selectors import sees_cluster, team_for_user

View = Callable[..., HttpResponse]


def cluster_view(view: View) -> View:
    """For cluster-wide views: members of a team and platform admins only (``sees_cluster``).
    Anyone else is sent to the page that says how to join a team; a live fragment (htmx)
    gets 403."""

    @login_required
    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not sees_cluster(request.user):  # type: ignore[arg-type]
            if request.headers.get("HX-Request") == "true":
                return HttpResponseForbidden("Cluster views are for members of a team.")
            return redirect("accounts:no-team")
        return view(request, *args, **kwargs)

    return wrapped


def team_or_404(request: HttpRequest, slug: str, *, act: Act = Act.SEE_TEAMS) -> Team:
    """The team of ``slug`` if the signed-in person may see it (a member, or an admin); 404
    otherwise, whether or not it exists."""
    try:
        return team_for_user(request.user, slug, act=act)  # type: ignore[arg-type]
    except Team.DoesNotExist:
        raise Http404("No such team.") from None
