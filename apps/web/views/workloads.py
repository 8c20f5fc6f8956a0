"""Portal pages for workloads: dashboard, request forms, workload page, live partials.

Views are thin: they validate input, call one service or selector and render. Every
workload view looks the workload up through ``workload_for_user``, so another team's ids
give 404 whatever the URL.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    StreamingHttpResponse,
)
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.models import User
from apps.accounts.selectors import memberships_of, teams_of
from apps.catalog.models import GpuClass
from apps.common import streams
from apps.common.http import client_ip
from apps.orchestration.errors import ClusterError, cluster_error_answer
from apps.orchestration.reads import (
    LogsUnavailable,
    workload_logs,
)
from apps.orchestration.selectors import (
    archived_log,
    archived_log_lines,
    gpu_class_spec,
    log_choices,
    sweep_trials,
    workload_cluster_events,
    workload_log_download,
)
from apps.quotas.core import format_milli
from apps.scheduling.services import (
    PreemptionVictim,
    confirmation_needed,
    preemption_preview,
    request_dry_run,
)
from apps.web.access import cluster_view
from apps.web.forms.errors import errors_by_field
from apps.web.forms.workloads import (
    REQUEST_FORMS,
    SizingForm,
    TemplateSaveForm,
    WorkloadRequestForm,
    clone_initial,
)
from apps.web.params import path_int
from apps.web.views.endpoints import endpoint_context
from apps.workloads import core, sizing
from apps.workloads.models import RequestTemplate, Workload
from apps.workloads.selectors import (
    gpu_class_capacity,
    quota_bars_for_teams,
    request_template_for_user,
    request_templates_for,
    usable_class_ids_for,
    waiting_workloads_for_teams,
    workload_for_user,
    workload_may_manage,
    workload_may_open,
    workloads_visible_to,
)
from apps.workloads.services import (
    request_template_delete,
    request_template_save,
    workload_cancel,
    workload_request_check,
    workload_resume,
    workload_submit,
    workload_suspend,
)

LOG_TAIL_LINES = 200


def _user(request: HttpRequest) -> User:
    return request.user  # type: ignore[return-value]


def _workload(request: HttpRequest, workload_id: int) -> Workload:
    try:
        return workload_for_user(_user(request), workload_id)
    except Workload.DoesNotExist:
        raise Http404("No such workload.") from None


def _is_htmx(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true"


def _safe_next(request: HttpRequest, default: str) -> str:
    target = request.POST.get("next") or request.GET.get("next") or ""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return default


# --- dashboard ------------------------------------------------------------------------------


def gpu_label(workload: Workload) -> str:
    return sizing.request_label(workload.gpu_milli, workload.replicas, workload.gpu_class.name)


def _labelled(workloads: Iterable[Workload]) -> list[Workload]:
    rows = list(workloads)
    for w in rows:
        w.gpu_label = gpu_label(w)  # type: ignore[attr-defined]
    return rows


def _dashboard_workloads(user: User) -> dict[str, Any]:
    teams = list(teams_of(user))
    return {
        "workloads": _labelled(
            workloads_visible_to(user).filter(owner=user, sweep__isnull=True)[:50]
        ),
        "waiting": _labelled(waiting_workloads_for_teams(teams)[:50]),
    }


def _dashboard_capacity(user: User) -> dict[str, Any]:
    capacity = [
        {
            "name": c.gpu_class.name,
            "sharing": c.gpu_class.get_sharing_mode_display(),
            "free": format_milli(c.free_milli),
            "total": format_milli(c.capacity_milli),
            "nodes": c.nodes,
        }
        for c in gpu_class_capacity()
    ]
    return {"quota_bars": quota_bars_for_teams(teams_of(user)), "capacity": capacity}


@login_required
@require_GET
def home(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    memberships = list(memberships_of(user))
    if not memberships and not user.is_staff:
        return redirect("accounts:no-team")
    context = {
        "memberships": memberships,
        **_dashboard_workloads(user),
        **_dashboard_capacity(user),
    }
    return render(request, "workloads/home.html", context)


@login_required
@require_GET
def dashboard_workloads_partial(request: HttpRequest) -> HttpResponse:
    return render(
        request, "workloads/_dashboard_workloads.html", _dashboard_workloads(_user(request))
    )


@cluster_view
@require_GET
def dashboard_capacity_partial(request: HttpRequest) -> HttpResponse:
    return render(
        request, "workloads/_dashboard_capacity.html", _dashboard_capacity(_user(request))
    )


# --- new request ------------------------------------------------------------------------------


def _form_class(kind: str) -> type[WorkloadRequestForm]:
    form_class = REQUEST_FORMS.get(kind)
    if form_class is None:
        raise Http404("No such kind of workload.")
    return form_class


def _request_page(
    request: HttpRequest,
    form: WorkloadRequestForm,
    template_form: TemplateSaveForm,
    *,
    status: int = 200,
    template: RequestTemplate | None = None,
    victims: list[PreemptionVictim] | None = None,
    cloned: Workload | None = None,
) -> HttpResponse:
    user = _user(request)
    return render(
        request,
        "workloads/new.html",
        {
            "form": form,
            "kind": form.kind,
            "kinds": [(k, f.title) for k, f in REQUEST_FORMS.items()],
            "template_form": template_form,
            "templates": request_templates_for(user, kind=form.kind),
            "template": template,
            "sizing_form": SizingForm(),
            "victims": victims or [],
            "confirm_needed": confirmation_needed(victims or []),
            "cloned": cloned,
        },
        status=status,
    )


@login_required
@require_GET
def workload_new_start(request: HttpRequest) -> HttpResponse:
    return redirect("workload-new", kind=core.KIND_NOTEBOOK)


@login_required
@require_http_methods(["GET", "POST"])
def workload_new(request: HttpRequest, kind: str) -> HttpResponse:
    """One form per kind. POST ``action=submit`` submits; ``action=save-template`` saves the
    request as a named template. On any error the page comes back with everything typed."""
    user = _user(request)
    form_class = _form_class(kind)
    if not user.is_staff and not memberships_of(user).exists():
        return redirect("accounts:no-team")
    if request.method == "GET":
        template = None
        initial: dict[str, Any] = {}
        if request.GET.get("template"):
            template = _template(request, request.GET["template"])
            if template.kind != kind:
                return redirect(
                    f"{reverse('workload-new', args=[template.kind])}?template={template.pk}"
                )
            initial.update(template.values)
        cloned = None
        if request.GET.get("clone"):
            cloned = _workload(request, path_int(request.GET["clone"]) or 0)
            if cloned.kind != kind:
                return redirect(f"{reverse('workload-new', args=[cloned.kind])}?clone={cloned.pk}")
            initial.update(clone_initial(cloned))
        for name in ("gpu_class", "gpu_milli"):  # "use this" links of the sizing helper
            if request.GET.get(name):
                initial[name] = request.GET[name]
        form = form_class(user=user, initial=initial)
        return _request_page(
            request, form, TemplateSaveForm(prefix="template"), template=template, cloned=cloned
        )

    form = form_class(request.POST, user=user)
    template_form = TemplateSaveForm(prefix="template")
    if request.POST.get("action") == "save-template":
        template_form = TemplateSaveForm(request.POST, prefix="template")
        if form.is_valid() and template_form.is_valid():
            try:
                saved = request_template_save(
                    actor=user,
                    name=template_form.cleaned_data["name"],
                    kind=kind,
                    values=form.template_values(),
                    team=form.cleaned_data["team"] if template_form.cleaned_data["share"] else None,
                )
            except ValidationError as exc:
                for errors in errors_by_field(exc).values():
                    template_form.add_error("name", list(errors))
            else:
                messages.success(request, f"Template “{saved.name}” saved.")
                return redirect(f"{reverse('workload-new', args=[kind])}?template={saved.pk}")
        return _request_page(request, form, template_form, status=400)

    if form.is_valid():
        try:
            victims = _would_preempt(user, form)
            if confirmation_needed(victims) and not form.cleaned_data.get("confirm_preemption"):
                # Nothing is recorded: the page names what it would stop and asks first.
                return _request_page(request, form, template_form, status=409, victims=victims)
            workload = workload_submit(
                actor=user, source_ip=client_ip(request), **form.submit_kwargs()
            )
        except ValidationError as exc:
            for field, errors in errors_by_field(exc).items():
                form.add_error(form.error_field(field), list(errors))
        except PermissionDenied as exc:
            form.add_error("team", str(exc))
        else:
            messages.success(request, f"“{workload.name}” submitted.")
            if victims:
                stops = "; ".join(v.describe() for v in victims)
                messages.info(request, f"To start it now the scheduler would preempt: {stops}.")
            return redirect("workload-detail", workload_id=workload.pk)
    return _request_page(request, form, template_form, status=400)


def _would_preempt(user: User, form: WorkloadRequestForm) -> list[PreemptionVictim]:
    """The request rules, then the scheduler's dry run: what submitting now would preempt."""
    data = form.cleaned_data
    request_ = form.request()
    charge = workload_request_check(
        actor=user,
        team=data["team"],
        gpu_class=data["gpu_class"],
        image=data["image"],
        request=request_,
    )
    return preemption_preview(
        actor=user, team=data["team"], gpu_class=data["gpu_class"], request=request_, charge=charge
    )


