"""The arbiter's records: sessions, their append-only logs, who may speak for which agent, and
the keys agreements are signed with. Only :mod:`arbiter_app.services` writes them."""

from __future__ import annotations

import json

from django.db import models
from django.utils import timezone

from oanp.wire.party_signatures import PartyKey
from oanp.wire.profiles import VerdictStatus
from oanp.wire.state import Phase, SessionState


class AgentRole(models.TextChoices):
    """The side an agent negotiates on, as its API keys and callbacks record it."""

    BUYER = "buyer"
    MERCHANT = "merchant"


class AgentCredential(models.Model):
    """One API key of one agent. The key is shown once; only its SHA-256 is kept.

    Keys carry 192 random bits, so a fast hash is enough: there is nothing to brute-force.
    """

    agent_id = models.CharField(max_length=64, db_index=True)
    role = models.CharField(max_length=16, choices=AgentRole.choices)
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    label = models.CharField(max_length=200, blank=True)
    #: Who the key was issued to (a dashboard merchant's slug, or any name an operator gives):
    #: never on the wire; two agents of one owner may not face each other in a session.
    owner = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    #: Past this moment the key is refused like a revoked one; ``None`` never expires.
    expires_at = models.DateTimeField(null=True, blank=True)
    #: When the key last authenticated a request, to the minute (:mod:`arbiter_app.auth`).
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["agent_id", "-created_at"]

    def __str__(self) -> str:
        return f"{self.role} {self.agent_id} ({self.prefix}…)"

    @property
    def active(self) -> bool:
        return self.revoked_at is None and not self.expired

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    #: A credential authenticates a request in the role of a user (DRF's ``request.user``).
    is_authenticated = True


#: The session column counting the rounds judged with each verdict status.
VERDICT_COUNTS = {
    VerdictStatus.FAIR.value: "fair_rounds",
    VerdictStatus.FAIR_BUT_STUCK.value: "stuck_rounds",
    VerdictStatus.VIOLATED.value: "violated_rounds",
}


class Settlement(models.TextChoices):
    """How far a session's settlement by simultaneous reveal (docs/protocol.md §9) went."""

    NONE = "", "not offered"
    OFFERED = "offered", "offered, no reveal"
    REVEALED = "revealed", "a limit revealed, not settled"
    SETTLED = "settled", "settled at the midpoint"


def settlement_of(state: SessionState) -> str:
    """Where ``state`` stands in its settlement by reveal, as :class:`Settlement` names it."""
    if state.settlement is None:
        return Settlement.NONE
    revealed = (state.revealed_ceiling, state.revealed_floor)
    if None not in revealed and state.phase is Phase.AGREED:
        return Settlement.SETTLED
    if revealed != (None, None):
        return Settlement.REVEALED
    return Settlement.OFFERED


