"""Where people and hosted agents work: organisations (merchants and buyer platforms), who
belongs to which, invitations to join, the agents merchants configure, exports and the admin
audit log.

A merchant's private limits live here, encrypted with the vault key; the arbiter has no
import path to them (``arbiter_app`` never imports ``sessions_app``).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models.functions import Lower

from oanp.agents.strategies import STRATEGIES, Strategy
from oanp.wire.settlement import SettlePolicy


class OrganisationKind(models.TextChoices):
    """Which side of a session an organisation's agents sit on."""

    MERCHANT = "merchant", "Merchant"
    BUYER_PLATFORM = "buyer_platform", "Buyer platform"


class Merchant(models.Model):
    """An organisation: the tenant its members, agents and sessions belong to. Most are
    merchants, whose agents sell; a buyer platform's agents buy. Its slug is the owner the
    arbiter records on its agents' keys, which the arbiter's ``self_dealing`` check compares."""

    name = models.CharField(max_length=200, unique=True)
    slug = models.SlugField(max_length=64, unique=True)
    kind = models.CharField(
        max_length=16, choices=OrganisationKind.choices, default=OrganisationKind.MERCHANT
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class MemberRole(models.TextChoices):
    """What a person may do in the dashboard, as their membership records it."""

    MERCHANT_MANAGER = "merchant_manager", "Merchant manager"
    MERCHANT_MEMBER = "merchant_member", "Merchant member"
    BUYER_MEMBER = "buyer_member", "Buyer-platform member"
    OPERATOR = "operator", "Operator"
    ADMIN = "admin", "Admin"


#: The roles confined to one organisation, and the kind of organisation each belongs to.
TENANT_ROLES = {
    MemberRole.MERCHANT_MANAGER: OrganisationKind.MERCHANT,
    MemberRole.MERCHANT_MEMBER: OrganisationKind.MERCHANT,
    MemberRole.BUYER_MEMBER: OrganisationKind.BUYER_PLATFORM,
}

# Spelled out for the constraint, which a migration copies as it stands.
_TENANT_ROLE_VALUES = sorted(str(role) for role in TENANT_ROLES)


class Membership(models.Model):
    """What a user may see and do: a member of an organisation sees its organisation only (a
    merchant manager also changes its agents); operators see every session, read-only but for
    terminating one; admins also manage keys, exports and people."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="membership"
    )
    role = models.CharField(max_length=16, choices=MemberRole.choices)
    merchant = models.ForeignKey(
        Merchant, on_delete=models.CASCADE, null=True, blank=True, related_name="members"
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(role__in=_TENANT_ROLE_VALUES, merchant__isnull=False)
                | (~models.Q(role__in=_TENANT_ROLE_VALUES) & models.Q(merchant__isnull=True)),
                name="tenant_member_has_organisation",
            )
        ]

    def __str__(self) -> str:
        return f"{self.user} ({self.role})"


class Mode(models.TextChoices):
    EXTERNAL = "external", "External (its own process, through the API)"
    HOSTED = "hosted", "Hosted here with a strategy"


class SettleWhen(models.TextChoices):
    """When a hosted agent reveals its floor first to settle
    (:class:`oanp.wire.settlement.SettlePolicy`)."""

    NEVER = "never", "Never first (a buyer's reveal is still answered)"
    STUCK = "stuck", "Once the spread stops narrowing"
    ROUND = "round", "From a round on"


class HostedTactics(models.Model):
    """How a hosted merchant agent negotiates: a strategy of
    :data:`oanp.agents.strategies.STRATEGIES` with its parameters (as
    :meth:`~oanp.agents.strategies.NamedStrategy.stored` keeps them), and when it reveals to settle.
    An agent's profile holds the current choice; each of its sessions a copy taken at open."""

    strategy = models.CharField(max_length=32, default="reference")
    parameters = models.JSONField(default=dict, blank=True)
    settle_when = models.CharField(
        max_length=8, choices=SettleWhen.choices, default=SettleWhen.NEVER
    )
    settle_from_round = models.PositiveSmallIntegerField(default=1)

    class Meta:
        abstract = True

    def merchant_strategy(self) -> Strategy:
        return STRATEGIES[self.strategy].build("merchant", self.parameters)

    def settle_policy(self) -> SettlePolicy:
        return SettlePolicy(self.settle_when, self.settle_from_round)

    def tactics(self) -> dict[str, object]:
        """The fields a session copies at its open."""
        return {name: getattr(self, name) for name in TACTICS_FIELDS}


TACTICS_FIELDS = ("strategy", "parameters", "settle_when", "settle_from_round")


class AgentProfile(HostedTactics):
    """A merchant's agent. ``vault`` holds its private limits, Fernet-encrypted with
    ``settings.OANP_VAULT_KEY``: no page, API answer or arbiter table shows them in clear."""

    merchant = models.ForeignKey(Merchant, on_delete=models.CASCADE, related_name="agents")
    agent_id = models.CharField(max_length=64, unique=True)
    display_name = models.CharField(max_length=200, blank=True)
    mode = models.CharField(max_length=16, choices=Mode.choices, default=Mode.HOSTED)
    vault = models.BinaryField(default=b"")
    #: Whether a hosted agent reveals the limits it committed to once a session ends, for the
    #: session's analytics. Off unless the merchant turns it on: a reveal puts the floor in
    #: the arbiter's record for good.
    reveal_after_end = models.BooleanField(default=False)
    #: The currency a vault sealed before limits had one was read in, once, by migration
    #: 0006; the agent page says so until the owner saves the agent's form, which clears it.
    limits_read_as = models.CharField(max_length=3, blank=True)
    #: The currencies the owner chose to list; the directory shows those the agent holds
    #: limits in (:func:`sessions_app.services.published`).
    listing_currencies = models.JSONField(default=list, blank=True)
    #: The private JWK a hosted agent signs its envelopes with (docs/protocol.md §17), sealed
    #: as its vault is; made and registered on its first answer (:mod:`sessions_app.hosted_keys`).
    sealed_signing_key = models.BinaryField(default=b"")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["merchant__name", "agent_id"]

    def __str__(self) -> str:
        return self.agent_id

    #: The side its keys speak for; its merchant owns them, so the arbiter refuses a session
    #: between it and a buyer agent of the same owner (``self_dealing``).
    key_role = "merchant"

    @property
    def key_owner(self) -> str:
        return self.merchant.slug


#: The label of the key a hosted agent's answers are submitted with. Nobody ever sees it.
HOSTED_KEY_LABEL = "hosted runner (never shown)"


class PlatformAgent(models.Model):
    """A buyer platform's agent: an id its people hold API keys for, run by the platform's own
    process through the API. Nothing of it is hosted here, so there is nothing else to keep."""

    organisation = models.ForeignKey(
        Merchant, on_delete=models.CASCADE, related_name="buyer_agents"
    )
    agent_id = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["agent_id"]

    def __str__(self) -> str:
        return self.agent_id

    #: The side its keys speak for, as :class:`AgentProfile`'s speak for the merchant's.
    key_role = "buyer"

    @property
    def key_owner(self) -> str:
        return self.organisation.slug


class HostedSession(HostedTactics):
    """A hosted agent's side of one session: the salt of its commitment, sealed like the
    vault, so the agent can be rebuilt to answer the next envelope.

    The limits, strategy, parameters and settle policy are copied here when the session
    opens: the commitment is made over those limits, and an agent rebuilt for every move must
    play one way throughout, so a merchant editing its agent mid-session changes neither.
    """

    agent = models.ForeignKey(AgentProfile, on_delete=models.CASCADE, related_name="sessions")
    session_id = models.CharField(max_length=64, unique=True)
    sealed_salt = models.BinaryField()
    #: The one row of the agent's price list the session is negotiated on; empty when the
    #: agent held none for the session's currency and item, and declined it.
    sealed_limits = models.BinaryField(default=b"")
    #: Why the agent declined the session before acking (no limits in its currency, an item
    #: it does not price, terms that do not fit), in words that name no limit; else empty.
    declined = models.CharField(max_length=300, blank=True)
    #: The agent's ``reveal_after_end`` at open: a session reveals only what the merchant
    #: agreed to reveal before it began (and still agrees to when it ends).
    reveal_after_end = models.BooleanField(default=False)
    #: When the reveal after the end went in, or was refused for good: nothing is left to send.
    reveal_done_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)


