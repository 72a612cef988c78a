"""The dashboard's reads, every one scoped by tenant.

A merchant member sees the sessions of its own merchant's agents and nothing else: to it,
another merchant's session does not exist (404, as for an unknown id). Operators and admins
see every session.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Avg, Count, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404, QueryDict

from arbiter_app import selectors as arbiter
from arbiter_app.models import (
    AgentCredential,
    DeliveryAttempt,
    Handoff,
    HandoffTarget,
    Listing,
    Session,
)
from oanp.machine import Phase
from sessions_app.filters import STATES, VIOLATED, SessionFilter
from sessions_app.models import AgentProfile, AuditEvent, HostedSession, Membership, Mode, Role
from sessions_app.vault import unseal


@dataclass(frozen=True)
class Scope:
    """What one dashboard user may see and do: the one home of the tenant and role rules.

    A merchant member sees its merchant's agents and their sessions, and manages and exports
    them; an operator sees every session and acts on live ones (terminate, redeliver) but
    changes no agent and exports nothing; an admin may do everything."""

    role: str
    merchant_id: int | None
    #: The merchant agents whose sessions are visible; ``None`` means every session.
    agent_ids: list[str] | None

    @property
    def is_merchant(self) -> bool:
        """Confined to one merchant's agents, sessions and exports."""
        return self.role == Role.MERCHANT

    @property
    def is_admin(self) -> bool:
        return self.role == Role.ADMIN

    @property
    def is_staff_role(self) -> bool:
        """Sees every tenant, the background work included, and acts on sessions."""
        return self.role in (Role.OPERATOR, Role.ADMIN)

    @property
    def may_manage_agents(self) -> bool:
        return self.role in (Role.MERCHANT, Role.ADMIN)

    @property
    def may_export(self) -> bool:
        # Operators watch sessions; exporting them is an admin's job, or a merchant's for its own.
        return self.role in (Role.ADMIN, Role.MERCHANT)


def scope_of(user: AbstractBaseUser | AnonymousUser) -> Scope | None:
    """What ``user`` may see; ``None`` for a user with no membership (sees nothing)."""
    membership = Membership.objects.filter(user_id=user.pk).first()
    if membership is None:
        return None
    if membership.role != Role.MERCHANT:
        return Scope(membership.role, None, None)
    agent_ids = list(
        AgentProfile.objects.filter(merchant_id=membership.merchant_id).values_list(
            "agent_id", flat=True
        )
    )
    return Scope(membership.role, membership.merchant_id, agent_ids)


def sessions(scope: Scope) -> QuerySet[Session]:
    return arbiter.sessions_of(scope.agent_ids)


def session_filter(scope: Scope, params: QueryDict) -> SessionFilter:
    """The list's filters bound to ``params`` over the sessions in scope: ``qs`` is what they
    let through, ``errors`` the values they left out."""
    return SessionFilter(params, sessions(scope), scope=scope)


def session(scope: Scope, session_id: str) -> Session:
    found = sessions(scope).filter(session_id=session_id).first()
    if found is None:
        raise Http404("no such session")
    return found


def entries(found: Session) -> list[dict[str, Any]]:
    return arbiter.session_entries(found)


# Agents --------------------------------------------------------------------------------------


def agents(scope: Scope) -> QuerySet[AgentProfile]:
    """A merchant member's own merchant's agents; every agent for operators and admins."""
    found = AgentProfile.objects.select_related("merchant")
    if scope.merchant_id is not None:
        found = found.filter(merchant_id=scope.merchant_id)
    return found


def agent(scope: Scope, agent_id: str) -> AgentProfile:
    found = agents(scope).filter(agent_id=agent_id).first()
    if found is None:
        raise Http404("no such agent")
    return found


def keys_of(profile: AgentProfile) -> QuerySet[AgentCredential]:
    return arbiter.credentials_of(agent_id=profile.agent_id, role="merchant")


def limit_items(profile: AgentProfile) -> list[str] | None:
    """The item keys with limits of their own, never the limits; ``None`` when none are set."""
    if not profile.vault:
        return None
    return sorted(unseal(profile.vault).per_item)


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
    kind: str,
    state: str,
    target: str,
    after: arbiter.Position | None,
    limit: int,
) -> tuple[list[arbiter.Delivery], arbiter.Position | None]:
    """A page of the deliveries in scope, newest first, and where the next page starts."""
    return arbiter.delivery_page(
        scope.agent_ids,
        kind=kind or None,
        state=state or None,
        target=target,
        after=after,
        limit=limit,
    )


def delivery(scope: Scope, kind: str, pk: int) -> tuple[arbiter.Delivery, list[DeliveryAttempt]]:
    found = arbiter.delivery_of(scope.agent_ids, kind, pk)
    if found is None:
        raise Http404("no such delivery")
    return found


def failed_handoffs(scope: Scope, pks: list[int]) -> list[arbiter.Delivery]:
    return arbiter.failed_handoffs(scope.agent_ids, pks)


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
