"""What the dashboard's lists filter sessions by: state, merchant, party, item or route, agreed
price, currency, profile, close reason, verdicts, settlement, how long it lasted, time range (a
preset or from/to) and session id, and how the sessions list is sorted and paged. Each reads a
column of the session row with its own index (arbiter_app.models.Session), so no filter reads
entries or the state's JSON.

A value that is not one of a filter's choices leaves that filter out of ``qs``;
:meth:`SessionFilter.is_valid` and ``errors`` say which values were refused, and the list
refuses the page (400) rather than show sessions the user did not ask for."""

from __future__ import annotations

import base64
import binascii
import json
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import django_filters
from django import forms
from django.core.validators import RegexValidator
from django.db.models import Q, QuerySet
from django.utils import timezone

from arbiter_app.models import VERDICT_COUNTS, Session, Settlement
from oanp.wire.profiles import PROFILES, Reason, VerdictStatus
from oanp.wire.state import Phase
from sessions_app.models import AgentProfile
from sessions_app.tenancy import Scope

#: The phases a stored session can be in: EVALUATING lasts only within the step ending a round.
STATES = tuple(phase.value for phase in Phase if phase is not Phase.EVALUATING)
RANGES = {"1h": timedelta(hours=1), "24h": timedelta(days=1), "7d": timedelta(days=7)}

#: The filter of the sessions with a round judged each way, from the row's verdict counts.
JUDGED = {status: Q(**{f"{column}__gt": 0}) for status, column in VERDICT_COUNTS.items()}
VERDICTS = tuple(JUDGED)
VIOLATED = JUDGED[VerdictStatus.VIOLATED.value]
#: The profiles a session can be opened under, as the list offers them.
PROFILE_NAMES = tuple(sorted(PROFILES))
#: The reasons a session can close with (docs/protocol.md §7): the rationales of a round's
#: verdict close none.
CLOSE_REASONS = tuple(
    reason.value
    for reason in Reason
    if reason
    not in (
        Reason.OPENING_MOVES,
        Reason.SPREAD_NARROWED,
        Reason.SPREAD_UNCHANGED,
        Reason.TERMS_NARROWED,
    )
)
#: Settlement by reveal as the list names it: "none" for the sessions opened without it.
SETTLEMENTS = {
    ("none" if value == Settlement.NONE else str(value)): (str(value), str(label))
    for value, label in Settlement.choices
}
#: The longest a session can last, in minutes: its deadline is at most a day ahead.
LONGEST_MINUTES = 24 * 60

#: The list's sortable columns by their name in ``sort``: the annotation each sorts on (the
#: selectors add them) and its header. ``-name`` sorts descending; the row id breaks ties.
SORTS = {
    "opened": ("opened_at", "Opened"),
    "activity": ("last_activity_at", "Last activity"),
    "state": ("state_order", "State"),
}
DEFAULT_SORT = "-opened"


def encode_cursor(value: datetime | int, pk: int) -> str:
    """Where a page ends, as the next page's ``cursor``: the last row's sort value and id.

    Opaque to the user so that no one builds one by hand; a tampered one is a form error."""
    raw = value.isoformat() if isinstance(value, datetime) else value
    return base64.urlsafe_b64encode(json.dumps([raw, pk]).encode()).decode().rstrip("=")


def _decode_cursor(text: str, sort: str) -> tuple[datetime | int, int]:
    """The inverse of :func:`encode_cursor` for ``sort``; ``ValueError`` for anything else."""
    try:
        raw, pk = json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))
    except (binascii.Error, UnicodeDecodeError, TypeError, ValueError) as refused:
        raise ValueError from refused
    if type(pk) is not int:
        raise ValueError
    if sort.lstrip("-") == "state":
        if type(raw) is not int:
            raise ValueError
        return raw, pk
    if not isinstance(raw, str):
        raise ValueError
    moment = datetime.fromisoformat(raw)
    if moment.tzinfo is None:
        raise ValueError
    return moment, pk


class ListForm(forms.Form):
    """The list's parameters beside its filters: the sort, the page and the from/to range's
    order. :class:`SessionFilter` adds its filters' fields to these."""

    sort = forms.ChoiceField(
        required=False,
        choices=[
            (f"{d}{key}", f"{label} ({'descending' if d else 'ascending'})")
            for key, (_, label) in SORTS.items()
            for d in ("", "-")
        ],
    )
    cursor = forms.CharField(required=False, label="Page")
    #: The newest session the page showed: the live list counts the ones opened since.
    since = forms.IntegerField(required=False, min_value=0, widget=forms.HiddenInput)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        data["sort"] = data.get("sort") or DEFAULT_SORT
        start, end = data.get("opened_after"), data.get("opened_before")
        if start and end and end <= start:
            self.add_error("opened_before", "must be later than From.")
        low, high = data.get("price_min"), data.get("price_max")
        if low is not None and high is not None and high < low:
            self.add_error("price_max", "must be at least the lowest price.")
        shortest, longest = data.get("lasted_min"), data.get("lasted_max")
        if shortest is not None and longest is not None and longest < shortest:
            self.add_error("lasted_max", "must be at least the shortest time.")
        if data.get("cursor") and "sort" not in self.errors:
            try:
                data["cursor"] = _decode_cursor(data["cursor"], data["sort"])
            except ValueError:
                self.add_error("cursor", "is not a page of this list; start again from the top.")
        else:
            data["cursor"] = None
        return data


