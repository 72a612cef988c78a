"""Hosted merchant agents: the arbiter's host answers for merchants who chose a strategy here.

A hosted agent is not a process that lives between envelopes. When a buyer's envelope to a
hosted agent commits, :func:`on_entries_committed` queues :func:`answer`, which rebuilds the
agent from scratch (limits and salt from the sealed :class:`~sessions_app.models.HostedSession`,
with the strategy, parameters and settle policy copied there at open), feeds it the session's
whole log in seq order, and submits whatever it still has to say through
:func:`arbiter_app.services.receive_envelope`, exactly as an external agent would over the API.

Running :func:`answer` twice is harmless: an answer's ``message_id`` is derived from the seq it
answers and its ``timestamp`` is that entry's ``received_at``, so a second run submits the very
same envelope and the arbiter replays its first answer (200) instead of taking a second move.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from arbiter_app import selectors as arbiter
from arbiter_app import services as arbiter_services
from arbiter_app.queue import enqueue
from oanp.agents import LimitGuard, MerchantAgent
from oanp.canonical import JsonObject, canonical_bytes
from oanp.envelope import parse_envelope, parse_timestamp
from oanp.errors import OutOfTurn, ProtocolError, SessionTerminal, TimerExpired
from sessions_app import services
from sessions_app.models import AgentProfile, HostedSession, Mode
from sessions_app.vault import unseal, unseal_text

log = logging.getLogger(__name__)


# A race with a timer or a second run of this task: the session moved on without this answer.
_BENIGN = (OutOfTurn, SessionTerminal, TimerExpired)


def on_entries_committed(
    sender: Any, *, session_id: str, merchant_agent_id: str, entries: Sequence[Any], **_: Any
) -> None:
    """Queue an answer when a buyer's envelope to a hosted agent committed.

    Called after the commit (see :mod:`arbiter_app.events`). Only a buyer's envelope asks the
    merchant to move; the merchant's own moves and the arbiter's verdicts do not. This must
    never raise: the arbiter's stream wake-ups are sent after its listeners.
    """
    try:
        if not any(entry["envelope"]["sender"]["role"] == "buyer" for entry in entries):
            return
        if AgentProfile.objects.filter(agent_id=merchant_agent_id, mode=Mode.HOSTED).exists():
            from sessions_app import tasks

            enqueue(
                tasks.answer_session,
                args=[session_id],
                about=f"the hosted answer in session {session_id}; its timer will close it",
            )
    except Exception:  # the session's response timer closes it if no answer ever comes
        log.exception("could not queue the hosted answer in session %s", session_id)


class _AnswerIds:
    """Message ids derived from the seq being answered: the same on every run."""

    def __init__(self) -> None:
        self.seq = 0
        self._n = 0

    def answering(self, seq: int) -> None:
        self.seq, self._n = seq, 0

    def __call__(self) -> str:
        self._n += 1
        return f"hosted.{self.seq}.{self._n}"


def pending_answers(hosted: HostedSession, entries: Sequence[JsonObject]) -> list[JsonObject]:
    """The envelopes the hosted agent has still to submit after ``entries`` (the whole log)."""
    ids = _AnswerIds()
    agent = MerchantAgent(
        agent_id=hosted.agent.agent_id,
        vault=unseal(hosted.sealed_limits).for_item({}),
        strategy=hosted.merchant_strategy(),
        salt=unseal_text(hosted.sealed_salt),
        new_message_id=ids,
        settle=hosted.settle_policy(),
    )
    answers: list[JsonObject] = []
    for entry in entries:
        ids.answering(int(entry["seq"]))
        answers += agent.receive(entry["envelope"], parse_timestamp(entry["received_at"]))
    if agent.finished:
        return []
    logged = {entry["envelope"]["message_id"] for entry in entries}
    return [answer for answer in answers if answer["message_id"] not in logged]


def answer(session_id: str) -> int:
    """Submit the hosted merchant agent's pending answers; returns how many were new moves."""
    session = arbiter.session_named(session_id)
    if session is None:
        return 0
    profile = AgentProfile.objects.filter(
        agent_id=session.merchant_agent_id, mode=Mode.HOSTED
    ).first()
    if profile is None:
        return 0
    entries = arbiter.session_entries(session)
    try:
        hosted = services.open_hosted_session(
            profile=profile, session_id=session_id, item=entries[0]["envelope"]["payload"]["item"]
        )
        pending = pending_answers(hosted, entries)
    except (services.NoLimits, LimitGuard) as refusal:
        # Never the limits themselves in a log line: the messages do not carry them.
        log.error("hosted agent %s cannot answer in %s: %s", profile.agent_id, session_id, refusal)
        return 0
    credential = services.hosted_credential(profile.agent_id)
    applied = 0
    for envelope in pending:
        try:
            outcome = arbiter_services.receive_envelope(
                agent=credential, envelope=parse_envelope(canonical_bytes(envelope))
            )
        except _BENIGN as late:
            log.info("hosted answer in %s no longer needed: %s", session_id, late.code)
            continue
        except ProtocolError as refused:
            log.error("the arbiter refused hosted answer in %s: %s", session_id, refused.code)
            continue
        applied += outcome.status == 201
        log.info(
            "hosted agent %s sent %s %s in %s (%d)",
            profile.agent_id,
            envelope["type"],
            envelope["message_id"],
            session_id,
            outcome.status,
        )
    return applied
