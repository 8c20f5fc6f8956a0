"""Requesting a workload in the portal: the request forms by kind, the scheduler's verdict before
submitting (would it start, wait or preempt), the GPU fields of a class, the sizing helper, and
a clone (the form filled in with a workload's request). One rule set decides, whatever the door."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
)
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from apps.accounts.models import User
from apps.accounts.roles import Act
from apps.accounts.selectors import memberships_of, platform_may, teams_of
from apps.catalog.models import GpuClass
from apps.common.http import client_ip
from apps.orchestration.selectors import (
    gpu_class_spec,
)
from apps.quotas.core import format_milli
from apps.scheduling.services import (
    PreemptionVictim,
    confirmation_needed,
    preemption_preview,
    request_dry_run,
)
from apps.web.forms.errors import errors_by_field
from apps.web.forms.workloads import (
    REQUEST_FORMS,
    SizingForm,
    TemplateSaveForm,
    WorkloadRequestForm,
    clone_initial,
)
from apps.web.params import path_int
from apps.web.views.workloads.common import _is_htmx, _user, _workload
from apps.web.views.workloads.request_templates import _template
from apps.workloads import core, sizing
from apps.workloads.models import RequestTemplate, Workload
from apps.workloads.selectors import (
    request_templates_for,
    usable_class_ids_for,
)
from apps.workloads.services import (
    request_template_save,
    workload_request_check,
    workload_submit,
)


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
    if not platform_may(user, Act.ACT_FOR_TEAMS) and not memberships_of(user).exists():
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
            data = form.cleaned_data
            workload = workload_submit(
                actor=user,
                team=data["team"],
                gpu_class=data["gpu_class"],
                image=data["image"],
                request=form.request(),
                source_ip=client_ip(request),
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
            label = sizing.request_label(
                charge.gpu_milli,
                charge.replicas,
                data["gpu_class"].name,
                parallelism=charge.parallelism,
            )
            if charge.charged_milli != charge.gpu_milli:
                held = sizing.at_once_milli(
                    charge.charged_milli, charge.replicas, charge.parallelism
                )
                label += f" (charged {format_milli(held)} GPU, as granted)"
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
    if platform_may(user, Act.ACT_FOR_TEAMS):
        return list(classes)
    usable = usable_class_ids_for(teams_of(user))
    return [c for c in classes if c.pk in usable]


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
