"""The dashboard's reads, every one scoped by tenant.

A member of an organisation sees the sessions of its own organisation's agents and nothing
else: to it, another organisation's session does not exist (404, as for an unknown id).
Operators and admins see every session; only admins see people and organisations.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import User
from django.db.models import (
    Avg,
    Case,
    Count,
    DateTimeField,
    Exists,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce
from django.http import Http404, QueryDict

from arbiter_app import selectors as arbiter
from arbiter_app.models import (
    AgentCredential,
    AgentRole,
    DeliveryAttempt,
    Entry,
    Handoff,
    HandoffTarget,
    Listing,
    Session,
)
from oanp.agents.pricelist import PriceList
from oanp.audit.replay import Frame
from oanp.audit.replay import replay as replay_log
from oanp.wire.snapshot import load_state
from oanp.wire.state import Phase, SessionState
from oanp.wire.terms import issues_open, terms_json
from oanp.wire.transcript import terms_text
from sessions_app.analytics import plain
from sessions_app.filters import SORTS, STATES, VIOLATED, SessionFilter, encode_cursor
from sessions_app.models import (
    HOSTED_KEY_LABEL,
    AgentProfile,
    AuditEvent,
    HostedSession,
    Invitation,
    Merchant,
    Mode,
    OrganisationKind,
    PlatformAgent,
)
from sessions_app.tenancy import Scope
from sessions_app.vault import unseal


def sessions(scope: Scope) -> QuerySet[Session]:
    if scope.is_buyer_side:
        return arbiter.sessions_bought_by(scope.agent_ids or [])
    return arbiter.sessions_of(scope.agent_ids)


def session_filter(scope: Scope, params: QueryDict) -> SessionFilter:
    """The list's filters bound to ``params`` over the sessions in scope: ``qs`` is what they
    let through, ``errors`` the values they left out."""
    return SessionFilter(params, sessions(scope), scope=scope)


@dataclass(frozen=True)
class SessionRow:
    """One line of the sessions list: the session and what its snapshot says in words."""

    session: Session
    item: str
    outcome: str


@dataclass(frozen=True)
class SessionPage:
    rows: list[SessionRow]
    #: The next page's ``cursor``; ``None`` on the last page.
    next_cursor: str | None
    #: The newest session the filters let through: arrivals are counted from it.
    newest: int


def _head(column: str) -> Subquery:
    """A column of the session's head entry, its latest."""
    head = Entry.objects.filter(session_id=OuterRef("pk"), seq=OuterRef("head_seq"))
    return Subquery(head.values(column)[:1])


def _head_time() -> Cast:
    return Cast(_head("received_at"), DateTimeField())


def hosted_among(agent_ids: Collection[str]) -> set[str]:
    """Those of ``agent_ids`` that are hosted agents, which the arbiter runs itself: not one
    whose merchant revoked its runner's key, which the merchant stopped answering."""
    runner_keys = AgentCredential.objects.filter(
        agent_id=OuterRef("agent_id"), role=AgentRole.MERCHANT, label=HOSTED_KEY_LABEL
    )
    answering = Exists(runner_keys.filter(revoked_at__isnull=True)) | ~Exists(runner_keys)
    hosted = AgentProfile.objects.filter(answering, agent_id__in=agent_ids, mode=Mode.HOSTED)
    return set(hosted.values_list("agent_id", flat=True))


def hosted_turns_waiting(*, asked_before: datetime, limit: int) -> list[str]:
    """Live sessions in which a hosted agent is to move since ``asked_before`` or earlier,
    soonest due first: for the host's sweep, not for a page, so no tenant's scope.

    Only a buyer's move hands the merchant the turn, and every merchant move or arbiter
    entry after it hands it back or ends the session, so the merchant is to move exactly
    while the head entry is the buyer's. One query."""
    hosted = AgentProfile.objects.filter(mode=Mode.HOSTED).values("agent_id")
    waiting = (
        Session.objects.filter(merchant_agent_id__in=hosted)
        .exclude(phase__in=[phase.value for phase in Phase if phase.is_terminal])
        .annotate(asked_by=_head("sender_role"), asked_at=_head_time())
        .filter(asked_by=AgentRole.BUYER, asked_at__lte=asked_before)
        .order_by("next_deadline")
        .values_list("session_id", flat=True)
    )
    return list(waiting[:limit])


