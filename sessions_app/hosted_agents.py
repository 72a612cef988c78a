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

No answer is lost to the broker: while it is away the answer is made in the process that
committed the buyer's move, and :func:`sweep_answers` makes every answer whose task was lost
otherwise (a crash between a commit and its queueing, a broker that forgot its queue). The
arbiter runs hosted agents, so a hosted agent's window running out is the arbiter's failure,
never the merchant's: an answer that comes too late ends the session ``operator_terminated``
instead of letting its timer close it ``response_timeout`` (docs/agents.md, Hosted agents
and the arbiter's outages).

When the merchant chose to (``reveal_after_end``, on at the session's open and still on), the
end of a session queues :func:`reveal_after_end`, which reveals the limits the agent committed
to through :func:`arbiter_app.services.reveal_constraints`, the service behind an external
agent's ``POST …/reveal``; :func:`sweep_reveals` finds the ones whose task was lost.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from arbiter_app import selectors as arbiter
from arbiter_app import services as arbiter_services
from oanp.agents.parties import AgentStateError, LimitGuard, MerchantAgent
from oanp.agents.pricelist import PriceList
from oanp.wire.canonical import JsonObject, canonical_bytes
from oanp.wire.envelope import parse_envelope, parse_timestamp
from oanp.wire.errors import (
    AlreadyRevealed,
    OutOfTurn,
    ProtocolError,
    SessionTerminal,
    TimerExpired,
)
from oanp.wire.party_signatures import sign_envelope
from oanp.wire.state import Phase
from sessions_app import hosted_directory, selectors, services
from sessions_app.hosted_keys import hosted_signer
from sessions_app.models import AgentProfile, HostedSession, Mode
from sessions_app.queue import ANSWER_SESSION, REVEAL_AFTER_END, enqueue
from sessions_app.vault import unseal_session_vault, unseal_text

log = logging.getLogger(__name__)


# A race with a timer or a second run of this task: the session moved on without this answer.
_BENIGN = (OutOfTurn, SessionTerminal, TimerExpired)
#: The entries that end a session, whoever sends them.
_ENDINGS = frozenset({"session.agree", "session.close"})
_TERMINAL = [phase.value for phase in Phase if phase.is_terminal]


def on_entries_committed(
    sender: Any, *, session_id: str, merchant_agent_id: str, entries: Sequence[Any], **_: Any
) -> None:
    """Queue an answer when a buyer's envelope to a hosted agent committed, and the reveal
    after the end when the session ended.

    Called after the commit (see :mod:`arbiter_app.events`). Only a buyer's envelope asks the
    merchant to move; the merchant's own moves and the arbiter's verdicts do not. This must
    never raise: the arbiter's stream wake-ups are sent after its listeners.
    """
    try:
        asked = any(entry["envelope"]["sender"]["role"] == "buyer" for entry in entries)
        ended = any(entry["envelope"]["type"] in _ENDINGS for entry in entries)
        if not (asked or ended):
            return
        profile = hosted_directory.hosting(merchant_agent_id)
        if profile is None:
            return
        if asked and not enqueue(
            ANSWER_SESSION,
            args=[session_id],
            about=f"the hosted answer in session {session_id}; it is made here instead",
        ):
            # The buyer's window is running and no worker will hear of this move until the
            # broker is back: a few milliseconds here keep the session from timing out.
            answer(session_id)
        if ended and profile.reveal_after_end:
            enqueue(
                REVEAL_AFTER_END,
                args=[session_id],
                about=f"the hosted reveal in session {session_id}; the reveal sweep will send it",
            )
    except Exception:  # the sweeps make a lost answer and send a lost reveal
        log.exception("could not queue the hosted work in session %s", session_id)


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


def _rebuilt(
    hosted: HostedSession, entries: Sequence[JsonObject]
) -> tuple[MerchantAgent, list[JsonObject]]:
    """The hosted agent rebuilt and fed ``entries`` (the whole log), and all it answered."""
    ids = _AnswerIds()
    # A session the agent held no limits for keeps none: the agent, holding an empty price
    # list, declines it.
    sealed = bytes(hosted.sealed_limits)
    agent = MerchantAgent(
        agent_id=hosted.agent.agent_id,
        vault=unseal_session_vault(sealed) if sealed else PriceList(()),
        strategy=hosted.merchant_strategy(),
        salt=unseal_text(hosted.sealed_salt),
        new_message_id=ids,
        settle=hosted.settle_policy(),
    )
    answers: list[JsonObject] = []
    for entry in entries:
        ids.answering(int(entry["seq"]))
        answers += agent.receive(entry["envelope"], parse_timestamp(entry["received_at"]))
    return agent, answers


def pending_answers(hosted: HostedSession, entries: Sequence[JsonObject]) -> list[JsonObject]:
    """The envelopes the hosted agent has still to submit after ``entries`` (the whole log)."""
    agent, answers = _rebuilt(hosted, entries)
    if agent.declined is not None:
        services.note_declined(hosted=hosted, why=agent.declined)
    if agent.finished:
        return []
    logged = {entry["envelope"]["message_id"] for entry in entries}
    return [answer for answer in answers if answer["message_id"] not in logged]


#: The least time left in a hosted agent's window for its answer to be sent: an answer the
#: arbiter takes at or after the due moment is refused, and the refusal closes the session
#: ``response_timeout``. The answer is in within milliseconds; the margin covers a wait for
#: the session's row.
ANSWER_MARGIN = timedelta(seconds=1)


def _window_ran_out(timers: JsonObject, now: datetime) -> bool:
    """Whether the hosted agent's window (``timers`` of the session's summary) ends before an
    answer sent at ``now`` could be taken, while the session's own deadline (the buyer's
    choice, and nobody's fault) does not."""
    cutoff = now + ANSWER_MARGIN
    deadline, turn_deadline = timers["deadline"], timers["turn_deadline"]
    if isinstance(deadline, str) and parse_timestamp(deadline) <= cutoff:
        return False
    return isinstance(turn_deadline, str) and parse_timestamp(turn_deadline) <= cutoff


def answer(session_id: str, now: datetime | None = None) -> int:
    """Submit the hosted merchant agent's pending answers; returns how many were new moves.

    When the agent's window ran out before the answer could be sent (the arbiter's workers
    were away), the session is ended ``operator_terminated`` instead. ``now`` is the
    arbiter's clock by default, read by each service once it holds the session's row."""
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
        opening = entries[0]["envelope"]["payload"]
        hosted = services.open_hosted_session(
            profile=profile,
            session_id=session_id,
            item=opening["item"],
            currency=opening["currency"],
        )
        pending = pending_answers(hosted, entries)
    except (services.NoLimits, LimitGuard) as refusal:
        # Never the limits themselves in a log line: the messages do not carry them.
        log.error("hosted agent %s cannot answer in %s: %s", profile.agent_id, session_id, refusal)
        return 0
    credential = services.hosted_credential(profile.agent_id)
    if credential is None:
        # Its merchant cut the runner off: the session's timer closes it, on the merchant.
        log.warning("hosted agent %s has no runner key; not answering", profile.agent_id)
        return 0
    timers = arbiter.summary_of(session)["timers"]
    assert isinstance(timers, dict)
    if pending and _window_ran_out(timers, now or timezone.now()):
        detail = (
            f"the arbiter did not run hosted agent {profile.agent_id}'s answer within its "
            f"{timers['response_window_s']} s window; the fault is the arbiter's, not the "
            "merchant's"
        )
        if arbiter_services.terminate_session(session_id=session_id, detail=detail, now=now):
            log.warning("hosted agent %s too late in %s: ended", profile.agent_id, session_id)
        return 0
    if hosted.declined:
        log.info("hosted agent %s declines %s: %s", profile.agent_id, session_id, hosted.declined)
    if not pending:
        return 0
    signer, applied = hosted_signer(profile), 0
    for envelope in pending:
        try:
            signed = sign_envelope(envelope, signer)
            outcome = arbiter_services.receive_envelope(
                agent=credential, envelope=parse_envelope(canonical_bytes(signed)), now=now
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


def reveal_after_end(session_id: str) -> bool:
    """Reveal the limits the hosted agent committed to in ``session_id``, once it ended, when
    the merchant chose to at its open and still does; whether this run's reveal went in.

    Safe to run any number of times: the session's row records that its reveal is done, and
    the arbiter refuses a second reveal (``already_revealed``), taken here as done too.
    """
    session = arbiter.session_named(session_id)
    hosted = (
        HostedSession.objects.filter(
            session_id=session_id,
            reveal_after_end=True,
            reveal_done_at__isnull=True,
            agent__reveal_after_end=True,
            # A declined session was committed to nothing: there is no limit to reveal.
            declined="",
        )
        .select_related("agent")
        .first()
    )
    # No row: the agent never answered, so it committed nothing (or its merchant said no).
    if session is None or hosted is None or not session.is_terminal:
        return False
    revealed = False
    credential = services.hosted_credential(hosted.agent.agent_id)
    try:
        if credential is None:
            raise AgentStateError("its merchant revoked the runner's key")
        agent, _ = _rebuilt(hosted, arbiter.session_entries(session))
        arbiter_services.reveal_constraints(
            session=session,
            agent=credential,
            data=canonical_bytes(agent.reveal()),
        )
        revealed = True
    except AlreadyRevealed:
        log.info("hosted agent %s had revealed in %s already", hosted.agent.agent_id, session_id)
    except (ProtocolError, LimitGuard, AgentStateError) as refused:
        # Never the limits themselves in a log line: the messages do not carry them.
        log.error("hosted reveal in %s refused for good: %s", session_id, refused)
    HostedSession.objects.filter(pk=hosted.pk).update(reveal_done_at=timezone.now())
    if revealed:
        log.info("hosted agent %s revealed its limits in %s", hosted.agent.agent_id, session_id)
    return revealed


#: The most answers one sweep makes; the next sweep takes the rest.
ANSWER_SWEEP_BATCH = 100
#: How long a turn is left to its own task before the sweep makes its answer: that task
#: answers within a fraction of a second, so past this it was lost (and if it only lags, the
#: second submission is a replay). With the sweep every OANP_HOSTED_SWEEP_SECONDS (5), a lost
#: answer is made within about 7 s, inside the shortest window the protocol allows (10 s).
ANSWER_GRACE = timedelta(seconds=2)


def sweep_answers(now: datetime | None = None) -> int:
    """Make the hosted answers whose task was lost; how many were new moves."""
    asked_before = (now or timezone.now()) - ANSWER_GRACE
    waiting = selectors.hosted_turns_waiting(asked_before=asked_before, limit=ANSWER_SWEEP_BATCH)
    return sum(answer(session_id, now) for session_id in waiting)


#: The most reveals one sweep sends; the next sweep takes the rest.
REVEAL_SWEEP_BATCH = 100


def sweep_reveals() -> int:
    """Send the reveals after the end whose task was lost (a broker away, a crash between a
    commit and its queueing); how many went in."""
    ended = arbiter.sessions_of(None).filter(phase__in=_TERMINAL)
    due = HostedSession.objects.filter(
        reveal_after_end=True,
        reveal_done_at__isnull=True,
        agent__reveal_after_end=True,
        declined="",
        session_id__in=ended.values("session_id"),
    ).values_list("session_id", flat=True)[:REVEAL_SWEEP_BATCH]
    return sum(reveal_after_end(session_id) for session_id in due)
