"""Every write of the organisations' agents: merchants' agents, their API keys and directory
listings, hosted agents' sessions; buyer platforms' agents and their API keys.

API keys are the arbiter's business (who may speak for which agent id), so these services ask
:mod:`arbiter_app.services` for them; private limits are not, so they are sealed here with the
vault key and never leave this package in clear. Key actions are recorded as
:class:`~sessions_app.models.AuditEvent` rows; no audit detail ever holds a limit.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from arbiter_app import selectors as arbiter
from arbiter_app import services as arbiter_services
from arbiter_app.models import AgentCredential, Listing
from oanp.agents.pricelist import PriceList, Unpriced
from oanp.agents.vaults import MerchantVault
from oanp.wire import discovery
from oanp.wire.commitments import SALT_BYTES, encode_salt
from oanp.wire.envelope import IDENTIFIER_RULE, is_identifier
from oanp.wire.settlement import NEVER_SETTLE, SettlePolicy
from sessions_app.models import (
    HOSTED_KEY_LABEL,
    AgentProfile,
    AuditEvent,
    HostedSession,
    Merchant,
    Mode,
    OrganisationKind,
    PlatformAgent,
)
from sessions_app.tactics import changed_tactics, settle_text, tactics_fields
from sessions_app.vault import seal, seal_session_vault, seal_text, unseal

MERCHANT_ROLE = "merchant"


class AgentIdTaken(ValueError):
    """The id names another agent already: taking it would show its sessions to this tenant."""


class NoLimits(ValueError):
    """A hosted agent without limits cannot commit to anything."""


class LimitsChanged(ValueError):
    """The limits a form was built on were saved again meanwhile: saving it would undo that."""


def vault_version(profile: AgentProfile) -> str:
    """Names the sealed limits as a form read them. A digest of the ciphertext, whose IV is
    random: it tells nothing of the limits, unlike a digest of the limits themselves."""
    return hashlib.sha256(bytes(profile.vault)).hexdigest()[:32]


class HostedKey(ValueError):
    """The hosted runner's key is not the merchant's to revoke."""


def audit(actor: AbstractBaseUser, action: str, target: str, **detail: Any) -> None:
    """Record that ``actor`` did ``action`` to ``target``, in the caller's transaction."""
    AuditEvent.objects.create(actor=actor, action=action, target=target, detail=detail)


def check_agent_id(agent_id: str) -> None:
    """Refuse an id that is malformed or that any agent, ours or an API client's, uses.

    Sessions are shown to the merchant whose agent id they name: reusing an id that already
    holds keys would hand another party's sessions to this tenant.
    """
    if not is_identifier(agent_id):
        raise ValueError(f"an agent id is {IDENTIFIER_RULE}")
    if (
        AgentProfile.objects.filter(agent_id=agent_id).exists()
        or PlatformAgent.objects.filter(agent_id=agent_id).exists()
        or arbiter.agent_id_in_use(agent_id)
    ):
        raise AgentIdTaken(f"the agent id {agent_id!r} is taken")


@transaction.atomic
def create_agent(
    *,
    actor: AbstractBaseUser,
    merchant: Merchant,
    agent_id: str,
    display_name: str,
    mode: str,
    strategy: str,
    limits: PriceList | None,
    parameters: Mapping[str, object] | None = None,
    settle: SettlePolicy = NEVER_SETTLE,
    reveal_after_end: bool = False,
) -> AgentProfile:
    """A new agent; ``parameters`` tune its ``strategy`` (none: the defaults). Refuses an
    unknown strategy or a bad parameter (``ValueError``), as :func:`update_agent` does."""
    check_agent_id(agent_id)
    if mode == Mode.HOSTED and not (limits and limits.limits):
        raise NoLimits("a hosted agent needs its limits")
    tactics = tactics_fields(strategy=strategy, parameters=parameters or {}, settle=settle)
    profile = AgentProfile.objects.create(
        merchant=merchant,
        agent_id=agent_id,
        display_name=display_name,
        mode=mode,
        vault=b"" if limits is None else seal(limits),
        reveal_after_end=reveal_after_end,
        **tactics,
    )
    if mode == Mode.HOSTED:
        hosted_credential(agent_id)  # the arbiter opens sessions only to a registered merchant
    audit(
        actor,
        "agent.created",
        agent_id,
        merchant=merchant.slug,
        mode=mode,
        strategy=strategy,
        parameters=tactics["parameters"],
        settle=settle_text(tactics),
        reveal_after_end=reveal_after_end,
    )
    return profile