def session_page(found: SessionFilter, size: int) -> SessionPage:
    """A page of a valid filter's sessions in its sort, after its cursor if it has one.

    Keyset paging on (sort value, id), the id breaking ties: a page never repeats or skips a
    row as sessions open, whatever the sort. Each sort value is a column compared as stored
    (last activity too, no longer the head entry's text cast to a time, which SQLite cut to
    milliseconds, so the boundary row came back on the next page); a session that moves while
    the user pages still comes out exactly once per walk, as long as it does not move across
    the cursor."""
    data = found.form.cleaned_data
    column = SORTS[data["sort"].lstrip("-")][0]
    descending = data["sort"].startswith("-")
    listed = found.qs.annotate(
        # The states in the order a session lives them, not alphabetically.
        state_order=Case(*(When(phase=s, then=Value(n)) for n, s in enumerate(STATES))),
    )
    if data["cursor"] is not None:
        value, pk = data["cursor"]
        beyond = "lt" if descending else "gt"
        listed = listed.filter(
            Q(**{f"{column}__{beyond}": value}) | Q(**{column: value, f"pk__{beyond}": pk})
        )
    sign = "-" if descending else ""
    rows = list(listed.order_by(f"{sign}{column}", f"{sign}pk")[: size + 1])
    more = len(rows) > size
    rows = rows[:size]
    return SessionPage(
        rows=[_row(s) for s in rows],
        next_cursor=encode_cursor(getattr(rows[-1], column), rows[-1].pk) if more else None,
        newest=found.qs.aggregate(newest=Max("pk"))["newest"] or 0,
    )


def session_rows(scope: Scope, session_ids: list[str]) -> list[SessionRow]:
    """The list's rows of those of ``session_ids`` in scope, as they stand now, whatever the
    list's filters: a live list redraws the rows it shows with them."""
    found = sessions(scope).filter(session_id__in=session_ids)
    return [_row(s) for s in found.order_by("pk")]


def live_sessions(scope: Scope, session_ids: list[str]) -> list[Session]:
    """Those of ``session_ids`` in scope that have not ended, in the order they opened."""
    terminal = [phase.value for phase in Phase if phase.is_terminal]
    found = sessions(scope).filter(session_id__in=session_ids).exclude(phase__in=terminal)
    return list(found.order_by("opened_at", "pk"))


def sessions_named(scope: Scope, session_ids: list[str]) -> list[Session]:
    """Those of ``session_ids`` in scope, in the order they opened."""
    return list(sessions(scope).filter(session_id__in=session_ids).order_by("opened_at", "pk"))


def opened_since(found: SessionFilter, newest: int) -> int:
    """How many of a valid filter's sessions opened after the session ``newest``."""
    return found.qs.filter(pk__gt=newest).count()


def _row(found: Session) -> SessionRow:
    state = load_state(json.loads(found.state))
    return SessionRow(found, _item_text(state.item), _outcome(found, state))


#: How much of an item the list shows before it cuts it short.
ITEM_CHARS = 40


def _item_text(item: dict[str, Any]) -> str:
    """The item in a few words: its route when it has one, else its first fields."""
    if isinstance(item.get("route"), str):
        text = item["route"]
    else:
        text = ", ".join(f"{key} {value}" for key, value in list(item.items())[:2])
    return text if len(text) <= ITEM_CHARS else text[: ITEM_CHARS - 1] + "…"


def _outcome(found: Session, state: SessionState) -> str:
    """How the session ended, or where a live one stands and who is to move; with issues, the
    agreed terms, or how many issues are still open."""
    phase = Phase(found.phase)
    party = state.turn.value if state.turn else "nobody"
    if phase is Phase.AGREED:
        agreed = f"agreed at {plain(found.final_price)} {found.currency}"
        if state.issues and state.merchant_terms is not None:
            # An agreement leaves both sides standing on the terms it accepted.
            agreed += " with " + terms_text(terms_json(state.issues, state.merchant_terms))
        return agreed
    if phase is Phase.CLOSED:
        return f"closed: {found.close_reason.replace('_', ' ') or 'no reason given'}"
    if phase is Phase.OPENING:
        return "opened, merchant to acknowledge"
    if phase is Phase.SETTLING:
        return f"settling, {party} to reveal"
    where = f"round {found.round}"
    if state.issues:
        still = issues_open(state.issues, state.buyer_standing_terms, state.merchant_terms)
        where += f", {still} issue{'' if still == 1 else 's'} open"
    if state.final_answer:
        return f"{where}, buyer's final answer due"
    return f"{where}, {party} to move"