class Session(models.Model):
    """One negotiation. ``state`` is the machine's snapshot; the columns beside it are copies
    for queries and indexes (who, what state, when the next timer falls due)."""

    session_id = models.CharField(max_length=64, unique=True)
    buyer_agent_id = models.CharField(max_length=64, db_index=True)
    merchant_agent_id = models.CharField(max_length=64, db_index=True)
    #: Labelled by the value itself, so admin pages show the phase as before it had choices.
    phase = models.CharField(
        max_length=16, db_index=True, choices=[(p.value, p.value) for p in Phase]
    )
    round = models.PositiveSmallIntegerField(default=0)
    currency = models.CharField(max_length=3)
    profile = models.CharField(max_length=64)
    opened_at = models.DateTimeField(db_index=True)
    next_deadline = models.DateTimeField(null=True, blank=True, db_index=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    final_price = models.DecimalField(max_digits=17, decimal_places=4, null=True, blank=True)
    close_reason = models.CharField(max_length=32, blank=True)
    head_seq = models.PositiveIntegerField(default=0)
    head_hash = models.CharField(max_length=71)
    #: Rounds judged each way so far, counted as their verdicts are appended, so that views of
    #: many sessions filter on verdicts without reading entries.
    fair_rounds = models.PositiveSmallIntegerField(default=0)
    stuck_rounds = models.PositiveSmallIntegerField(default=0)
    violated_rounds = models.PositiveSmallIntegerField(default=0, db_index=True)
    #: JSON text of :func:`oanp.wire.snapshot.dump_state`. Text, not jsonb: envelopes may carry
    #: strings (``\u0000``) that PostgreSQL's jsonb refuses.
    state = models.TextField()
    #: JSON text: ``{"buyer": {...}, "merchant": {...}}``, each a checked reveal.
    reveals = models.TextField(default="{}", blank=True)
    #: The item's keys and values as plain lines (:func:`oanp.wire.discovery.catalog_text`):
    #: what the dashboard's item search reads, since no index reaches into ``state``.
    item_text = models.TextField(blank=True)
    #: When the head entry was received, as a column so that lists sort and page on it
    #: exactly; ``None`` only on rows written before it existed and not yet moved.
    last_activity_at = models.DateTimeField(null=True, blank=True)
    #: From open to end, once the session has ended.
    lasted = models.DurationField(null=True, blank=True)
    settlement = models.CharField(max_length=8, blank=True, choices=Settlement.choices)

    class Meta:
        ordering = ["-opened_at"]
        # The dashboard's filters and keyset pages, each on an index; the text searches'
        # trigram index is PostgreSQL's alone (migration 0015).
        indexes = [
            models.Index(fields=["opened_at", "id"], name="session_opened_page"),
            models.Index(fields=["last_activity_at", "id"], name="session_activity_page"),
            models.Index(fields=["currency"], name="session_currency"),
            models.Index(fields=["profile"], name="session_profile"),
            models.Index(fields=["close_reason"], name="session_close_reason"),
            models.Index(fields=["final_price"], name="session_final_price"),
            models.Index(fields=["lasted"], name="session_lasted"),
            models.Index(fields=["settlement"], name="session_settlement"),
            models.Index(
                fields=["stuck_rounds"],
                condition=models.Q(stuck_rounds__gt=0),
                name="session_stuck",
            ),
            models.Index(
                fields=["fair_rounds"], condition=models.Q(fair_rounds__gt=0), name="session_fair"
            ),
        ]

    def __str__(self) -> str:
        return self.session_id

    @property
    def is_terminal(self) -> bool:
        return Phase(self.phase).is_terminal


class Entry(models.Model):
    """One log entry, exactly as hashed. The database refuses to update or delete it."""

    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="entries")
    seq = models.PositiveIntegerField()
    message_id = models.CharField(max_length=64)
    type = models.CharField(max_length=32)
    sender_role = models.CharField(max_length=16)
    sender_agent_id = models.CharField(max_length=64)
    received_at = models.CharField(max_length=40)
    #: The envelope as JCS text: exactly the bytes hashed into ``entry_hash``.
    envelope = models.TextField()
    prev_hash = models.CharField(max_length=71)
    entry_hash = models.CharField(max_length=71)
    #: For a party's entry: SHA-256 of its canonical envelope, to tell a replay from a reuse.
    body_digest = models.CharField(max_length=71, blank=True)
    #: For a party's entry: the JSON text of the 201 body, served again on a replay.
    answer = models.TextField(blank=True)

    class Meta:
        ordering = ["session_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["session", "seq"], name="entry_seq_unique"),
            models.UniqueConstraint(fields=["session", "message_id"], name="entry_message_unique"),
        ]
        verbose_name_plural = "entries"

    def __str__(self) -> str:
        return f"{self.session_id} #{self.seq} {self.type}"

    def as_json(self) -> dict[str, object]:
        return {
            "seq": self.seq,
            "received_at": self.received_at,
            "envelope": json.loads(self.envelope),
            "prev_hash": self.prev_hash,
            "entry_hash": self.entry_hash,
        }


class KeyState(models.TextChoices):
    ACTIVE = "active"
    RETIRING = "retiring"
    RETIRED = "retired"


class SigningKey(models.Model):
    """An arbiter signing key. The private JWK is Fernet-encrypted with a key from settings;
    the public JWK stays readable forever, so old agreements stay verifiable."""

    kid = models.CharField(max_length=64, unique=True)
    alg = models.CharField(max_length=16)
    public_jwk = models.JSONField()
    private_jwk_encrypted = models.BinaryField()
    state = models.CharField(max_length=16, choices=KeyState.choices, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    activated_at = models.DateTimeField()
    retiring_at = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-activated_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["state"],
                condition=models.Q(state="active"),
                name="one_active_signing_key",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kid} ({self.state})"


