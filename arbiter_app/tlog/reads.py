"""What the transparency log serves (docs/protocol.md §18): the checkpoint with its witnesses'
cosignatures, tiles and entry bundles, and a party's proof of one of its entries."""

from __future__ import annotations

import base64
import struct
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from arbiter_app.log_records import LogCheckpoint, LogLeaf, TreeState, WitnessRecord
from arbiter_app.models import Entry, Session
from arbiter_app.tlog.hashes import StoredHashes
from arbiter_app.tlog.witnesses import configured
from oanp.tlog.tree import TILE_WIDTH, Tile, inclusion_proof, leaf_data, tile_stored


def tree_size() -> int:
    state = TreeState.objects.filter(pk=1).first()
    return state.size if state is not None else 0


def served_checkpoint() -> LogCheckpoint | None:
    """The checkpoint the log serves: the latest with the quorum of witness cosignatures
    (``OANP_WITNESS_QUORUM``), or the latest when none has it yet."""
    latest = LogCheckpoint.objects.order_by("-size").first()
    if latest is None or settings.OANP_WITNESS_QUORUM <= 0:
        return latest
    # The count kept on each row: read from the newest back, the size index finds it at once.
    found = (
        LogCheckpoint.objects.filter(cosigned__gte=settings.OANP_WITNESS_QUORUM)
        .order_by("-size")
        .first()
    )
    return found or latest


def note_text(checkpoint: LogCheckpoint) -> str:
    """The signed note with every cosignature a witness returned for it."""
    lines = "".join(c.line for c in checkpoint.cosignatures.all())
    return checkpoint.note + lines


def tile_bytes(tile: Tile) -> bytes | None:
    """The tile's hashes, or its entry bundle, as C2SP serves them; ``None`` past the tree."""
    if not tile_stored(tile, tree_size()):
        return None
    start = tile.index * TILE_WIDTH
    if tile.level is not None:
        return b"".join(StoredHashes()(tile.level, start, tile.count))
    leaves = (
        LogLeaf.objects.filter(index__gte=start, index__lt=start + tile.count)
        .order_by("index")
        .values_list("entry__session__session_id", "entry__seq", "entry__entry_hash")
    )
    bundle = bytearray()
    for session_id, seq, entry_hash in leaves:
        data = leaf_data(session_id, seq, entry_hash)
        bundle += struct.pack(">H", len(data)) + data
    return bytes(bundle)


def entry_proof(session: Session, seq: int) -> dict[str, object] | None:
    """``{"index", "checkpoint", "inclusion"}`` for entry ``seq`` of ``session`` against the
    served checkpoint; ``None`` while that checkpoint does not cover it yet."""
    leaf = LogLeaf.objects.filter(entry__session=session, entry__seq=seq).first()
    checkpoint = served_checkpoint()
    if leaf is None or checkpoint is None or leaf.index >= checkpoint.size:
        return None
    path = inclusion_proof(StoredHashes(), leaf.index, checkpoint.size)
    return {
        "index": leaf.index,
        "checkpoint": note_text(checkpoint),
        "inclusion": [base64.b64encode(h).decode() for h in path],
    }


#: A log that has entries waiting and no checkpoint newer than this is behind.
BEHIND_SECONDS = 30.0


def log_health(now: datetime | None = None) -> dict[str, object]:
    """``/readyz``'s ``log`` check: entries waiting, seconds since the last checkpoint, and each
    witness's last answer and last failure; a ``warning`` when the log is behind or a witness
    stopped answering. It informs: a witness away stops nothing but its own cosignatures."""
    now = now or timezone.now()
    state = TreeState.objects.filter(pk=1).first()
    waiting = Entry.objects.filter(id__gt=state.scanned_to if state else 0).count()
    latest = LogCheckpoint.objects.order_by("-size").only("size", "signed_at").first()
    age = None if latest is None else (now - latest.signed_at).total_seconds()
    warnings = []
    if waiting and (age is None or age > BEHIND_SECONDS):
        warnings.append(
            f"{waiting} entries wait to be integrated and no checkpoint is newer "
            f"than {BEHIND_SECONDS:g} s: is beat running integrate_log?"
        )
    witnesses: dict[str, object] = {}
    # The configured witnesses only: one taken out of OANP_WITNESSES keeps its record, and
    # its last failure would otherwise be reported, and alerted on, for ever.
    names = [witness.name for witness in configured()]
    for record in WitnessRecord.objects.filter(name__in=names).order_by("name"):
        answering = record.failed_at is None or (
            record.answered_at is not None and record.answered_at >= record.failed_at
        )
        witnesses[record.name] = {
            "answering": answering,
            "size": record.size,
            "answered_at": record.answered_at.isoformat() if record.answered_at else None,
            "failed_at": record.failed_at.isoformat() if record.failed_at else None,
            "error": "" if answering else record.error,
        }
        if not answering:
            warnings.append(f"witness {record.name} stopped answering: {record.error}")
    detail: dict[str, object] = {
        "tree_size": state.size if state else 0,
        "entries_waiting": waiting,
        "seconds_since_checkpoint": None if age is None else round(age, 1),
        "witnesses": witnesses,
    }
    if warnings:
        detail["ok"] = False
        detail["warning"] = "; ".join(warnings)
    return detail
