"""The integrator: committed entries sequenced into the global tree, in batches, and a
checkpoint signed for each batch (docs/protocol.md §18).

One integrates at a time, however many workers run it: each holds the tree's state row locked
for its whole transaction. Entries are taken in id order up to the first id still missing,
which is an insert not yet committed (or one rolled back): taking a later entry first would give
the late one an index out of order, or none. A missing id is passed once it has stayed missing
for :data:`GAP_PATIENCE`, far longer than any envelope's transaction holds its insert.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import OperationalError, connection, transaction
from django.utils import timezone
from psycopg.errors import LockNotAvailable

from arbiter_app.entry_scan import entry_scan_start, scan_entries
from arbiter_app.log_records import LogCheckpoint, LogLeaf, TreeHash, TreeState
from arbiter_app.models import Entry
from arbiter_app.tlog.hashes import StoredHashes
from arbiter_app.tlog.keys import log_signer
from oanp.audit.merkle import leaf_hash
from oanp.tlog.checkpoint import Checkpoint, sign_checkpoint
from oanp.tlog.tree import leaf_data, root_hash

log = logging.getLogger(__name__)

#: Entries integrated in one transaction at the most; the next run takes the rest.
BATCH = 5000
#: How long an entry id may stay missing before the integrator passes it as rolled back.
GAP_PATIENCE = timedelta(seconds=10)
#: How long a run waits for a lock before it gives way to the next run.
LOCK_TIMEOUT = "500ms"
#: Ids committed since a missing one that show it rolled back, however recent.
SETTLED = 1000


@dataclass(frozen=True, slots=True)
class Integrated:
    """What one run did: the leaves it added and the checkpoint it signed (none if none)."""

    added: int
    checkpoint: LogCheckpoint | None


def integrate(now: datetime | None = None, *, batch: int = BATCH) -> Integrated:
    """Integrate the committed entries waiting, up to ``batch``, and sign a checkpoint; none
    when the tree's tables stay locked past :data:`LOCK_TIMEOUT` (another integrator's run, or
    an operator's maintenance): the next run, a second later, takes them."""
    now = now or timezone.now()
    TreeState.objects.get_or_create(pk=1)
    try:
        return _integrate(now, batch)
    except OperationalError as exc:
        if not isinstance(exc.__cause__, LockNotAvailable):
            raise
        log.info(
            "the tree's tables were locked for %s: integration left to the next run", LOCK_TIMEOUT
        )
        return Integrated(0, None)


def _integrate(now: datetime, batch: int) -> Integrated:
    with transaction.atomic():
        if connection.vendor == "postgresql":
            # Gives way rather than wait: a run that waits on a lock while holding the tree's
            # would make whoever it waits for wait on it in turn, and the one PostgreSQL picks
            # to end, a second later, could be the other's whole transaction.
            with connection.cursor() as cursor:
                cursor.execute(f"SET LOCAL lock_timeout = '{LOCK_TIMEOUT}'")
        state = TreeState.objects.select_for_update().get(pk=1)
        waited_out = (
            state.gap_at
            if state.gap_at is not None
            and state.gap_since is not None
            and now - state.gap_since >= GAP_PATIENCE
            else 0
        )
        # Below the newest SETTLED ids every missing one is long rolled back: a log integrated
        # for the first time, or after a pause, does not wait out each old hole in turn.
        passable = max(waited_out, entry_scan_start(SETTLED))
        scan = scan_entries(state.scanned_to, pass_holes_to=passable, limit=batch)
        if scan.gap_at != state.gap_at:
            state.gap_at, state.gap_since = scan.gap_at, now if scan.gap_at else None
        rows = list(
            Entry.objects.filter(id__gt=state.scanned_to, id__lte=scan.scanned_to)
            .order_by("id")
            .values_list("id", "session__session_id", "seq", "entry_hash")
        )
        hashes = StoredHashes()
        leaves = []
        for offset, (entry_id, session_id, seq, entry_hash) in enumerate(rows):
            index = state.size + offset
            hashes.append_leaf(index, leaf_hash(leaf_data(session_id, seq, entry_hash)))
            leaves.append(LogLeaf(index=index, entry_id=entry_id))
        LogLeaf.objects.bulk_create(leaves)
        TreeHash.objects.bulk_create(hashes.rows())
        state.size += len(leaves)
        state.scanned_to = scan.scanned_to
        state.save()
        checkpoint = _sign(state.size, hashes, now) if leaves else None
    if leaves:
        log.info("integrated %d entries: tree size %d", len(leaves), state.size)
    return Integrated(len(leaves), checkpoint)


def _sign(size: int, hashes: StoredHashes, now: datetime) -> LogCheckpoint:
    root = root_hash(hashes, size)
    assert root is not None  # a tree with leaves
    signer = log_signer()
    note = sign_checkpoint(Checkpoint(signer.name, size, root), [signer])
    return LogCheckpoint.objects.create(size=size, root=root, note=note, signed_at=now)
