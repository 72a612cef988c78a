"""Audit exports: the bundle ``oanp verify`` checks and a CSV summary, one row per session.

An export is requested here (recorded in the admin audit log) and run by a Celery task. The
sessions it holds are chosen again when it runs, through the requester's scope at that
moment: a merchant member's export holds its own merchant's sessions and nothing else,
whatever its request said.
"""

from __future__ import annotations

import csv
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, date, datetime, time, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.core.files import File
from django.db import OperationalError, transaction
from django.db.models import Q, QuerySet
from django.db.models.fields.files import FieldFile
from django.http import Http404
from django.utils import timezone

from arbiter_app import selectors as arbiter
from oanp.wire.state import Phase
from sessions_app import selectors
from sessions_app.models import AgentProfile, AuditEvent, Export, Merchant
from sessions_app.queue import RUN_EXPORT, enqueue
from sessions_app.tenancy import Scope, require_admin, require_export, scope_of

if TYPE_CHECKING:
    from arbiter_app.models import Session

# Sessions read per step: the page's progress bar moves once per batch.
BATCH_SESSIONS = 100
PRESETS = {
    "24h": ("Last 24 hours", timedelta(days=1)),
    "7d": ("Last 7 days", timedelta(days=7)),
    "30d": ("Last 30 days", timedelta(days=30)),
}
#: The preset that takes its first and last day from the form.
CUSTOM = "custom"
CSV_COLUMNS = (
    "session_id",
    "buyer_agent_id",
    "merchant_agent_id",
    "state",
    "rounds",
    "outcome",
    "final_price",
    "currency",
    "violations",
    "opened_at",
    "ended_at",
)