def session(scope: Scope, session_id: str) -> Session:
    found = sessions(scope).filter(session_id=session_id).first()
    if found is None:
        raise Http404("no such session")
    return found


def entries(found: Session) -> list[dict[str, Any]]:
    return arbiter.session_entries(found)


def log_download(found: Session) -> str:
    """The session's log as the API's log endpoint answers it, with the arbiter's keys."""
    return arbiter.log_text(found, with_keys=True)


def replay(found: Session) -> list[Frame]:
    """The session's log step by step, each step audited over the entries up to it with every
    key the arbiter ever signed with, as the offline auditor would (:mod:`oanp.audit.replay`)."""
    return replay_log(entries(found), arbiter.every_public_jwk())


def summary(found: Session) -> dict[str, Any]:
    """The session summary agents read (item, turn, timers, final answer), from its state."""
    return arbiter.summary_of(found)


def termination(scope: Scope, found: Session) -> AuditEvent | None:
    """Who terminated the session and when, from the audit log: for operators and admins only,
    since a merchant member is not told which of the arbiter's staff acted."""
    if not scope.is_staff_role or found.close_reason != "operator_terminated":
        return None
    return (
        AuditEvent.objects.filter(
            action="session.terminate", target=found.session_id, detail__closed=True
        )
        .select_related("actor")
        .first()
    )


# Agents --------------------------------------------------------------------------------------


def agents(scope: Scope) -> QuerySet[AgentProfile]:
    """A merchant member's own merchant's agents; every agent for operators and admins."""
    found = AgentProfile.objects.select_related("merchant")
    if scope.merchant_id is not None:
        found = found.filter(merchant_id=scope.merchant_id)
    return found


@dataclass(frozen=True)
class AgentRow:
    """An agent on the agents list, with the figures of the sessions it negotiated."""

    agent: AgentProfile
    sessions: int = 0
    agreed: int = 0
    last_activity: datetime | None = None
    #: Whether it takes new sessions (an :class:`~arbiter_app.models.Availability`).
    availability: str = "active"

    @property
    def agreement_rate(self) -> float | None:
        """Agreements per session; ``None`` before the first session, when there is none."""
        return self.agreed / self.sessions if self.sessions else None


def agent_rows(scope: Scope, *, archived: bool = False) -> list[AgentRow]:
    """The agents in scope, each with its sessions, agreements and last activity: one
    grouped query over the sessions of exactly these agents, whatever their number. Archived
    agents only when ``archived``, and only then."""
    in_scope = agents(scope).annotate(availability=arbiter.availability_column("agent_id"))
    retired = Q(availability="archived")
    listed = list(in_scope.filter(retired) if archived else in_scope.exclude(retired))
    figures = {
        row["merchant_agent_id"]: row
        for row in arbiter.sessions_of([a.agent_id for a in listed])
        .values("merchant_agent_id")
        .annotate(
            total=Count("id"),
            agreed=Count("id", filter=Q(phase=Phase.AGREED)),
            last=Max("last_activity_at"),
        )
        .order_by()
    }
    rows = []
    for profile in listed:
        found = figures.get(profile.agent_id)
        state = profile.availability
        if found is None:
            rows.append(AgentRow(profile, availability=state))
        else:
            rows.append(AgentRow(profile, found["total"], found["agreed"], found["last"], state))
    return rows


def agent(scope: Scope, agent_id: str) -> AgentProfile:
    found = agents(scope).filter(agent_id=agent_id).first()
    if found is None:
        raise Http404("no such agent")
    return found


def api_keys_of(profile: AgentProfile | PlatformAgent) -> QuerySet[AgentCredential]:
    return arbiter.credentials_of(agent_id=profile.agent_id, role=profile.key_role)


def price_list(profile: AgentProfile) -> PriceList | None:
    """The agent's sealed limits, for the services and the form to merge edits into; never
    for a template."""
    return unseal(profile.vault) if profile.vault else None


def limit_rows(profile: AgentProfile) -> list[str] | None:
    """Where the agent holds limits, as "USD, any item" or "EUR, SFO-JFK", never the limits;
    ``None`` when none are set."""
    prices = price_list(profile)
    if prices is None:
        return None
    return [f"{row.currency}, {row.item or 'any item'}" for row in prices.limits]


