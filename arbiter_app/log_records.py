"""The transparency log's records. :mod:`arbiter_app.models` imports them, so Django knows
them as the app's; they name the app's other models by label, never by import."""

from __future__ import annotations

from django.db import models


class TreeState(models.Model):
    """The one row the integrator locks while it runs, so one integrates at a time whatever
    the number of workers: the tree's size and how far the entries were read.

    ``scanned_to`` is the entry id up to which every committed entry is in the tree; an id
    missing after it (``gap_at``, seen since ``gap_since``) is an insert still committing, or
    one rolled back, passed once it stayed missing long enough."""

    size = models.BigIntegerField(default=0)
    scanned_to = models.BigIntegerField(default=0)
    gap_at = models.BigIntegerField(null=True, blank=True)
    gap_since = models.DateTimeField(null=True, blank=True)


class LogLeaf(models.Model):
    """An entry's place in the tree: its index, never changed once given."""

    index = models.BigIntegerField(primary_key=True)
    entry = models.OneToOneField(
        "arbiter_app.Entry", on_delete=models.PROTECT, related_name="log_leaf"
    )

    class Meta:
        ordering = ["index"]


class TreeHash(models.Model):
    """A level hash of the tree (:mod:`oanp.tlog.tree`): at level 0 a leaf's hash, above the
    root of a full tile of the level below."""

    level = models.PositiveSmallIntegerField()
    index = models.BigIntegerField()
    hash = models.BinaryField(max_length=32)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["level", "index"], name="tree_hash_position"),
        ]


class LogKey(models.Model):
    """The Ed25519 key the log signs its checkpoints with, sealed like the arbiter's signing
    keys. It never rotates: witnesses and auditors are configured with its verifier key."""

    name = models.CharField(max_length=200, unique=True)
    public_key = models.BinaryField(max_length=32)
    private_key_sealed = models.BinaryField()
    created_at = models.DateTimeField(auto_now_add=True)


class LogCheckpoint(models.Model):
    """A checkpoint the log signed: its size, root and note (the log's signature only; the
    witnesses' cosignatures are :class:`Cosignature` rows, added to the note when served)."""

    size = models.BigIntegerField(unique=True)
    root = models.BinaryField(max_length=32)
    note = models.TextField()
    signed_at = models.DateTimeField()
    #: How many witnesses cosigned it: what the quorum is read against, without a count.
    cosigned = models.PositiveSmallIntegerField(default=0)

    class Meta:
        ordering = ["-size"]


class Cosignature(models.Model):
    """A witness's cosignature line of a checkpoint, as the witness answered it."""

    checkpoint = models.ForeignKey(
        LogCheckpoint, on_delete=models.CASCADE, related_name="cosignatures"
    )
    witness = models.CharField(max_length=200)
    line = models.TextField()
    received_at = models.DateTimeField()

    class Meta:
        ordering = ["witness"]
        constraints = [
            models.UniqueConstraint(fields=["checkpoint", "witness"], name="one_cosignature_each"),
        ]


class WitnessRecord(models.Model):
    """What the log knows of one configured witness: the size it last cosigned (the ``old``
    of the next ``add-checkpoint``), and when it last answered or failed, and why."""

    name = models.CharField(max_length=200, unique=True)
    size = models.BigIntegerField(default=0)
    answered_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    error = models.CharField(max_length=500, blank=True)
