"""Every write of a merchant agent's life after its creation: paused, resumed, archived; its
hosted runner's key rotated or revoked; and an agent issued outside the dashboard
(``manage.py create_agent``) taken into an organisation.

Whether an agent takes new sessions is the arbiter's to enforce, so it is kept by the arbiter
(:func:`arbiter_app.services.set_availability`), which refuses the opens: a pause stops an
external agent's buyers as surely as a hosted one's. Each act is audited.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction

from arbiter_app import selectors as arbiter
from arbiter_app import services as arbiter_services
from arbiter_app.models import AgentCredential, AgentRole, Availability
from sessions_app.lifecycle_selectors import availability_of, live_runner_keys
from sessions_app.models import (
    AgentProfile,
    Merchant,
    Mode,
    OrganisationKind,
    PlatformAgent,
)
from sessions_app.services import audit, issue_runner_key

#: What each change of availability is called in the audit log, by the state it sets.
AVAILABILITY_ACTIONS = {
    Availability.ACTIVE: "agent.resumed",
    Availability.PAUSED: "agent.paused",
    Availability.ARCHIVED: "agent.archived",
}

#: The role an organisation's agents speak in, by its kind.
ROLE_OF_KIND = {
    OrganisationKind.MERCHANT: AgentRole.MERCHANT,
    OrganisationKind.BUYER_PLATFORM: AgentRole.BUYER,
}


class NotClaimable(ValueError):
    """The agent id is no unclaimed agent of the organisation's side."""


@transaction.atomic
def set_availability(*, actor: AbstractBaseUser, profile: AgentProfile, state: str) -> bool:
    """Pause, resume or archive the agent; whether anything changed. Sessions already running
    go on. Resuming a hosted agent whose runner's key was revoked issues the runner a new one:
    resumed, it answers again."""
    if state not in AVAILABILITY_ACTIONS:
        raise ValueError(f"state {state!r} is not one of {', '.join(Availability.values)}")
    before = availability_of(profile)
    if before == state:
        return False
    arbiter_services.set_availability(merchant_agent_id=profile.agent_id, state=state)
    detail: dict[str, object] = {"before": before}
    if (
        state == Availability.ACTIVE
        and profile.mode == Mode.HOSTED
        and not live_runner_keys(profile)
    ):
        detail["runner_key"] = issue_runner_key(profile.agent_id).prefix
    audit(actor, AVAILABILITY_ACTIONS[Availability(state)], profile.agent_id, **detail)
    return True


def _revoke(keys: list[AgentCredential]) -> list[AgentCredential]:
    return [
        revoked
        for key in keys
        for revoked in arbiter_services.revoke_credentials(agent_id=key.agent_id, prefix=key.prefix)
    ]


def _require_hosted(profile: AgentProfile) -> None:
    if profile.mode != Mode.HOSTED:
        raise ValueError(f"agent {profile.agent_id} is external: it has no hosted runner")


@transaction.atomic
def rotate_runner_key(*, actor: AbstractBaseUser, profile: AgentProfile) -> AgentCredential:
    """Give the hosted runner a new key and revoke its old one at once: the next answer goes
    in with the new key, and a request with the old one is refused."""
    _require_hosted(profile)
    revoked = _revoke(live_runner_keys(profile))
    issued = issue_runner_key(profile.agent_id)
    audit(
        actor,
        "runner_key.rotated",
        profile.agent_id,
        revoked=[key.prefix for key in revoked],
        prefix=issued.prefix,
    )
    return issued


@transaction.atomic
def revoke_runner_key(*, actor: AbstractBaseUser, profile: AgentProfile) -> None:
    """Revoke the hosted runner's key without a new one, and pause the agent: without a key it
    cannot answer, so a new session could only wait out its window. Running sessions get no
    more answers and close when their timers run out. Rotating or resuming gives it a key."""
    _require_hosted(profile)
    live = live_runner_keys(profile)
    if not live:
        raise ValueError("the hosted runner holds no live key: there is nothing to revoke")
    revoked = _revoke(live)
    before = availability_of(profile)
    if before == Availability.ACTIVE:
        arbiter_services.set_availability(
            merchant_agent_id=profile.agent_id, state=Availability.PAUSED
        )
    audit(
        actor,
        "runner_key.revoked",
        profile.agent_id,
        revoked=[key.prefix for key in revoked],
        paused=before == Availability.ACTIVE,
    )


# Agents issued outside the dashboard -------------------------------------------------------


def adopt_agent(*, agent_id: str, organisation: Merchant) -> AgentProfile | PlatformAgent:
    """Show ``agent_id`` on the dashboard as ``organisation``'s agent, external (its keys
    were issued outside the dashboard, so its owner's process speaks for it). The same row
    when it is already the organisation's; :class:`NotClaimable` when another organisation
    holds the id."""
    merchant = AgentProfile.objects.filter(agent_id=agent_id).first()
    buyer = PlatformAgent.objects.filter(agent_id=agent_id).first()
    if organisation.kind == OrganisationKind.BUYER_PLATFORM:
        if merchant is None and (buyer is None or buyer.organisation_id == organisation.pk):
            return buyer or PlatformAgent.objects.create(
                agent_id=agent_id, organisation=organisation
            )
    elif buyer is None and (merchant is None or merchant.merchant_id == organisation.pk):
        return merchant or AgentProfile.objects.create(
            agent_id=agent_id, merchant=organisation, mode=Mode.EXTERNAL
        )
    raise NotClaimable(f"agent {agent_id} is another organisation's agent")


@transaction.atomic
def claim_agent(
    *, actor: AbstractBaseUser, agent_id: str, organisation: Merchant
) -> AgentProfile | PlatformAgent:
    """Take an agent whose keys were issued to no organisation of the dashboard into
    ``organisation``: it shows there, and its keys are recorded as the organisation's, so
    the arbiter refuses sessions between it and the organisation's other agents."""
    role = ROLE_OF_KIND[OrganisationKind(organisation.kind)]
    claimed = AgentProfile.objects.filter(agent_id=agent_id).exists() or (
        PlatformAgent.objects.filter(agent_id=agent_id).exists()
    )
    if claimed or not arbiter.credentials_of(agent_id=agent_id, role=role).exists():
        raise NotClaimable(
            f"no unclaimed {role} agent {agent_id!r}: {organisation.name}'s agents {_verb(role)}"
        )
    agent = adopt_agent(agent_id=agent_id, organisation=organisation)
    keys = arbiter_services.assign_owner(agent_id=agent_id, role=role, owner=organisation.slug)
    audit(actor, "agent.claimed", agent_id, organisation=organisation.slug, role=role, keys=keys)
    return agent


def _verb(role: str) -> str:
    return "buy" if role == AgentRole.BUYER else "sell"