@login_required
@require_POST
def workload_new_verdict(request: HttpRequest, kind: str) -> HttpResponse:
    """The live verdict of the request form: the rules' problems, or what the scheduler would
    do with the request if it were submitted now (the API's ``?dry_run=true`` answer), its
    charge, cost per hour and the team's quota left. Records nothing."""
    user = _user(request)
    form = _form_class(kind)(request.POST, user=user)
    context: dict[str, Any] = {"problems": [], "dry": None}
    if not form.is_valid():
        context["problems"] = [
            f"{form.fields[name].label or name}: {error}" if name in form.fields else str(error)
            for name, errors in form.errors.items()
            for error in errors
            if name != "confirm_preemption"
        ]
    else:
        data = form.cleaned_data
        try:
            dry = request_dry_run(
                actor=user,
                team=data["team"],
                gpu_class=data["gpu_class"],
                image=data["image"],
                request=form.request(),
            )
        except ValidationError as exc:
            context["problems"] = [
                f"{_field_label(form, field)}{message}"
                for field, messages_ in errors_by_field(exc).items()
                for message in messages_
            ]
        except PermissionDenied as exc:
            context["problems"] = [str(exc)]
        else:
            charge = dry.charge
            label = sizing.request_label(charge.gpu_milli, charge.replicas, data["gpu_class"].name)
            if charge.charged_milli != charge.gpu_milli:
                label += f" (charged {format_milli(charge.total_milli)} GPU, as granted)"
            quota = dry.quota
            context.update(
                dry=dry,
                charge_label=label,
                quota_left=(
                    f"{format_milli(dry.quota_left_milli or 0)} of "
                    f"{format_milli(quota.limit_milli)} GPU of {data['team'].name}'s limit"
                    if quota is not None
                    else ""
                ),
            )
    return render(request, "workloads/_verdict.html", context)


