"""Reads of a merchant agent's life: whether it takes new sessions, its hosted runner's live
key, and the agents issued outside the dashboard that no organisation has claimed yet."""

from __future__ import annotations

from django.db.models import QuerySet
from django.http import Http404

from arbiter_app import selectors as arbiter
from arbiter_app.models import AgentCredential, AgentRole
from sessions_app.models import (
    HOSTED_KEY_LABEL,
    AgentProfile,
    Merchant,
    OrganisationKind,
    PlatformAgent,
)
from sessions_app.tenancy import Scope

#: The kind of organisation whose agents speak in each role.
KIND_OF_ROLE = {
    AgentRole.MERCHANT: OrganisationKind.MERCHANT,
    AgentRole.BUYER: OrganisationKind.BUYER_PLATFORM,
}


def availability_of(profile: AgentProfile) -> str:
    """Whether the agent takes new sessions: an :class:`~arbiter_app.models.Availability`."""
    return arbiter.availabilities([profile.agent_id])[profile.agent_id]


def live_runner_keys(profile: AgentProfile) -> list[AgentCredential]:
    """The hosted runner's keys that still open the API (one, but for a race on first need)."""
    keys = arbiter.credentials_of(agent_id=profile.agent_id, role=AgentRole.MERCHANT)
    return list(keys.filter(label=HOSTED_KEY_LABEL, revoked_at__isnull=True))


def unclaimed_agents(scope: Scope) -> list[arbiter.KeyedAgent]:
    """The agents some key was issued to (``manage.py create_agent``) that no organisation
    of the dashboard holds, each by role, for an admin to claim; none for anyone else."""
    if not scope.is_admin:
        return []
    return arbiter.keyed_agents(
        excluding=[
            AgentProfile.objects.values_list("agent_id", flat=True),
            PlatformAgent.objects.values_list("agent_id", flat=True),
        ]
    )


def unclaimed_agent(scope: Scope, agent_id: str) -> list[arbiter.KeyedAgent]:
    """The unclaimed agent's roles (one, or both when keys of each were issued to its id);
    404 when there is no such unclaimed agent, or the viewer is no admin."""
    found = [row for row in unclaimed_agents(scope) if row.agent_id == agent_id]
    if not found:
        raise Http404("no such unclaimed agent")
    return found


def claimable_organisations(roles: list[str]) -> QuerySet[Merchant]:
    """The organisations an agent with keys in ``roles`` may be claimed into: those whose
    agents speak in one of them."""
    return Merchant.objects.filter(kind__in=[KIND_OF_ROLE[AgentRole(r)] for r in roles])