class ExportRefused(ValueError):
    """A request that names nothing the requester may export; the message is for the form,
    beside ``field`` (``None``: the form as a whole)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def request_export(
    *,
    actor: AbstractBaseUser,
    scope: Scope,
    kind: str,
    session_id: str = "",
    merchant: str = "",
    preset: str = "",
    opened_from: date | None = None,
    opened_to: date | None = None,
    session_ids: Sequence[str] = (),
    now: datetime | None = None,
) -> Export:
    """Queue an export of one session, one merchant's sessions, a time range (a preset, or
    any first and last day, either open), every session in the requester's scope, or a
    selection of the sessions list (an admin's).

    A time range is fixed at request time, so the bundle says exactly which window it covers.
    """
    require_export(scope)
    now = now or timezone.now()
    tenant = None
    if scope.is_tenant:
        tenant = Merchant.objects.get(pk=scope.merchant_id).slug
    session_id = session_id.strip()
    if kind == "session":
        if not session_id:
            raise ExportRefused("Enter a session id.", "session_id")
        try:
            found = selectors.session(scope, session_id)
        except Http404:
            # Another tenant's session reads exactly as one that never was.
            unknown = f"No session {session_id!r} in your sessions."
            raise ExportRefused(unknown, "session_id") from None
        request: dict[str, Any] = {"kind": kind, "session_id": found.session_id}
    elif kind == "merchant":
        slug = tenant or merchant
        if not slug:
            raise ExportRefused("Choose a merchant.", "merchant")
        if not Merchant.objects.filter(slug=slug).exists():
            raise ExportRefused(f"No merchant {merchant!r}.", "merchant")
        request = {"kind": kind, "merchant": slug}
    elif kind == "selection":
        require_admin(scope)
        request = {"kind": kind, "session_ids": _selection(scope, session_ids)}
    elif kind == "range" and preset == CUSTOM:
        if opened_from is None and opened_to is None:
            raise ExportRefused("Enter a first day, a last day, or both.", "opened_from")
        if opened_from and opened_to and opened_from > opened_to:
            raise ExportRefused("The first day comes after the last day.", "opened_to")
        start = None if opened_from is None else _day_start(opened_from)
        # The last day is counted whole: sessions opened before the next day begins.
        end = None if opened_to is None else _day_start(opened_to + timedelta(days=1))
        request = {"kind": kind, "preset": preset, "from": start, "to": end}
    elif kind == "range":
        if preset not in PRESETS:
            raise ExportRefused("Choose a time range.", "preset")
        start = now - PRESETS[preset][1]
        request = {"kind": kind, "preset": preset, "from": start.isoformat(), "to": now.isoformat()}
    elif kind == "all":
        request = {"kind": kind}
    else:
        raise ExportRefused("Choose a session, a merchant, a time range or all sessions.", "kind")
    request["tenant"] = tenant
    with transaction.atomic():
        export = Export.objects.create(requested_by=actor, scope=request)
        AuditEvent.objects.create(
            actor=actor, action="export.request", target=f"export {export.pk}", detail=request
        )
        transaction.on_commit(
            partial(
                enqueue,
                RUN_EXPORT,
                args=[export.pk],
                about=f"export {export.pk}; it stays queued: ask again when the broker is back",
            )
        )
    return export


#: The most sessions one selection exports: as many as a bulk action takes.
SELECTION_MAX = 200


def _selection(scope: Scope, session_ids: Sequence[str]) -> list[str]:
    """The selected sessions' ids, each in scope, in the order they opened."""
    wanted = set(session_ids)
    if not wanted:
        raise ExportRefused("Select at least one session.")
    if len(wanted) > SELECTION_MAX:
        raise ExportRefused(f"Select at most {SELECTION_MAX} sessions at once.")
    found = [s.session_id for s in selectors.sessions_named(scope, sorted(wanted))]
    if len(found) != len(wanted):
        raise ExportRefused("A selected session is not in your list; reload the list.")
    return found


def exports_of(scope: Scope) -> QuerySet[Export]:
    """Exports the scope may see and download: all for admins; a merchant's members see
    those any of its members requested."""
    require_export(scope)
    exports = Export.objects.select_related("requested_by")
    if scope.is_tenant:
        exports = exports.filter(requested_by__membership__merchant_id=scope.merchant_id)
    return exports


def export_of(scope: Scope, export_id: int) -> Export:
    found = exports_of(scope).filter(pk=export_id).first()
    if found is None:
        raise Http404("no such export")
    return found


def stored_size(stored: FieldFile) -> int | None:
    """The size in bytes of one of an export's files; ``None`` when it has none or storage
    lost it, so that a page listing exports still shows the others."""
    if not stored:
        return None
    try:
        return int(stored.size)
    except OSError:
        return None


def record_download(*, actor: AbstractBaseUser, export: Export, part: str) -> None:
    AuditEvent.objects.create(
        actor=actor, action="export.download", target=f"export {export.pk}", detail={"part": part}
    )


# Running an export (the Celery task's work) ----------------------------------------------


def sessions_for(export: Export) -> QuerySet[Session]:
    """The sessions ``export`` holds, chosen through its requester's scope as it is now."""
    scope = scope_of(export.requested_by)
    if scope is None or not scope.may_export:
        raise PermissionDenied("the requester may no longer export")
    found = selectors.sessions(scope)
    request = export.scope
    if request["kind"] == "session":
        found = found.filter(session_id=request["session_id"])
    elif request["kind"] == "selection":
        found = found.filter(session_id__in=request["session_ids"])
    elif request["kind"] == "merchant":
        agent_ids = AgentProfile.objects.filter(merchant__slug=request["merchant"]).values_list(
            "agent_id", flat=True
        )
        found = found.filter(merchant_agent_id__in=list(agent_ids))
    elif request["kind"] == "range":
        if request["from"]:
            found = found.filter(opened_at__gte=datetime.fromisoformat(request["from"]))
        if request["to"]:
            found = found.filter(opened_at__lt=datetime.fromisoformat(request["to"]))
    return found.order_by("opened_at", "session_id")


def _day_start(day: date) -> str:
    return datetime.combine(day, time.min, tzinfo=UTC).isoformat()


def run(*, export_id: int) -> None:
    """Build the export's files; on any failure, record why and keep no file.

    A task handed out again after its worker died finds the export running and starts over;
    one that already finished is left alone.
    """
    export = Export.objects.select_related("requested_by").get(pk=export_id)
    if export.state in (Export.State.DONE, Export.State.FAILED):
        return
    written: list[str] = []
    try:
        _build(export, written)
    except Exception as exc:
        for name in written:
            export.bundle.storage.delete(name)
        Export.objects.filter(pk=export.pk).update(
            state=Export.State.FAILED, error=failure_in_words(exc), finished_at=timezone.now()
        )
        raise


def failure_in_words(exc: Exception) -> str:
    """Why an export failed, for the person who asked for it; the worker's log keeps the
    exception itself."""
    if isinstance(exc, PermissionDenied):
        return "Its requester may no longer export these sessions; ask an admin."
    if isinstance(exc, OperationalError):
        return "The database was busy or unreachable while the export ran; retry it."
    if isinstance(exc, OSError):
        return "The export's files could not be stored (the disk may be full); retry it."
    return (
        f"The export stopped on an unexpected error ({type(exc).__name__}); retry it, and "
        "if it fails again, the worker's log says more."
    )


def retry_export(*, actor: AbstractBaseUser, scope: Scope, export_id: int) -> Export:
    """Queue a failed export again, as it was asked for; audited. ``ExportRefused`` when it
    has not failed."""
    with transaction.atomic():
        export = export_of(scope, export_id)
        updated = Export.objects.filter(pk=export.pk, state=Export.State.FAILED).update(
            state=Export.State.QUEUED, error="", progress=0, total=0, finished_at=None
        )
        if not updated:
            raise ExportRefused(f"Export #{export.pk} has not failed: there is nothing to retry.")
        AuditEvent.objects.create(
            actor=actor, action="export.retry", target=f"export {export.pk}", detail={}
        )
        transaction.on_commit(
            partial(
                enqueue,
                RUN_EXPORT,
                args=[export.pk],
                about=f"export {export.pk}; it stays queued: retry when the broker is back",
            )
        )
    return export


def _build(export: Export, written: list[str]) -> None:
    """Write the bundle and the CSV as the logs are read, one session at a time, to temporary
    files that storage then copies: memory holds one session's log whatever the export's size."""
    found = sessions_for(export)
    total = found.count()
    Export.objects.filter(pk=export.pk).update(
        state=Export.State.RUNNING, total=total, progress=0, error=""
    )
    candidates = earlier_exports(export)
    with (
        tempfile.TemporaryFile() as bundle_file,
        tempfile.TemporaryFile("w+", encoding="utf-8", newline="") as csv_file,
    ):
        writer = arbiter.audit_bundle_writer(
            bundle_file, sessions=found, prefixes=[c.checkpoint["statement"] for c in candidates]
        )
        rows = csv.writer(csv_file)
        rows.writerow(CSV_COLUMNS)
        done = 0
        for batch in in_batches(found):
            for session, log in batch:
                writer.add(log)
                rows.writerow(summary_row(session, log))
            done += len(batch)
            Export.objects.filter(pk=export.pk).update(progress=done)
        # Sessions opened since its own come after them, and of its own only the last may
        # have grown: once another has moved on, no later export extends it.
        earlier = next((c for c in candidates if writer.extends(c.checkpoint["statement"])), None)
        created_at = timezone.now()
        checkpoint = writer.finish(
            created_at=created_at,
            scope=export.scope,
            previous=[] if earlier is None else [earlier.checkpoint],
        )
        stem = f"export-{export.pk}-{created_at:%Y%m%dT%H%M%SZ}"
        storage = export.bundle.storage
        for part, name in ((bundle_file, f"{stem}.json"), (csv_file, f"{stem}.csv")):
            part.seek(0)
            written.append(storage.save(f"exports/{name}", File(part)))
    Export.objects.filter(pk=export.pk).update(
        state=Export.State.DONE,
        bundle=written[0],
        summary_csv=written[1],
        finished_at=timezone.now(),
        checkpoint=checkpoint,
        extends=earlier,
    )


def in_batches(found: QuerySet[Session]) -> Iterator[list[tuple[Session, list[dict[str, Any]]]]]:
    """The sessions ``found`` (by opening, then id) with their logs, ``BATCH_SESSIONS`` at a
    time, each batch read whole before it is handed over. No read stays open while the export
    writes its progress: on SQLite, the embedded default, a connection that writes while its own
    read is open is refused at once ("database is locked") whenever another writer waits."""
    after = Q()
    while batch := list(arbiter.logs_of(found.filter(after)[:BATCH_SESSIONS])):
        yield batch
        last = batch[-1][0]
        after = Q(opened_at__gt=last.opened_at) | Q(
            opened_at=last.opened_at, session_id__gt=last.session_id
        )


#: How many earlier exports of the same scope are tried, newest first, for one to extend.
EXTEND_CANDIDATES = 20


def earlier_exports(export: Export) -> list[Export]:
    """The newest earlier finished exports of the same scope (the same request and tenant),
    newest first: those this one may extend, if its tree grows theirs."""
    return list(
        Export.objects.filter(
            state=Export.State.DONE,
            scope=export.scope,
            checkpoint__isnull=False,
            created_at__lt=export.created_at,
        )
        .exclude(pk=export.pk)
        .order_by("-created_at")[:EXTEND_CANDIDATES]
    )


def summary_row(session: Session, log: Iterable[dict[str, Any]]) -> list[str]:
    violations = sum(
        e["envelope"]["type"] == "round.verdict"
        and e["envelope"]["payload"]["status"] == "violated"
        for e in log
    )
    outcome = "agreed" if session.phase == Phase.AGREED else session.close_reason or "in progress"
    return [
        session.session_id,
        session.buyer_agent_id,
        session.merchant_agent_id,
        session.phase.lower(),
        str(session.round),
        outcome,
        "" if session.final_price is None else format(session.final_price.normalize(), "f"),
        session.currency,
        str(violations),
        session.opened_at.isoformat(),
        "" if session.ended_at is None else session.ended_at.isoformat(),
    ]