def _field_label(form: WorkloadRequestForm, field: str) -> str:
    name = form.error_field(field)
    if name is None or name not in form.fields:
        return ""
    return f"{form.fields[name].label or name.replace('_', ' ').capitalize()}: "


@login_required
@require_GET
def workload_new_gpu_fields(request: HttpRequest, kind: str) -> HttpResponse:
    """The GPU class, amount and preview fields again, for the class and amount chosen now."""
    form = _form_class(kind)(user=_user(request), initial=request.GET.dict())
    return render(request, "workloads/_gpu_fields.html", {"form": form, "kind": kind})


@login_required
@require_GET
def sizing_helper(request: HttpRequest) -> HttpResponse:
    form = SizingForm(request.GET or None)
    estimate = None
    if form.is_valid():
        try:
            estimate = sizing.size_request(
                params_billions=float(form.cleaned_data["params_billions"]),
                precision=form.cleaned_data["precision"],
                task=form.cleaned_data["task"],
                classes=[
                    sizing.SizingClass(c.pk, float(c.hourly_cost), gpu_class_spec(c))
                    for c in _sizing_classes(_user(request))
                ],
                **form.known(),
            )
        except sizing.SizingError as exc:
            form.add_error(None, str(exc))
    kind = request.GET.get("kind")
    context = {
        "sizing_form": form,
        "estimate": estimate,
        "kind": kind if kind in REQUEST_FORMS else core.KIND_NOTEBOOK,
        "inline": request.GET.get("inline") == "1",
    }
    if _is_htmx(request):
        return render(request, "workloads/_sizing_result.html", context)
    return render(request, "workloads/sizing.html", context)


