"""The admin audit log as its page reads it: filtered by actor, action and day, searched in
targets and details, and paged by cursor, newest first.

A cursor names the last (or first) event of a page by its time and id, so a page stays the
same however many events are recorded meanwhile, which an offset would not. Every parameter
is in the URL; one that makes no sense is a form error the page reports, never a 500.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from typing import Any

from django import forms
from django.db.models import Q, QuerySet
from django.utils import timezone

from sessions_app.models import AuditEvent
from sessions_app.tenancy import Scope, require_admin

PAGE_SIZE = 50
BROKEN_CURSOR = "This page link is broken; start again from the newest events."

Cursor = tuple[datetime, int]


def encode_cursor(event: AuditEvent) -> str:
    raw = f"{event.at.isoformat()}|{event.pk}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(token: str) -> Cursor:
    """The (time, id) a cursor names; ``ValueError`` for anything this module did not write."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        at, _, pk = raw.partition("|")
        moment = datetime.fromisoformat(at)
        if moment.tzinfo is None:
            raise ValueError("a cursor's time has a zone")
        return moment, int(pk)
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError(str(exc)) from None


class AuditFilterForm(forms.Form):
    actor = forms.ChoiceField(
        label="Who",
        required=False,
        error_messages={"invalid_choice": "Nobody named %(value)s has done anything recorded."},
    )
    action = forms.ChoiceField(
        label="Action",
        required=False,
        error_messages={"invalid_choice": "No action %(value)s is recorded."},
    )
    since = forms.DateField(
        label="From", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    until = forms.DateField(
        label="To (inclusive)", required=False, widget=forms.DateInput(attrs={"type": "date"})
    )
    q = forms.CharField(label="Search target and detail", required=False, max_length=200)
    # The cursors: events older than ``after``, or newer than ``before``.
    after = forms.CharField(required=False, widget=forms.HiddenInput)
    before = forms.CharField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args: Any, actors: list[str], actions: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["actor"].choices = [("", "Anyone")] + [(a, a) for a in actors]
        self.fields["action"].choices = [("", "Any action")] + [(a, a) for a in actions]

    def _cursor(self, name: str) -> Cursor | None:
        token: str = self.cleaned_data[name]
        if not token:
            return None
        try:
            return decode_cursor(token)
        except ValueError:
            raise forms.ValidationError(BROKEN_CURSOR) from None

    def clean_after(self) -> Cursor | None:
        return self._cursor("after")

    def clean_before(self) -> Cursor | None:
        return self._cursor("before")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            self.add_error("until", "The end date is before the start date.")
        return data


@dataclass(frozen=True)
class AuditPage:
    events: list[AuditEvent]
    #: Cursors of the neighbouring pages, ``None`` where there is none.
    older: str | None
    newer: str | None


def filter_form(scope: Scope, data: Any) -> AuditFilterForm:
    """The page's filter form, bound to ``data`` (the URL's parameters): admins only."""
    require_admin(scope)
    recorded = AuditEvent.objects.order_by()
    return AuditFilterForm(
        data,
        actors=sorted(set(recorded.values_list("actor__username", flat=True))),
        actions=sorted(set(recorded.values_list("action", flat=True))),
    )


def _filtered(data: dict[str, Any]) -> QuerySet[AuditEvent]:
    found = AuditEvent.objects.select_related("actor")
    if data["actor"]:
        found = found.filter(actor__username=data["actor"])
    if data["action"]:
        found = found.filter(action=data["action"])
    # Days are the page's days: those of the zone its times are shown in.
    zone = timezone.get_current_timezone()
    if data["since"]:
        found = found.filter(at__gte=datetime.combine(data["since"], time.min, zone))
    if data["until"]:
        end = datetime.combine(data["until"] + timedelta(days=1), time.min, zone)
        found = found.filter(at__lt=end)
    if data["q"]:
        found = found.filter(Q(target__icontains=data["q"]) | Q(detail__icontains=data["q"]))
    return found


def audit_page(form: AuditFilterForm) -> AuditPage:
    """One page of the events ``form`` (valid) asks for, newest first."""
    data, size = form.cleaned_data, PAGE_SIZE
    found = _filtered(data)
    after, before = data["after"], data["before"]
    if before is not None:
        at, pk = before
        rows = list(
            found.filter(Q(at__gt=at) | Q(at=at, pk__gt=pk)).order_by("at", "pk")[: size + 1]
        )
        more_newer, events = len(rows) > size, rows[:size][::-1]
        more_older = True
    else:
        if after is not None:
            at, pk = after
            found = found.filter(Q(at__lt=at) | Q(at=at, pk__lt=pk))
        rows = list(found.order_by("-at", "-pk")[: size + 1])
        more_older, events = len(rows) > size, rows[:size]
        more_newer = after is not None
    return AuditPage(
        events=events,
        older=encode_cursor(events[-1]) if events and more_older else None,
        newer=encode_cursor(events[0]) if events and more_newer else None,
    )
