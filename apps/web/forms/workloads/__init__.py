"""Portal forms: one request form per kind of workload, templates, sizing and team filters.

Request forms only parse what the user typed (a text area into a dict, hours into seconds);
what a request may be is the one rule set of every door, :mod:`apps.workloads.rules`, which
``workload_submit`` applies and whose messages the views put back on the fields they concern.
So the selects offer what the user may pick, but a value outside them is passed on for the
rules to refuse in their own words, exactly as the API does.

By concern: ``parsing`` (text fields into values), ``fields`` (choice fields that pass any
value on), ``base`` (the form every kind shares and the request it becomes), ``kinds`` (each
kind's form), ``clone`` (a recorded request as a form's initial values), ``templates``,
``sizing`` and ``lists`` (the workload lists' filters). Their names are importable from here.
"""

from apps.web.forms.workloads.base import FORM_FIELDS, PRIORITY_HELP, WorkloadRequestForm
from apps.web.forms.workloads.clone import clone_initial
from apps.web.forms.workloads.fields import CatalogChoiceField, RuleChoiceField
from apps.web.forms.workloads.kinds import (
    REQUEST_FORMS,
    EndpointRequestForm,
    NotebookRequestForm,
    SweepRequestForm,
    TrainingRequestForm,
)
from apps.web.forms.workloads.lists import STATE_FILTERS, TeamWorkloadFilterForm, WorkloadListForm
from apps.web.forms.workloads.parsing import (
    parse_env,
    parse_grid,
    parse_ranges,
    parse_secret_refs,
    split_command,
)
from apps.web.forms.workloads.sizing import SizingForm
from apps.web.forms.workloads.templates import TemplateSaveForm

__all__ = [
    "FORM_FIELDS",
    "PRIORITY_HELP",
    "REQUEST_FORMS",
    "STATE_FILTERS",
    "CatalogChoiceField",
    "EndpointRequestForm",
    "NotebookRequestForm",
    "RuleChoiceField",
    "SizingForm",
    "SweepRequestForm",
    "TeamWorkloadFilterForm",
    "TemplateSaveForm",
    "TrainingRequestForm",
    "WorkloadListForm",
    "WorkloadRequestForm",
    "clone_initial",
    "parse_env",
    "parse_grid",
    "parse_ranges",
    "parse_secret_refs",
    "split_command",
]