@transaction.atomic
def update_agent(
    *,
    actor: AbstractBaseUser,
    profile: AgentProfile,
    display_name: str,
    mode: str,
    strategy: str,
    limits: PriceList | None,
    parameters: Mapping[str, object] | None = None,
    settle: SettlePolicy = NEVER_SETTLE,
    reveal_after_end: bool = False,
    limits_version: str | None = None,
) -> AgentProfile:
    """Change an agent; ``limits`` ``None`` keeps the sealed ones, else replaces them whole
    (the form builds them from the sealed ones and its edits, which it read at
    ``limits_version``: :class:`LimitsChanged` when they changed since, so that one save never
    undoes another's). The agent id never changes: it is the identity its keys and sessions
    are bound to. Running sessions keep the tactics and limits they opened with
    (:func:`open_hosted_session`)."""
    # Locked, then read again: the version is compared with what is sealed now.
    profile.vault = (
        AgentProfile.objects.select_for_update().values_list("vault", flat=True).get(pk=profile.pk)
    )
    if limits is not None and limits_version not in (None, vault_version(profile)):
        raise LimitsChanged("the agent's limits were saved by someone else since the form was read")
    if mode == Mode.HOSTED and (not profile.vault if limits is None else not limits.limits):
        raise NoLimits("a hosted agent needs its limits")
    tactics = tactics_fields(strategy=strategy, parameters=parameters or {}, settle=settle)
    changed = [
        name
        for name, value in (
            ("display_name", display_name),
            ("mode", mode),
            ("reveal_after_end", reveal_after_end),
        )
        if getattr(profile, name) != value
    ]
    changed += changed_tactics(profile.tactics(), tactics)
    profile.display_name, profile.mode = display_name, mode
    profile.reveal_after_end = reveal_after_end
    for name, value in tactics.items():
        setattr(profile, name, value)
    if limits is not None:
        profile.vault = seal(limits)
        changed.append("limits")
    # A save of the form is the owner's word on the limits as they now stand: an old vault's
    # currency is no longer a guess.
    profile.limits_read_as = ""
    # Only what this form edits: a listing saved meanwhile keeps its choice of currencies.
    profile.save(
        update_fields=[
            "display_name",
            "mode",
            "reveal_after_end",
            *tactics,
            "vault",
            "limits_read_as",
            "updated_at",
        ]
    )
    _republish(profile)
    if mode == Mode.HOSTED:
        hosted_credential(profile.agent_id)
    detail: dict[str, Any] = {"changed": changed}
    if {"strategy", "parameters", "settle"} & set(changed):
        detail |= {"parameters": tactics["parameters"], "settle": settle_text(tactics)}
    if "reveal_after_end" in changed:
        detail["reveal_after_end"] = reveal_after_end
    audit(actor, "agent.updated", profile.agent_id, **detail)
    return profile


@transaction.atomic
def create_platform_agent(
    *, actor: AbstractBaseUser, organisation: Merchant, agent_id: str
) -> PlatformAgent:
    """A buyer platform's new agent id, for its people to issue keys to."""
    if organisation.kind != OrganisationKind.BUYER_PLATFORM:
        raise ValueError(f"{organisation.name} is not a buyer platform: its agents sell")
    check_agent_id(agent_id)
    agent = PlatformAgent.objects.create(organisation=organisation, agent_id=agent_id)
    audit(actor, "buyer_agent.created", agent_id, organisation=organisation.slug)
    return agent


@transaction.atomic
def issue_key(
    *,
    actor: AbstractBaseUser,
    profile: AgentProfile | PlatformAgent,
    label: str,
    lifetime: timedelta | None = None,
) -> arbiter_services.IssuedKey:
    """A new key for the agent, expiring ``lifetime`` from now (``None``: never), owned by its
    organisation: the owner the arbiter's ``self_dealing`` check compares."""
    expires_at = None if lifetime is None else timezone.now() + lifetime
    issued = arbiter_services.issue_credential(
        agent_id=profile.agent_id,
        role=profile.key_role,
        label=label,
        expires_at=expires_at,
        owner=profile.key_owner,
    )
    audit(
        actor,
        "key.issued",
        profile.agent_id,
        prefix=issued.credential.prefix,
        label=label,
        expires_at=None if expires_at is None else expires_at.isoformat(),
    )
    return issued