def limit_issues(profile: AgentProfile) -> list[str]:
    """The issues the sealed limits weigh besides the price, by name only, in their order."""
    prices = price_list(profile)
    terms = prices.terms if prices is not None else None
    return [] if terms is None else [issue.name for issue in terms.issues]


#: How many of its latest declined sessions an agent's page lists.
AGENT_PAGE_DECLINES = 5


def declines(profile: AgentProfile) -> list[HostedSession]:
    """The agent's latest sessions it declined before acking, each with why."""
    return list(
        HostedSession.objects.filter(agent=profile)
        .exclude(declined="")
        .order_by("-created_at")[:AGENT_PAGE_DECLINES]
    )


def declined(found: Session) -> str | None:
    """Why a hosted merchant agent declined ``found``, if it did."""
    return (
        HostedSession.objects.filter(session_id=found.session_id)
        .exclude(declined="")
        .values_list("declined", flat=True)
        .first()
    )


def listing(profile: AgentProfile) -> Listing | None:
    """The agent's entry in the arbiter's directory, listed or not: public, unlike its limits."""
    return arbiter.listing_of(profile.agent_id)


# The ACP handoff -----------------------------------------------------------------------------


def acp_target(profile: AgentProfile) -> HandoffTarget | None:
    return arbiter.handoff_target_of(profile.agent_id)


def last_acp_test(profile: AgentProfile) -> AuditEvent | None:
    """The latest "send test" of the agent's target: its audit event is its record."""
    return (
        AuditEvent.objects.filter(action="acp.tested", target=profile.agent_id)
        .select_related("actor")
        .first()
    )


def handoff(found: Session) -> tuple[Handoff | None, list[DeliveryAttempt]]:
    """The handoff of a session the caller has already been allowed to see, and its attempts."""
    handed = arbiter.handoff_of(found)
    return handed, [] if handed is None else arbiter.handoff_attempts(handed)


def revealed(found: Session) -> dict[str, dict[str, Any]]:
    return arbiter.revealed_constraints(found)


# Deliveries across sessions: handoffs and callbacks --------------------------------------------


def deliveries(
    scope: Scope,
    *,
    agent: str = "",
    kind: str = "",
    state: str = "",
    target: str = "",
    after: arbiter.Position | None = None,
    limit: int,
) -> tuple[list[arbiter.Delivery], arbiter.Position | None]:
    """A page of the deliveries in scope, newest first, and where the next page starts;
    with ``agent``, only that merchant agent's (none when it is not in scope)."""
    agent_ids = scope.merchant_agent_ids
    if agent:
        agent_ids = [agent] if agent_ids is None or agent in agent_ids else []
    return arbiter.delivery_page(
        agent_ids,
        kind=kind or None,
        state=state or None,
        target=target,
        after=after,
        limit=limit,
    )


def delivery(scope: Scope, kind: str, pk: int) -> tuple[arbiter.Delivery, list[DeliveryAttempt]]:
    found = arbiter.delivery_of(scope.merchant_agent_ids, kind, pk)
    if found is None:
        raise Http404("no such delivery")
    return found


def resendable_deliveries(scope: Scope, kind: str, pks: list[int]) -> list[arbiter.Delivery]:
    return arbiter.resendable(scope.merchant_agent_ids, kind, pks)


# Across sessions -----------------------------------------------------------------------------


def counts_by_state(scope: Scope) -> dict[str, int]:
    """Sessions in scope per state, every stored state named (0 where there are none)."""
    found = dict(sessions(scope).values_list("phase").annotate(n=Count("id")).order_by())
    return {state: found.get(state, 0) for state in STATES}


def agreements_per_hour(scope: Scope, now: datetime) -> list[tuple[datetime, int]]:
    """Agreements in scope in each of the 24 hours up to ``now``'s, oldest first."""
    hours = [
        now.replace(minute=0, second=0, microsecond=0) - timedelta(hours=h)
        for h in range(23, -1, -1)
    ]
    agreed = Counter(
        ended.replace(minute=0, second=0, microsecond=0)
        for ended in sessions(scope)
        .filter(phase=Phase.AGREED, ended_at__gte=hours[0])
        .values_list("ended_at", flat=True)
    )
    return [(hour, agreed.get(hour, 0)) for hour in hours]


@dataclass(frozen=True)
class ViolationRate:
    merchant_agent_id: str
    sessions: int
    violated: int

    @property
    def rate(self) -> float:
        return self.violated / self.sessions