def _sizing_classes(user: User) -> list[GpuClass]:
    """The classes the sizing helper suggests: those one of the user's teams may use (every
    enabled class for an admin)."""
    classes = GpuClass.objects.filter(enabled=True).order_by("name")
    if user.is_staff:
        return list(classes)
    usable = usable_class_ids_for(teams_of(user))
    return [c for c in classes if c.pk in usable]


# --- request templates ------------------------------------------------------------------------


def _template(request: HttpRequest, template_id: Any) -> RequestTemplate:
    number = path_int(template_id)
    try:
        if number is not None:
            return request_template_for_user(_user(request), number)
    except RequestTemplate.DoesNotExist:
        pass
    raise Http404("No such template.")


@login_required
@require_GET
def template_list(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "workloads/templates.html",
        {"templates": request_templates_for(_user(request)), "user_id": request.user.pk},
    )


@login_required
@require_POST
def template_delete(request: HttpRequest, template_id: int) -> HttpResponse:
    template = _template(request, template_id)
    try:
        request_template_delete(actor=_user(request), template=template)
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Template “{template.name}” deleted.")
    return HttpResponseRedirect(reverse("template-list"))


# --- one workload -----------------------------------------------------------------------------


def duration_label(seconds: int | None) -> str:
    """3600 → "1 h", 5400 → "1 h 30 min", 600 → "10 min"."""
    if not seconds:
        return ""
    hours, rest = divmod(int(seconds), 3600)
    minutes = rest // 60
    parts = [f"{hours} h"] if hours else []
    if minutes or not parts:
        parts.append(f"{minutes} min")
    return " ".join(parts)


def placement_rows(placement: Any) -> list[dict[str, str]]:
    """The scheduler's placement JSON as one row per replica: node and GPUs in words."""
    replicas = placement.get("replicas") if isinstance(placement, dict) else None
    rows = []
    for entry in replicas or []:
        if not isinstance(entry, dict) or not entry.get("node"):
            continue
        gpus = ", ".join(f"GPU {g}" for g in entry.get("gpus") or [])
        if entry.get("mig_profile"):
            gpus = f"{gpus} · MIG {entry['mig_profile']}".strip(" ·")
        rows.append({"node": str(entry["node"]), "gpus": gpus or "—"})
    return rows


def _status_context(request: HttpRequest, workload: Workload) -> dict[str, Any]:
    user = _user(request)
    return {
        "workload": workload,
        "events": workload.events.select_related("actor"),
        "may_manage": workload_may_manage(user, workload),
        "may_open": workload_may_open(user, workload),
        "gpu_label": gpu_label(workload),
        "gpu_description": sizing.describe_amount(
            workload.gpu_milli, gpu_class_spec(workload.gpu_class)
        ),
        "placement": placement_rows(workload.placement),
        "max_runtime": duration_label(workload.max_runtime_seconds),
        "idle_timeout": duration_label(workload.idle_timeout_seconds),
        "waiting": workload.state in core.WAITING_STATES | {core.PREEMPTED},
        "live": not workload.is_terminal,
    }


