"""The log's witnesses (docs/protocol.md §18, C2SP ``tlog-witness``): each new checkpoint sent
to every configured witness with a consistency proof from the size it last cosigned, and the
cosignature lines each returns kept, once verified, to be served with the checkpoint.

A witness that is away delays nothing but its own cosignature: the checkpoint is served with
those it has, and the next one is sent to it with a proof from the last size it cosigned.
"""

from __future__ import annotations

import logging
from datetime import datetime

import httpx
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import F
from django.utils import timezone

from arbiter_app.log_records import Cosignature, LogCheckpoint, WitnessRecord
from arbiter_app.tlog.hashes import StoredHashes
from oanp.tlog.cosignature import verify_cosignature
from oanp.tlog.errors import TlogError
from oanp.tlog.note import parse_note
from oanp.tlog.tree import consistency_proof
from oanp.tlog.witness import (
    SIZE_CONTENT_TYPE,
    WitnessEndpoint,
    add_checkpoint_body,
    parse_witness_lines,
)

log = logging.getLogger(__name__)

#: Seconds a witness has to answer: the integrator waits for each in turn.
TIMEOUT_SECONDS = 5.0


def configured(lines: list[str] | None = None) -> list[WitnessEndpoint]:
    """The witnesses ``OANP_WITNESSES`` names, ``<verifier key> <URL>`` a line;
    ``ImproperlyConfigured`` saying which line is wrong (``oanp.E005`` at start-up)."""
    try:
        return parse_witness_lines(settings.OANP_WITNESSES if lines is None else lines)
    except ValueError as exc:
        raise ImproperlyConfigured(f"OANP_WITNESSES: {exc}") from None


def submit_latest(size: int) -> int:
    """:func:`submit` of the checkpoint of ``size`` when it is still the latest; 0 otherwise:
    the later one's task sends that instead, so witnesses never see the log go backwards."""
    latest = LogCheckpoint.objects.order_by("-size").first()
    if latest is None or latest.size != size:
        return 0
    return submit(latest)


def submit(checkpoint: LogCheckpoint, now: datetime | None = None) -> int:
    """Send ``checkpoint`` to every configured witness; how many cosigned it."""
    cosigned = 0
    with httpx.Client(timeout=TIMEOUT_SECONDS) as client:
        for witness in configured():
            record, _ = WitnessRecord.objects.get_or_create(name=witness.name)
            try:
                cosigned += _submit(client, witness, record, checkpoint, now or timezone.now())
            except (httpx.HTTPError, TlogError, ValueError) as exc:
                record.failed_at, record.error = now or timezone.now(), str(exc)[:500]
                # The size too: one a 409 named before the retry failed is the witness's own.
                record.save(update_fields=["size", "failed_at", "error"])
                log.warning(
                    "witness %s: checkpoint %d not cosigned: %s", witness.name, checkpoint.size, exc
                )
    return cosigned


def _submit(
    client: httpx.Client,
    witness: WitnessEndpoint,
    record: WitnessRecord,
    checkpoint: LogCheckpoint,
    now: datetime,
) -> bool:
    """One ``add-checkpoint``, once more from the size a 409 names; not once more when that
    size is past the checkpoint's: the witness has cosigned a later one (this checkpoint's task
    ran after a later one's) and rightly never goes back, so nothing failed."""
    for _ in range(2):
        old = record.size if record.size <= checkpoint.size else 0
        proof = consistency_proof(StoredHashes(), old, checkpoint.size)
        body = add_checkpoint_body(old, proof, checkpoint.note)
        answer = client.post(f"{witness.url}/add-checkpoint", content=body.encode())
        if answer.status_code == 409 and answer.headers.get("content-type", "").startswith(
            SIZE_CONTENT_TYPE
        ):
            record.size = int(answer.text.strip())
            if record.size > checkpoint.size:
                record.answered_at, record.error = now, ""
                record.save(update_fields=["size", "answered_at", "error"])
                log.info(
                    "witness %s has cosigned size %d: checkpoint %d is behind it",
                    witness.name,
                    record.size,
                    checkpoint.size,
                )
                return False
            continue
        if answer.status_code != 200:
            raise ValueError(f"answered {answer.status_code}: {answer.text.strip()[:200]}")
        text = parse_note(checkpoint.note).text
        kept = 0
        for line in answer.text.splitlines(keepends=True):
            try:
                verify_cosignature(line, text, witness.verifier)
            except TlogError:
                continue  # another key's, or one this witness does not hold: ignored
            _, new = Cosignature.objects.update_or_create(
                checkpoint=checkpoint,
                witness=witness.name,
                defaults={"line": line, "received_at": now},
            )
            if new:
                LogCheckpoint.objects.filter(pk=checkpoint.pk).update(cosigned=F("cosigned") + 1)
            kept += 1
        if not kept:
            raise ValueError("answered 200 without a cosignature of its key")
        record.size, record.answered_at, record.error = checkpoint.size, now, ""
        record.save(update_fields=["size", "answered_at", "error"])
        return True
    raise ValueError(f"answered 409 twice; it last cosigned size {record.size}")
