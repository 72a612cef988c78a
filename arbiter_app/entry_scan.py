"""Where the committed entries run without a hole, for the streams' watch of new entries and
the transparency log's integrator: each waits a moment for a missing id (an insert still
committing) before passing it. A module of its own, re-exported by :mod:`arbiter_app.selectors`,
so that the log, which reads it, and the selectors, which read the log for the dashboard, need
nothing of each other."""

from __future__ import annotations

from dataclasses import dataclass

from arbiter_app.models import Entry


@dataclass(frozen=True, slots=True)
class EntryScan:
    scanned_to: int
    """Every entry id up to here is committed, or a hole the caller chose to pass."""
    gap_at: int | None
    """The first missing id after ``scanned_to``: an insert not yet committed, or one rolled
    back. The caller waits a moment for it before passing it."""
    top: int
    """The highest id the scan read: every hole below it was already taken when it ran."""
    more: bool
    """The scan stopped at its limit, not at the last entry or a hole."""


def entry_scan_start(window: int = 500) -> int:
    """Where a watch of new entries begins: before the oldest of the latest ``window`` ids, so
    that a hole among them (an insert still being committed) is waited for, not jumped."""
    latest = list(Entry.objects.order_by("-id").values_list("id", flat=True)[:window])
    return latest[-1] - 1 if latest else 0


def scan_entries(after: int, *, pass_holes_to: int = 0, limit: int = 500) -> EntryScan:
    """How far after ``after`` entry ids run without a hole, holes at or below
    ``pass_holes_to`` passed.

    Entry ids are handed out at insert but become visible at commit, so a reader that jumped
    over a hole could later miss the entry that fills it. Reading only up to the first hole,
    and passing it once it has stayed open long enough, keeps every entry.
    """
    ids = list(
        Entry.objects.filter(id__gt=after).order_by("id").values_list("id", flat=True)[:limit]
    )
    scanned_to, gap_at = after, None
    for i in ids:
        if i > scanned_to + 1:
            scanned_to = max(scanned_to, min(i - 1, pass_holes_to))
            if i > scanned_to + 1:
                gap_at = scanned_to + 1
                break
        scanned_to = i
    return EntryScan(
        scanned_to, gap_at, ids[-1] if ids else after, len(ids) == limit and gap_at is None
    )