@transaction.atomic
def revoke_key(
    *, actor: AbstractBaseUser, profile: AgentProfile | PlatformAgent, credential: AgentCredential
) -> None:
    if credential.agent_id != profile.agent_id or credential.role != profile.key_role:
        raise ValueError("this key does not belong to this agent")
    if credential.label == HOSTED_KEY_LABEL:
        raise HostedKey("the hosted runner's key is never shown, so it cannot leak")
    if credential.revoked_at is not None:
        return
    arbiter_services.revoke_credential(credential=credential)
    audit(actor, "key.revoked", profile.agent_id, prefix=credential.prefix, label=credential.label)


def hosted_credential(agent_id: str) -> AgentCredential | None:
    """The key a hosted agent's answers go in with; issued on first need, its secret dropped,
    to the merchant whose agent it is. ``None`` once its merchant revoked it without a new one
    (:func:`sessions_app.agent_lifecycle.revoke_runner_key`): issuing another here would undo
    the revocation."""
    runner_keys = arbiter.credentials_of(agent_id=agent_id, role=MERCHANT_ROLE).filter(
        label=HOSTED_KEY_LABEL
    )
    existing = runner_keys.filter(revoked_at__isnull=True).first()
    if existing is not None:
        return existing
    if runner_keys.exists():
        return None
    return issue_runner_key(agent_id)


def issue_runner_key(agent_id: str) -> AgentCredential:
    """A new key for the hosted runner of ``agent_id``, owned by the agent's merchant."""
    # Looked up here rather than passed in, so that whoever first needs the key, the runner
    # included, records its owner: the arbiter refuses sessions between one owner's agents.
    owner = (
        AgentProfile.objects.filter(agent_id=agent_id)
        .values_list("merchant__slug", flat=True)
        .first()
    )
    return arbiter_services.issue_credential(
        agent_id=agent_id, role=MERCHANT_ROLE, label=HOSTED_KEY_LABEL, owner=owner or ""
    ).credential


def open_hosted_session(
    *, profile: AgentProfile, session_id: str, item: dict[str, Any], currency: str
) -> HostedSession:
    """The hosted agent's side of ``session_id``, created on its first answer with a fresh salt
    and a copy of today's limits for ``item`` in ``currency``, tactics (strategy, parameters,
    settle policy) and choice to reveal after the end; the same row on every later call.

    When the agent holds no limits for that currency or item, the row keeps none and says
    why (``declined``): the agent declines the session rather than negotiate blind."""
    existing = HostedSession.objects.filter(session_id=session_id).select_related("agent").first()
    if existing is not None:
        return existing
    if not profile.vault:
        raise NoLimits(f"hosted agent {profile.agent_id} has no limits")
    prices = unseal(profile.vault)
    try:
        row = prices.limits_for(currency, item)
    except Unpriced as unpriced:
        sealed, declined = b"", _decline_reason(str(unpriced))
    else:
        vault = MerchantVault(row.floor_price, row.ideal_price, prices.terms)
        sealed, declined = seal_session_vault(vault), ""
    hosted, _ = HostedSession.objects.get_or_create(
        session_id=session_id,
        defaults={
            "agent": profile,
            "sealed_salt": seal_text(encode_salt(secrets.token_bytes(SALT_BYTES))),
            "sealed_limits": sealed,
            "declined": declined,
            "reveal_after_end": profile.reveal_after_end and not declined,
            **profile.tactics(),
        },
    )
    return hosted


def _decline_reason(why: str) -> str:
    """``why`` as a hosted session keeps it: cut to the column, which a buyer's long item
    key (quoted in it) must never overflow."""
    room = HostedSession._meta.get_field("declined").max_length
    assert room is not None
    return why if len(why) <= room else f"{why[: room - 1]}…"


def note_declined(*, hosted: HostedSession, why: str) -> None:
    """Record why the hosted agent declined its session, when the agent found out itself
    (its terms did not fit the declared issues)."""
    if not hosted.declined:
        hosted.declined = _decline_reason(why)
        HostedSession.objects.filter(pk=hosted.pk, declined="").update(declined=hosted.declined)


# The ACP handoff target ------------------------------------------------------------------


