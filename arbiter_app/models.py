"""The arbiter's records: sessions, their append-only logs, who may speak for which agent, and
the keys agreements are signed with. Only :mod:`arbiter_app.services` writes them."""

from __future__ import annotations

import json

from django.db import models


class Role(models.TextChoices):
    BUYER = "buyer"
    MERCHANT = "merchant"


class AgentCredential(models.Model):
    """One API key of one agent. The key is shown once; only its SHA-256 is kept.

    Keys carry 192 random bits, so a fast hash is enough: there is nothing to brute-force.
    """

    agent_id = models.CharField(max_length=64, db_index=True)
    role = models.CharField(max_length=16, choices=Role.choices)
    prefix = models.CharField(max_length=16, unique=True)
    digest = models.CharField(max_length=64)
    label = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["agent_id", "-created_at"]

    def __str__(self) -> str:
        return f"{self.role} {self.agent_id} ({self.prefix}…)"

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    #: A credential authenticates a request in the role of a user (DRF's ``request.user``).
    is_authenticated = True


class Session(models.Model):
    """One negotiation. ``state`` is the machine's snapshot; the columns beside it are copies
    for queries and indexes (who, what state, when the next timer falls due)."""

    session_id = models.CharField(max_length=64, unique=True)
    buyer_agent_id = models.CharField(max_length=64, db_index=True)
    merchant_agent_id = models.CharField(max_length=64, db_index=True)
    phase = models.CharField(max_length=16, db_index=True)
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
    #: JSON text of :func:`oanp.snapshot.dump_state`. Text, not jsonb: envelopes may carry
    #: strings (``\u0000``) that PostgreSQL's jsonb refuses.
    state = models.TextField()
    #: JSON text: ``{"buyer": {...}, "merchant": {...}}``, each a checked reveal.
    reveals = models.TextField(default="{}", blank=True)

    class Meta:
        ordering = ["-opened_at"]

    def __str__(self) -> str:
        return self.session_id


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