class SessionFilter(django_filters.FilterSet):
    """The sessions list's filters, by the names of its URL parameters.

    Bound to a scope: the merchant filter is for those who see every tenant, and a merchant
    member's ``merchant`` parameter is ignored, as for any parameter the list does not know."""

    state = django_filters.ChoiceFilter(
        field_name="phase", choices=[(state, state.lower()) for state in STATES], label="State"
    )
    # Not stripped: a slug of blanks names no merchant, so it matches no session.
    merchant = django_filters.CharFilter(method="by_merchant", strip=False)
    agent = django_filters.CharFilter(method="by_agent", label="Party", max_length=64)
    item = django_filters.CharFilter(
        field_name="item_text", lookup_expr="icontains", label="Item or route", max_length=200
    )
    # The agreed price: a session that did not agree has none, so a price range lists
    # agreements only.
    price_min = django_filters.NumberFilter(
        field_name="final_price",
        lookup_expr="gte",
        label="Agreed price from",
        min_value=0,
        max_digits=17,
        decimal_places=4,
    )
    price_max = django_filters.NumberFilter(
        field_name="final_price",
        lookup_expr="lte",
        label="Agreed price to",
        min_value=0,
        max_digits=17,
        decimal_places=4,
    )
    currency = django_filters.CharFilter(
        method="by_currency",
        label="Currency",
        validators=[
            RegexValidator(r"^[A-Za-z]{3}$", "is three letters, as in USD or EUR (ISO 4217).")
        ],
    )
    close_reason = django_filters.ChoiceFilter(
        choices=[(reason, reason.replace("_", " ")) for reason in CLOSE_REASONS],
        label="Close reason",
    )
    settlement = django_filters.ChoiceFilter(
        choices=[(key, label) for key, (_, label) in SETTLEMENTS.items()],
        method="by_settlement",
        label="Settlement",
    )
    lasted_min = django_filters.NumberFilter(
        method="by_lasted",
        label="Lasted at least (minutes)",
        min_value=0,
        max_value=LONGEST_MINUTES,
        decimal_places=0,
    )
    lasted_max = django_filters.NumberFilter(
        method="by_lasted",
        label="Lasted at most (minutes)",
        min_value=0,
        max_value=LONGEST_MINUTES,
        decimal_places=0,
    )
    verdict = django_filters.ChoiceFilter(
        choices=[(verdict, f"a round judged {verdict}") for verdict in VERDICTS],
        method="by_verdict",
    )
    violation = django_filters.ChoiceFilter(
        choices=[("yes", "has a violation")], method="by_violation"
    )
    profile = django_filters.ChoiceFilter(
        choices=[(name, name) for name in PROFILE_NAMES], label="Profile"
    )
    range = django_filters.ChoiceFilter(
        choices=[(key, f"last {key}") for key in RANGES], method="by_range", label="Opened"
    )
    opened_after = django_filters.IsoDateTimeFilter(
        field_name="opened_at", lookup_expr="gte", label="From"
    )
    opened_before = django_filters.IsoDateTimeFilter(
        field_name="opened_at", lookup_expr="lt", label="To"
    )
    q = django_filters.CharFilter(
        field_name="session_id", lookup_expr="icontains", label="Search", max_length=64
    )

    class Meta:
        form = ListForm

    def __init__(self, data: Any, queryset: QuerySet[Session], *, scope: Scope) -> None:
        super().__init__(data, queryset)
        if not scope.is_staff_role:
            del self.filters["merchant"]

    def filter_queryset(self, queryset: QuerySet[Session]) -> QuerySet[Session]:
        # The form also holds the list's sort, cursor and since: the selectors' to apply.
        for name, value in self.form.cleaned_data.items():
            if name in self.filters:
                queryset = self.filters[name].filter(queryset, value)
        return queryset

    def by_merchant(self, sessions: QuerySet[Session], name: str, slug: str) -> QuerySet[Session]:
        agent_ids = AgentProfile.objects.filter(merchant__slug=slug).values("agent_id")
        return sessions.filter(merchant_agent_id__in=agent_ids)

    def by_agent(self, sessions: QuerySet[Session], name: str, agent: str) -> QuerySet[Session]:
        return sessions.filter(Q(merchant_agent_id=agent) | Q(buyer_agent_id=agent))

    def by_verdict(self, sessions: QuerySet[Session], name: str, status: str) -> QuerySet[Session]:
        return sessions.filter(JUDGED[status])

    def by_violation(self, sessions: QuerySet[Session], name: str, _: str) -> QuerySet[Session]:
        return sessions.filter(VIOLATED)

    def by_currency(self, sessions: QuerySet[Session], name: str, code: str) -> QuerySet[Session]:
        return sessions.filter(currency=code.upper())

    def by_settlement(self, sessions: QuerySet[Session], name: str, key: str) -> QuerySet[Session]:
        return sessions.filter(settlement=SETTLEMENTS[key][0])

    def by_lasted(
        self, sessions: QuerySet[Session], name: str, minutes: Decimal
    ) -> QuerySet[Session]:
        # Only an ended session has lasted: a live one is left out of either bound.
        bound = "gte" if name == "lasted_min" else "lte"
        return sessions.filter(**{f"lasted__{bound}": timedelta(minutes=int(minutes))})

    def by_range(self, sessions: QuerySet[Session], name: str, key: str) -> QuerySet[Session]:
        return sessions.filter(opened_at__gte=timezone.now() - RANGES[key])