# Party keys (docs/protocol.md §12) -----------------------------------------------------------


class AgentKey(models.Model):
    """A public key an agent registered to sign its envelopes, named by its thumbprint. Never
    deleted: a retired key still checks the signatures it made while it was in force."""

    agent_id = models.CharField(max_length=64)
    kid = models.CharField(max_length=64)
    #: The public JWK as registered: kty, crv, x (and y), kid, alg, use.
    jwk = models.JSONField()
    registered_at = models.DateTimeField()
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["agent_id", "registered_at", "pk"]
        constraints = [
            models.UniqueConstraint(fields=["agent_id", "kid"], name="agent_key_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} {self.kid}"

    def as_party_key(self) -> PartyKey:
        return PartyKey(self.agent_id, self.jwk, self.registered_at, self.retired_at)


class SignatureRequirement(models.Model):
    """An agent whose owner requires every envelope it sends to be signed: a row is the
    requirement; none, signatures are welcome and checked, not required."""

    agent_id = models.CharField(max_length=64, unique=True)
    required_since = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.agent_id} signs every envelope"


# Outbound deliveries -------------------------------------------------------------------------


class HandoffTarget(models.Model):
    """Where a merchant's agreements are handed off (docs/protocol.md §15): its ACP endpoint,
    the ACP key the arbiter presents there and the secret its deliveries are signed with,
    both Fernet-encrypted like the signing keys."""

    merchant_agent_id = models.CharField(max_length=64, unique=True)
    endpoint = models.URLField(max_length=2000)
    api_key_encrypted = models.BinaryField()
    webhook_secret_encrypted = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    #: Set when the endpoint answered 410 or stopped being an allowed address.
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["merchant_agent_id"]

    def __str__(self) -> str:
        return f"{self.merchant_agent_id} → {self.endpoint}"


class HandoffState(models.TextChoices):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"
    DISABLED = "disabled"


class Handoff(models.Model):
    """The ACP checkout of one agreed session: an outbox row, written in the agreement's own
    transaction, so an agreement is handed off exactly when it commits."""

    session = models.OneToOneField(Session, on_delete=models.PROTECT, related_name="handoff")
    target = models.ForeignKey(HandoffTarget, on_delete=models.PROTECT, related_name="handoffs")
    state = models.CharField(
        max_length=16, choices=HandoffState.choices, default=HandoffState.PENDING, db_index=True
    )
    #: Delivered, but the merchant's checkout does not carry the agreed price.
    flagged = models.BooleanField(default=False)
    flag_reason = models.CharField(max_length=300, blank=True)
    #: Attempts since the handoff was created or last redelivered.
    attempts = models.PositiveIntegerField(default=0)
    #: When the next attempt may start; while one runs, when it is presumed dead.
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    #: JSON text of the checkout request, fixed at creation: every retry sends the same bytes.
    body = models.TextField()
    created_at = models.DateTimeField(auto_now_add=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    checkout_id = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"handoff of {self.session_id} ({self.state})"


class AgentCallback(models.Model):
    """An agent's URL that receives every new entry of its sessions, signed with ``secret``."""

    agent_id = models.CharField(max_length=64)
    role = models.CharField(max_length=16, choices=AgentRole.choices)
    url = models.URLField(max_length=2000)
    secret_encrypted = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["agent_id", "role"]
        constraints = [
            models.UniqueConstraint(fields=["agent_id", "role"], name="one_callback_per_agent")
        ]

    def __str__(self) -> str:
        return f"{self.role} {self.agent_id} → {self.url}"


class CallbackCursor(models.Model):
    """How far one callback has received one session's log. Entries go out one at a time, in
    seq order: the next is ``delivered_seq + 1``."""

    callback = models.ForeignKey(AgentCallback, on_delete=models.CASCADE, related_name="cursors")
    session = models.ForeignKey(Session, on_delete=models.PROTECT, related_name="+")
    #: The last entry delivered, or given up on after a permanent refusal.
    delivered_seq = models.PositiveIntegerField(default=0)
    #: Attempts at the entry after ``delivered_seq``.
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["callback", "session"], name="one_cursor_per_session")
        ]

    def __str__(self) -> str:
        return f"{self.callback} @ {self.session_id}#{self.delivered_seq}"