class Export(models.Model):
    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"

    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="exports"
    )
    scope = models.JSONField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    progress = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    bundle = models.FileField(upload_to="exports/", blank=True)
    summary_csv = models.FileField(upload_to="exports/", blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    #: The bundle's signed checkpoint, kept so that a later export can prove it extends this
    #: one without reading the file.
    checkpoint = models.JSONField(null=True, blank=True)
    #: The earlier export of the same scope whose tree this one's extends, proven by the
    #: consistency proof in its bundle.
    extends = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="extended_by"
    )

    class Meta:
        ordering = ["-created_at"]


class AuditEvent(models.Model):
    """Who did what that an auditor must be able to see: key actions, exports, terminations."""

    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="audit_events"
    )
    action = models.CharField(max_length=64)
    target = models.CharField(max_length=200, blank=True)
    detail = models.JSONField(default=dict, blank=True)
    at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-at"]


class Invitation(models.Model):
    """An admin's invitation to a person, by email, to join with a role (and, for a tenant
    role, an organisation). Its link is signed over the row and ``nonce``: sending it again
    draws a new nonce, so only the latest link works, and only until ``expires_at`` and once."""

    email = models.EmailField()
    role = models.CharField(max_length=16, choices=MemberRole.choices)
    organisation = models.ForeignKey(
        Merchant, on_delete=models.CASCADE, null=True, blank=True, related_name="invitations"
    )
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="invitations_sent"
    )
    nonce = models.CharField(max_length=43)
    sent_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-sent_at"]
        constraints = [
            # Two admins inviting one address at once get one invitation; an expired one is
            # closed when the address is invited again.
            models.UniqueConstraint(
                Lower("email"),
                condition=models.Q(accepted_at__isnull=True, revoked_at__isnull=True),
                name="one_open_invitation_per_address",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.email} ({self.role})"


class SavedView(models.Model):
    """A named set of the sessions list's filters, as the list's URL carries them. Its owner's
    alone, or shared with the owner's team: everyone of its organisation for a member of
    one, every operator and admin for an operator or an admin (as Temporal's saved views)."""

    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="saved_views"
    )
    name = models.CharField(max_length=100)
    #: The list's query string, filters and sort only: never a page's cursor.
    query = models.TextField(blank=True)
    shared = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "name"], name="one_view_name_per_owner")
        ]

    def __str__(self) -> str:
        return self.name