def violation_rates(scope: Scope, limit: int = 20) -> list[ViolationRate]:
    """The merchant agents in scope with the most sessions holding a violated round."""
    rows = (
        sessions(scope)
        .values("merchant_agent_id")
        .annotate(total=Count("id"), violations=Count("id", filter=VIOLATED))
        .order_by("-violations", "merchant_agent_id")[:limit]
    )
    return [ViolationRate(r["merchant_agent_id"], r["total"], r["violations"]) for r in rows]


def by_strategy(scope: Scope) -> list[dict[str, Any]]:
    """Per strategy of the hosted merchant agents in scope: sessions, agreements and the mean
    round of agreement. A session counts under the strategy it was opened with (copied on
    the hosted session), else under its agent's present one."""
    hosted = agents(scope).filter(mode=Mode.HOSTED)
    strategy = Coalesce(
        Subquery(
            HostedSession.objects.filter(session_id=OuterRef("session_id")).values("strategy")[:1]
        ),
        Subquery(
            AgentProfile.objects.filter(agent_id=OuterRef("merchant_agent_id")).values("strategy")[
                :1
            ]
        ),
    )
    agreed = Q(phase=Phase.AGREED)
    rows = (
        sessions(scope)
        .filter(merchant_agent_id__in=hosted.values("agent_id"))
        .annotate(strategy=strategy)
        .values("strategy")
        .annotate(
            total=Count("id"),
            agreed=Count("id", filter=agreed),
            mean_rounds=Avg("round", filter=agreed),
        )
        .order_by("strategy")
    )
    return [{**row, "rate": row["agreed"] / row["total"] if row["total"] else 0.0} for row in rows]


# Organisations and people ------------------------------------------------------------------


def merchants() -> QuerySet[Merchant]:
    """The organisations whose agents sell: the only ones an agent profile may belong to."""
    return Merchant.objects.filter(kind=OrganisationKind.MERCHANT)


def organisations(scope: Scope) -> QuerySet[Merchant]:
    """Every organisation, with how many people and agents each has, for an admin; to anyone
    else, none: people and organisations are the admins' business."""
    found = Merchant.objects.annotate(
        people=Count("members", distinct=True),
        # An organisation has agents of one kind: a merchant's sell, a platform's buy.
        agent_count=Count("agents", distinct=True) + Count("buyer_agents", distinct=True),
    )
    return found if scope.is_admin else found.none()


def organisation(scope: Scope, pk: int) -> Merchant:
    found = organisations(scope).filter(pk=pk).first()
    if found is None:
        raise Http404("no such organisation")
    return found


def people(scope: Scope, organisation: Merchant | None = None) -> QuerySet[User]:
    """Every account (with its membership, when it has one) for an admin, or those of
    ``organisation``; none for anyone else."""
    found = User.objects.select_related("membership__merchant").order_by("username")
    if organisation is not None:
        found = found.filter(membership__merchant=organisation)
    return found if scope.is_admin else found.none()


def person(scope: Scope, user_id: int) -> User:
    found = people(scope).filter(pk=user_id).first()
    if found is None:
        raise Http404("no such person")
    return found


def invitations(scope: Scope, organisation: Merchant | None = None) -> QuerySet[Invitation]:
    """The invitations not yet accepted or revoked, expired ones included (they may be sent
    again), newest first; for admins only."""
    found = Invitation.objects.select_related("organisation", "invited_by").filter(
        accepted_at__isnull=True, revoked_at__isnull=True
    )
    if organisation is not None:
        found = found.filter(organisation=organisation)
    return found if scope.is_admin else found.none()


def invitation(scope: Scope, pk: int) -> Invitation:
    found = invitations(scope).filter(pk=pk).first()
    if found is None:
        raise Http404("no such invitation")
    return found


# Buyer platforms' agents -------------------------------------------------------------------


def platform_agents(scope: Scope) -> QuerySet[PlatformAgent]:
    """A buyer platform's own agents for its members; every platform's for operators and
    admins; none for a merchant's people."""
    found = PlatformAgent.objects.select_related("organisation")
    if scope.is_staff_role:
        return found
    if scope.is_buyer_side:
        return found.filter(organisation_id=scope.merchant_id)
    return found.none()


def platform_agent(scope: Scope, agent_id: str) -> PlatformAgent:
    found = platform_agents(scope).filter(agent_id=agent_id).first()
    if found is None:
        raise Http404("no such agent")
    return found