class DeliveryAttempt(models.Model):
    """One POST of a handoff or of a callback's entry, as it went."""

    handoff = models.ForeignKey(
        Handoff, null=True, blank=True, on_delete=models.CASCADE, related_name="attempt_log"
    )
    cursor = models.ForeignKey(
        CallbackCursor, null=True, blank=True, on_delete=models.CASCADE, related_name="attempt_log"
    )
    #: The entry a callback attempt carried.
    seq = models.PositiveIntegerField(null=True, blank=True)
    #: 1, 2, 3… over the delivery's whole life (a callback's: per entry), redeliveries included.
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    #: Scheme, host and port of the URL, by which attempts in flight are counted against
    #: ``OANP_DELIVERIES_PER_TARGET`` (:mod:`arbiter_app.deliveries.bound`).
    origin = models.CharField(max_length=2000, blank=True)
    #: The request as sent, with its credentials and signatures masked before they were kept;
    #: empty while it runs, when it was abandoned, or when no request went out.
    request_method = models.CharField(max_length=8, blank=True)
    request_url = models.TextField(blank=True)
    request_headers = models.JSONField(default=dict, blank=True)
    request_body = models.TextField(blank=True)
    #: ``None``: no answer (a network error, a refused target, or still running).
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    latency_ms = models.PositiveIntegerField(null=True, blank=True)
    outcome = models.CharField(max_length=16, blank=True)
    response_headers = models.JSONField(default=dict, blank=True)
    response_excerpt = models.TextField(blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(handoff__isnull=True) ^ models.Q(cursor__isnull=True),
                name="attempt_of_one_delivery",
            )
        ]
        # Only unanswered attempts are ever counted by origin: the index holds those alone.
        indexes = [
            models.Index(
                fields=["origin", "started_at"],
                condition=models.Q(outcome=""),
                name="attempts_in_flight",
            )
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} ({self.status_code or self.error or 'running'})"


# Discovery (docs/protocol.md §14.10) ----------------------------------------------------------


class Listing(models.Model):
    """A merchant agent's entry in the directory buyers' agents search, as its owner chose it.

    Public by nature, so it holds nothing private: no limit, strategy or key. Kept while the
    agent is unlisted, so that listing it again restores what was written.
    """

    merchant_agent_id = models.CharField(max_length=64, unique=True)
    #: The merchant's display name, as its owner registered it.
    merchant = models.CharField(max_length=200)
    listed = models.BooleanField(default=False)
    description = models.TextField(blank=True)
    currencies = models.JSONField(default=list, blank=True)
    #: JCS text of the catalog's items. Text, not jsonb: an item may carry strings
    #: (``\u0000``) that PostgreSQL's jsonb refuses, as envelopes may.
    catalog = models.TextField(default="[]")
    #: The catalog's keys and values as plain lines (:func:`oanp.wire.discovery.catalog_text`),
    #: what ``?q=`` searches besides the id, the merchant and the description.
    catalog_text = models.TextField(blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["merchant_agent_id"]

    def __str__(self) -> str:
        return f"{self.merchant_agent_id} ({'listed' if self.listed else 'unlisted'})"


class Availability(models.TextChoices):
    """Whether a merchant agent takes new sessions (docs/protocol.md §14.5, check 12c)."""

    ACTIVE = "active"
    #: Its owner stopped it for a while: new sessions are refused, running ones go on.
    PAUSED = "paused"
    #: Its owner retired it: refused like a paused one, and gone from the directory and the
    #: dashboard's lists; its sessions and their logs stay.
    ARCHIVED = "archived"


class MerchantAvailability(models.Model):
    """Whether one merchant agent takes new sessions, as its owner last set it. An agent
    without a row is active: most never change, and an external agent's keys are all the
    arbiter otherwise knows of it."""

    merchant_agent_id = models.CharField(max_length=64, unique=True)
    state = models.CharField(
        max_length=16, choices=Availability.choices, default=Availability.ACTIVE, db_index=True
    )
    changed_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "merchant availabilities"

    def __str__(self) -> str:
        return f"{self.merchant_agent_id} ({self.state})"


# The machinery's own records: what operators read to tell whether the background runs. -------


class ProcessKind(models.TextChoices):
    WORKER = "worker"
    BEAT = "beat"
    #: Not a process: a queue, by its name, last seen when a worker ran beat's heartbeat on it.
    QUEUE = "queue"


class Heartbeat(models.Model):
    """The last sign of life of one background process: a Celery worker, by its hostname, or
    beat. Rows stay after a process stops, so the health panel can say when it was last seen."""

    kind = models.CharField(max_length=16, choices=ProcessKind.choices)
    name = models.CharField(max_length=200)
    pid = models.PositiveIntegerField(default=0)
    started_at = models.DateTimeField()
    #: A worker's own heartbeat thread, or beat's last tick.
    seen_at = models.DateTimeField(db_index=True)
    #: When a worker last ran beat's heartbeat task, and how long that task waited in the queue:
    #: proof that the broker hands tasks over, not only that the process lives.
    answered_at = models.DateTimeField(null=True, blank=True)
    queue_wait_ms = models.PositiveIntegerField(null=True, blank=True)
    #: Set by a clean shutdown, so a stopped worker is not counted alive until it goes stale.
    stopped_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["kind", "name"], name="one_heartbeat_per_process")
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.name} seen {self.seen_at:%Y-%m-%d %H:%M:%S}"


