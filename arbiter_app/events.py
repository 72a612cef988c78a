"""The live-update contract: what the arbiter announces after each commit, and where.

Nothing here runs inside a transaction: :func:`announce` is called from
``transaction.on_commit``, so a listener never hears of an entry that may still roll back.

- ``entries_committed`` (a Django signal) is sent with ``session_id``, ``buyer_agent_id``,
  ``merchant_agent_id`` and ``entries`` (their JSON, in seq order). In-process listeners such
  as hosted agents connect to it.
- Channel-layer groups :func:`session_group` and :func:`agent_group` receive
  ``{"type": "oanp.entries", "session_id", "head_seq"}``: a wake-up, not the data. Streams
  read the entries from the database, so a lost wake-up delays a push but never loses one.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Sequence
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.dispatch import Signal

from oanp.canonical import JsonObject

log = logging.getLogger(__name__)

entries_committed = Signal()

MESSAGE_TYPE = "oanp.entries"


def _group(kind: str, name: str) -> str:
    # Group names allow only [A-Za-z0-9._-] and < 100 chars; ids may hold ':' and run to 64.
    return f"oanp.{kind}.{hashlib.sha256(name.encode()).hexdigest()[:40]}"


#: Every session's wake-ups, for views of many sessions (the dashboard's list).
ALL_SESSIONS_GROUP = "oanp.sessions"


def session_group(session_id: str) -> str:
    return _group("session", session_id)


def agent_group(agent_id: str) -> str:
    return _group("agent", agent_id)


async def _wake(layer: Any, groups: set[str], message: dict[str, Any]) -> None:
    # One hop to the event loop for all groups, their sends in parallel.
    await asyncio.gather(*(layer.group_send(group, message) for group in groups))


def announce(
    *,
    session_id: str,
    buyer_agent_id: str,
    merchant_agent_id: str,
    entries: Sequence[JsonObject],
) -> None:
    """Tell every listener that ``entries`` of ``session_id`` are committed."""
    entries_committed.send(
        sender=__name__,
        session_id=session_id,
        buyer_agent_id=buyer_agent_id,
        merchant_agent_id=merchant_agent_id,
        entries=entries,
    )
    layer = get_channel_layer()
    if layer is None or not entries:
        return
    message = {"type": MESSAGE_TYPE, "session_id": session_id, "head_seq": entries[-1]["seq"]}
    groups = {
        ALL_SESSIONS_GROUP,
        session_group(session_id),
        agent_group(buyer_agent_id),
        agent_group(merchant_agent_id),
    }
    try:
        async_to_sync(_wake)(layer, groups, message)
    except Exception:  # the commit stands; streams fall back to polling the database
        log.exception("could not wake the streams of session %s", session_id)
