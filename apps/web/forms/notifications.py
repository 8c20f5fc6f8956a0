from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from apps.notifications import core

EVENT_CHOICES = [(e.value, core.EVENT_LABELS[e]) for e in core.NoticeEvent]


def _events_field(label: str, help_text: str) -> forms.MultipleChoiceField:
    return forms.MultipleChoiceField(
        label=label,
        choices=EVENT_CHOICES,
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text=help_text,
    )


class NotificationPreferenceForm(forms.Form):
    portal_events = _events_field(
        "In the portal",
        "Shown under Notices, with a count in the menu. By default what needs attention.",
    )
    digest_events = _events_field(
        "In a daily e-mail digest",
        "One e-mail a day, the day's updates grouped per workload. By default admitted, "
        "running and finished.",
    )
    email_events = _events_field("By e-mail", "Sent to the address your sign-in gives.")
    webhook_events = _events_field(
        "By webhook", "Posted as JSON with a “text” field (Slack and Microsoft Teams accept it)."
    )
    webhook_url = forms.CharField(
        label="Webhook URL",
        required=False,
        max_length=core.WEBHOOK_URL_MAX_LENGTH,
        help_text="An https:// incoming-webhook address, e.g. from Slack or Teams.",
        widget=forms.URLInput(attrs={"size": 60, "autocomplete": "off"}),
    )

    def __init__(self, *args: Any, email_address: str = "", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not settings.NOTIFY_EMAIL_ENABLED:
            self.fields[
                "email_events"
            ].help_text = "E-mail is not set up on this platform; nothing is sent by e-mail."
        elif not email_address:
            self.fields[
                "email_events"
            ].help_text = "Your account has no e-mail address; nothing is sent by e-mail."
        else:
            self.fields["email_events"].help_text = f"Sent to {email_address}."

    @staticmethod
    def initial_from(prefs: core.Preferences) -> dict[str, Any]:
        return {
            "portal_events": sorted(prefs.events.get(core.Channel.PORTAL, ())),
            "email_events": sorted(prefs.events.get(core.Channel.EMAIL, ())),
            "digest_events": sorted(prefs.events.get(core.Channel.DIGEST, ())),
            "webhook_events": sorted(prefs.events.get(core.Channel.WEBHOOK, ())),
            "webhook_url": prefs.webhook_url,
        }