class TaskFailure(models.Model):
    """A background task that raised, with what it was sent, so that one safe to run again
    can be queued again as it was. Only operators and admins read these."""

    #: How much of the exception's message is kept: enough to say what went wrong.
    MESSAGE_LENGTH = 500

    task = models.CharField(max_length=200)
    task_id = models.CharField(max_length=64)
    #: The exception's class.
    error = models.CharField(max_length=200)
    message = models.CharField(max_length=MESSAGE_LENGTH, blank=True)
    #: The task's positional arguments; ``None`` when they were not kept (recorded before
    #: they were, or not JSON, or sent with keyword arguments), which leaves no retry.
    args = models.JSONField(null=True, blank=True)
    failed_at = models.DateTimeField(db_index=True)
    #: When an operator queued it again from the dashboard; once only.
    retried_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.task} {self.error} at {self.failed_at:%Y-%m-%d %H:%M:%S}"


# The integrity check's records (arbiter_app.integrity). ---------------------------------------


class IntegrityCheck(models.Model):
    """One run of the integrity check: what it covered and how many mismatches it found."""

    started_at = models.DateTimeField(db_index=True)
    seconds = models.FloatField()
    #: Every entry's hash recomputed, not only those new since the check before last.
    full = models.BooleanField()
    sessions = models.PositiveIntegerField()
    entries_rehashed = models.PositiveIntegerField()
    #: The highest entry id when the check started: where a later check's recompute begins.
    entry_id_to = models.BigIntegerField()
    mismatches = models.PositiveIntegerField()

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"integrity check at {self.started_at:%Y-%m-%d %H:%M:%S}: {self.mismatches}"


class IntegrityKind(models.TextChoices):
    HEAD = "head", "head_seq or head_hash disagrees with the log"
    LINK = "link", "an entry's prev_hash does not link to the entry before"
    HASH = "hash", "an entry's entry_hash does not match its contents"


class IntegrityAlarm(models.Model):
    """A session whose row and log disagree, from the first check that saw it until one finds
    it consistent again (``resolved_at``). Kept afterwards: it is evidence."""

    session_id = models.CharField(max_length=64, db_index=True)
    kind = models.CharField(max_length=8, choices=IntegrityKind.choices)
    detail = models.CharField(max_length=300)
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True, db_index=True)

    class Meta:
        ordering = ["-first_seen_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["session_id", "kind"],
                condition=models.Q(resolved_at__isnull=True),
                name="one_open_alarm_per_session_kind",
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} mismatch in {self.session_id}"


# The transparency log (docs/protocol.md §18): its records, Django's as the app's.
from arbiter_app.log_records import (  # noqa: E402, F401
    Cosignature,
    LogCheckpoint,
    LogKey,
    LogLeaf,
    TreeHash,
    TreeState,
    WitnessRecord,
)