@transaction.atomic
def configure_acp(
    *,
    actor: AbstractBaseUser,
    profile: AgentProfile,
    endpoint: str,
    api_key: str = "",
    webhook_secret: str = "",
    new_secret: bool = False,
) -> str | None:
    """Where the agent's agreements are handed off. An empty ``api_key`` or
    ``webhook_secret`` keeps the stored one (a first target has none: its key is required and
    its secret generated); ``new_secret`` generates another. Returns a generated secret, to
    be shown once, else ``None``. ``ValueError`` (an SSRF refusal included) when the arbiter
    refuses the target.

    Where agreements go is the arbiter's business, so the target is kept by it; the audit
    records the endpoint and where the secret came from, never the key or the secret.
    """
    configured = arbiter_services.configure_handoff(
        merchant_agent_id=profile.agent_id,
        endpoint=endpoint,
        api_key=api_key.strip() or None,
        webhook_secret=webhook_secret.strip() or None,
        renew_secret=new_secret,
    )
    if webhook_secret.strip():
        source = "entered"
    else:
        source = "generated" if configured.generated else "kept"
    audit(actor, "acp.configured", profile.agent_id, endpoint=endpoint, secret=source)
    return configured.secret if configured.generated else None


#: How much of the endpoint's answer a test keeps: enough to read an error message.
TEST_EXCERPT_CHARS = 500


def send_acp_test(*, actor: AbstractBaseUser, profile: AgentProfile) -> dict[str, Any]:
    """Send the agent's handoff target a signed, test-marked request and record how it went.

    The audit event is the record the agent page shows, so a merchant and an admin see the
    same last result. ``ValueError`` when no target is configured.
    """
    answer = arbiter_services.send_test_handoff(merchant_agent_id=profile.agent_id)
    result = {
        "status": answer.status_code,
        "outcome": answer.outcome.value,
        "latency_ms": answer.latency_ms,
        "excerpt": answer.body[:TEST_EXCERPT_CHARS].decode("utf-8", "replace"),
        "error": answer.error[:TEST_EXCERPT_CHARS],
    }
    audit(actor, "acp.tested", profile.agent_id, **result)
    return result


# The directory listing -------------------------------------------------------------------


@transaction.atomic
def save_listing(
    *, actor: AbstractBaseUser, profile: AgentProfile, listing: discovery.Listing
) -> None:
    """Whether and how buyers' agents find this agent in the arbiter's directory, under its
    merchant's name, in the currencies it really negotiates in (:func:`published`).

    The directory is the arbiter's to publish, so the arbiter keeps the listing; the audit
    records what changed, not the catalog, which the listing itself holds.
    """
    before = arbiter.listing_of(profile.agent_id)
    profile.listing_currencies = list(listing.currencies)
    profile.save(update_fields=["listing_currencies"])
    saved = _publish(profile, listing)
    # Catalogs are kept canonical (JCS), so equal text is an equal catalog.
    changed = [
        name
        for name in ("listed", "description", "currencies", "catalog")
        if before is None or getattr(before, name) != getattr(saved, name)
    ]
    audit(
        actor,
        "listing.saved",
        profile.agent_id,
        listed=listing.listed,
        currencies=list(saved.currencies),
        catalog_items=len(listing.catalog),
        changed=changed,
    )


def published(profile: AgentProfile, chosen: tuple[str, ...]) -> tuple[str, ...]:
    """The currencies the directory lists for the agent: for a hosted agent, those of
    ``chosen`` it holds limits in (all it holds, when it holds none of them), so that a buyer's
    agent never picks a currency the agent would decline; an external agent's as chosen."""
    if profile.mode != Mode.HOSTED or not profile.vault:
        return chosen
    held = unseal(profile.vault).currencies
    return tuple(code for code in chosen if code in held) or (held if chosen else ())


def _publish(profile: AgentProfile, listing: discovery.Listing) -> Listing:
    return arbiter_services.save_listing(
        merchant_agent_id=profile.agent_id,
        merchant=profile.merchant.name,
        listing=replace(listing, currencies=published(profile, listing.currencies)),
    )


def _republish(profile: AgentProfile) -> None:
    """List the agent again in the currencies it now holds limits in, after they changed."""
    row = arbiter.listing_of(profile.agent_id)
    if row is None:
        return
    chosen = tuple(profile.listing_currencies) or tuple(row.currencies)
    listing = discovery.Listing(row.listed, row.description, chosen, tuple(json.loads(row.catalog)))
    _publish(profile, listing)