@login_required
@require_GET
def workload_detail(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload = _workload(request, workload_id)
    context = _status_context(request, workload)
    if workload.is_sweep:
        context["trials"] = sweep_trials(workload)
        context["parallelism"] = (workload.params or {}).get("parallelism")
    if workload.kind == core.KIND_INFERENCE:
        context.update(endpoint_context(request, workload))
    return render(request, "workloads/detail.html", context)


@login_required
@require_GET
def workload_status_partial(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload = _workload(request, workload_id)
    return render(request, "workloads/_status.html", _status_context(request, workload))


@login_required
@require_GET
def workload_events_partial(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload = _workload(request, workload_id)
    archived, note = False, ""
    try:
        found = workload_cluster_events(workload=workload)
        events, archived, note, problem = found.events, found.archived, found.note, None
    except LogsUnavailable as exc:
        events, problem = [], str(exc)
    except ClusterError as exc:
        # The API's words for the same error; the partial answers 200 so that htmx shows it.
        events, problem = [], cluster_error_answer(exc).message
    return render(
        request,
        "workloads/_events.html",
        {
            "workload": workload,
            "cluster_events": events,
            "problem": problem,
            "archived": archived,
            "note": note,
        },
    )


def _log_pick(request: HttpRequest) -> tuple[int, int | None]:
    """The replica and (archived) attempt asked for; anything unreadable is the default."""

    def number(name: str, minimum: int) -> int | None:
        raw = request.GET.get(name, "")
        return int(raw) if raw.isdigit() and minimum <= int(raw) <= 10_000 else None

    return number("replica", 0) or 0, number("attempt", 1)


@login_required
@require_GET
def workload_logs_partial(request: HttpRequest, workload_id: int) -> HttpResponse:
    workload = _workload(request, workload_id)
    replica, attempt = _log_pick(request)
    archived = None
    try:
        archived = archived_log(workload=workload, replica=replica, attempt=attempt)
        if archived is not None:
            lines = archived_log_lines(archived, tail_lines=LOG_TAIL_LINES)
        else:
            lines = list(
                workload_logs(workload=workload, tail_lines=LOG_TAIL_LINES, replica=replica)
            )
        problem = None
    except LogsUnavailable as exc:
        lines, problem = [], str(exc)
    except ClusterError as exc:
        # The API's words for the same error; the partial answers 200 so that htmx shows it.
        lines, problem = [], cluster_error_answer(exc).message
    download = reverse("workload-logs-download", args=[workload.pk]) + f"?replica={replica}"
    if archived is not None:
        download += f"&attempt={archived.attempt}"
    return render(
        request,
        "workloads/_logs.html",
        {
            "workload": workload,
            "lines": lines,
            "problem": problem,
            "tail": LOG_TAIL_LINES,
            "archived": archived,
            "replica": replica,
            "attempt": archived.attempt if archived is not None and attempt else None,
            "choices": log_choices(workload, replica),
            "download_url": download,
        },
    )


@login_required
@require_GET
def workload_logs_download(request: HttpRequest, workload_id: int) -> HttpResponse:
    """One replica's whole kept log as a file: the archive's, or the end of the live one."""
    workload = _workload(request, workload_id)
    replica, attempt = _log_pick(request)
    try:
        filename, lines = workload_log_download(workload=workload, replica=replica, attempt=attempt)
    except LogsUnavailable as exc:
        return HttpResponse(f"{exc}\n", status=409, content_type="text/plain; charset=utf-8")
    except ClusterError as exc:
        answer = cluster_error_answer(exc)
        return HttpResponse(
            f"{answer.message}\n", status=answer.status, content_type="text/plain; charset=utf-8"
        )
    response = HttpResponse(
        "".join(f"{line}\n" for line in lines), content_type="text/plain; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["Cache-Control"] = "no-store"
    return response


def _sse(event: str, data: str) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


@login_required
@require_GET
def workload_logs_stream(request: HttpRequest, workload_id: int) -> StreamingHttpResponse:
    """Live follow as server-sent events: ``line`` events, then ``end`` or ``unavailable``.
    A workload whose objects are gone streams its archived log and ends."""
    workload = _workload(request, workload_id)
    replica, _ = _log_pick(request)

    def stream() -> Iterator[str]:
        try:
            archived = archived_log(workload=workload, replica=replica)
            if archived is not None:
                for line in archived_log_lines(archived, tail_lines=50):
                    yield _sse("line", line)
                yield _sse("end", "The workload has ended: this is its archived log.")
                return
            for line in workload_logs(
                workload=workload, tail_lines=50, follow=True, replica=replica
            ):
                yield _sse("line", line)
        except LogsUnavailable as exc:
            yield _sse("unavailable", str(exc))
            return
        except ClusterError as exc:
            yield _sse("unavailable", cluster_error_answer(exc).message)
            return
        yield _sse("end", "The log stream ended (the container stopped).")

    # Under ASGI the lines are read off the view's thread, with keep-alives, a time limit
    # and a per-user cap (apps/common/streams.py); under WSGI stream() is served as is.
    return streams.sse_response(
        request,
        lambda: workload_logs(workload=workload, tail_lines=50, follow=True),
        sse=_sse,
        render=_sse_item,
        sync_stream=stream,
    )


def _sse_item(kind: str, value: Any) -> str | None:
    """An item of the threaded reader as an event, as stream() sends them."""
    if kind == "line":
        return _sse("line", value)
    if isinstance(value, LogsUnavailable):
        return _sse("unavailable", str(value))
    if isinstance(value, ClusterError):
        return _sse("unavailable", cluster_error_answer(value).message)
    if kind == "end":
        return _sse("end", "The log stream ended (the container stopped).")
    raise value


def _action(
    request: HttpRequest, workload_id: int, service: Any, done: str
) -> HttpResponseRedirect:
    workload = _workload(request, workload_id)
    target = _safe_next(request, reverse("workload-detail", args=[workload.pk]))
    try:
        service(actor=_user(request), workload=workload, source_ip=client_ip(request))
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    except ValidationError as exc:
        messages.error(request, " ".join(exc.messages))
    else:
        messages.success(request, done.format(name=workload.name))
    return HttpResponseRedirect(target)


@login_required
@require_POST
def workload_cancel_view(request: HttpRequest, workload_id: int) -> HttpResponse:
    return _action(request, workload_id, workload_cancel, "“{name}” cancelled.")


@login_required
@require_POST
def workload_suspend_view(request: HttpRequest, workload_id: int) -> HttpResponse:
    return _action(
        request, workload_id, workload_suspend, "“{name}” suspended; its files are kept."
    )


@login_required
@require_POST
def workload_resume_view(request: HttpRequest, workload_id: int) -> HttpResponse:
    return _action(request, workload_id, workload_resume, "“{name}” queued again.")


@login_required
@require_http_methods(["GET", "POST"])
def workload_clone_view(request: HttpRequest, workload_id: int) -> HttpResponse:
    """Clone: the request form of the workload's kind, filled in with its request, to check,
    change and submit through the normal path (nothing is submitted here)."""
    workload = _workload(request, workload_id)
    if workload.kind not in REQUEST_FORMS:
        kind = workload.get_kind_display().lower()
        messages.error(request, f"A {kind} cannot be requested from the portal's forms.")
        return redirect("workload-detail", workload_id=workload.pk)
    return redirect(f"{reverse('workload-new', args=[workload.kind])}?clone={workload.pk}")
