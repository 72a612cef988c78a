"""The Server-Sent Event streams of docs/protocol.md §14: one session's log, and an agent's inbox.

Each stream reads entries from the database when its channel-layer group wakes it
(:mod:`arbiter_app.events`) or when the process's :mod:`stream_watch <arbiter_app.api.stream_watch>`
sees new entries, whichever comes first, so a lost wake-up only delays a frame, and a channel
layer that is away only slows streams to the watch's poll. An idle stream reads nothing. A
frame's ``id`` is what ``Last-Event-ID`` resumes from: the entry's ``seq`` for a session, an
opaque cursor for the inbox. An inbox opened without one starts at the live head.

A stream lives as long as its key: the watch re-checks every open stream's key every
``OANP_STREAM_RECHECK_SECONDS``, a stream re-checks its own at once when the key's revocation
is announced, and the stream ends when the key is revoked (a reconnect then gets 401).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from channels.layers import BaseChannelLayer, get_channel_layer
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from arbiter_app import events, limits, selectors
from arbiter_app.api.stream_watch import WATCH, Slot, db
from arbiter_app.auth import authenticate
from arbiter_app.models import AgentCredential, Session
from arbiter_app.problems import refusal_response
from arbiter_app.refusals import BadCursor, MethodNotAllowed, Unauthorized
from oanp.wire.errors import ProtocolError
from oanp.wire.state import Phase

log = logging.getLogger(__name__)

#: A comment line this often keeps proxies from closing an idle stream.
HEARTBEAT_SECONDS = 15.0

#: Bound on one call to the channel layer when joining or leaving its groups.
LAYER_CALL_SECONDS = 2.0
#: After the channel layer failed, a stream relies on the watch this long before it joins its
#: groups again; while joined, it joins again this often, since a restarted Redis forgets its
#: groups.
REJOIN_SECONDS = 30.0


def frame(event_id: str, event: str, data: str) -> bytes:
    return f"id: {event_id}\nevent: {event}\ndata: {data}\n\n".encode()


class Listener:
    """Wake-ups for one stream: a message to any of its groups, a change of the watch, or the
    timeout, whichever comes first. While the channel layer is away the stream relies on the
    watch alone, and joins again later."""

    def __init__(self, layer: BaseChannelLayer | None, groups: Sequence[str]) -> None:
        self.layer = layer
        self.groups = tuple(groups)
        self.channel: str | None = None
        self.join_at = 0.0

    async def join(self) -> None:
        if self.layer is None or time.monotonic() < self.join_at:
            return
        try:
            channel = self.channel or await asyncio.wait_for(
                self.layer.new_channel(), LAYER_CALL_SECONDS
            )
            for group in self.groups:
                await asyncio.wait_for(self.layer.group_add(group, channel), LAYER_CALL_SECONDS)
        except Exception as error:
            self._lost(error)
            return
        self.channel = channel
        self.join_at = time.monotonic() + REJOIN_SECONDS

    def _lost(self, error: BaseException) -> None:
        if self.channel is not None or self.join_at == 0.0:
            log.warning("stream wake-ups unavailable, relying on the watch: %r", error)
        self.channel = None
        self.join_at = time.monotonic() + REJOIN_SECONDS

    async def wait(self, timeout: float, change: asyncio.Event) -> str | None:
        """The type of the message that ended the wait; ``None`` when ``change`` was set or
        the wait timed out."""
        await self.join()
        waits: set[asyncio.Future[object]] = {asyncio.ensure_future(change.wait())}
        received: asyncio.Future[object] | None = None
        if self.layer is not None and self.channel is not None:
            received = asyncio.ensure_future(self.layer.receive(self.channel))
            waits.add(received)
        try:
            await asyncio.wait(waits, timeout=max(0.0, timeout), return_when="FIRST_COMPLETED")
        finally:
            for pending in waits:
                pending.cancel()
        if received is None or not received.done() or received.cancelled():
            return None
        error = received.exception()
        if error is not None:
            self._lost(error)
            return None
        message = received.result()
        kind = message.get("type") if isinstance(message, dict) else None
        return kind if isinstance(kind, str) else None

    async def leave(self) -> None:
        if self.layer is None or self.channel is None:
            return
        for group in self.groups:
            try:
                await asyncio.wait_for(
                    self.layer.group_discard(group, self.channel), LAYER_CALL_SECONDS
                )
            except Exception:  # the layer forgets groups of its own accord (expiry)
                return


@asynccontextmanager
async def _listening(groups: Sequence[str]) -> AsyncIterator[Listener]:
    listener = Listener(get_channel_layer(), groups)
    # Joined before the stream's first read, so that no wake-up after it is missed.
    await listener.join()
    try:
        yield listener
    finally:
        await listener.leave()


class Waker:
    """What ends a stream's idle wait, and whether it must stop: its key revoked (found by
    the watch's re-check, or by its own check when a revocation is announced), or the
    database away."""

    def __init__(self, listener: Listener, slot: Slot, credential: AgentCredential) -> None:
        self.listener = listener
        self.slot = slot
        self.credential_id = credential.pk
        self.quiet_since = time.monotonic()
        self.woken_by: str | None = None
        #: Set once :meth:`sleep` has yielded the stream's last line.
        self.ended = False

    async def key_revoked(self) -> bool:
        # Asked once the stream listens for revocations: one announced between the key's
        # check and then would otherwise wait for the watch's next re-check.
        return not await db(selectors.credential_is_live, self.credential_id)

    def sent(self) -> None:
        self.quiet_since = time.monotonic()

    async def idle(self, change: asyncio.Event) -> AsyncIterator[bytes]:
        """Keep-alive lines while nothing happens; once something does, :attr:`woken_by` says
        what: the type of a channel-layer message, or ``None`` for a change of the watch."""
        while True:
            left = HEARTBEAT_SECONDS - (time.monotonic() - self.quiet_since)
            self.woken_by = await self.listener.wait(left, change)
            if self.woken_by is not None or change.is_set():
                return
            if time.monotonic() - self.quiet_since >= HEARTBEAT_SECONDS:
                yield KEEP_ALIVE
                self.sent()

    async def sleep(self, change: asyncio.Event, past: int | None) -> AsyncIterator[bytes]:
        """Keep-alive lines until a wake-up, or a change of the watch that moved its head past
        ``past`` (the watch's head only moves up); a change that moved nothing (another
        stream's key revoked) sends the stream back to sleep without a read. When the stream
        must end, its last line, and :attr:`ended`."""
        while True:
            async for line in self.idle(change):
                yield line
            last = await self.stop()
            if last is not None:
                self.ended = True
                yield last
                return
            if self.woken_by is not None or (WATCH.head or 0) > (past or 0):
                return
            change = WATCH.changed()

    async def stop(self) -> bytes | None:
        """The stream's last line when it must end now, else ``None``."""
        if WATCH.failure is not None:
            raise WATCH.failure
        if self.slot.revoked:
            return REVOKED
        if self.woken_by == events.REVOKED_TYPE and await self.key_revoked():
            return REVOKED
        return None


#: Sent after HEARTBEAT_SECONDS without an event.
KEEP_ALIVE = b": keep-alive\n\n"
#: Said as the stream's last line when its key is revoked; a reconnect gets 401.
REVOKED = b": the API key was revoked\n\n"
#: Said as the stream's last line when the database went away; a reconnect gets 503 until it
#: is back, then resumes from Last-Event-ID.
UNAVAILABLE = b": the arbiter's database is unavailable; reconnect later\n\n"


def _last_event_id(request: HttpRequest) -> str | None:
    return request.headers.get("Last-Event-ID") or request.GET.get("last_event_id")


async def _authorized(request: HttpRequest) -> AgentCredential | HttpResponse:
    header = request.headers.get("Authorization", "")
    try:
        credential = await db(authenticate, header, limits.client_address(request.META))
    except limits.RateLimited as error:
        return refusal_response(error, request.path)
    if credential is None:
        return refusal_response(Unauthorized.of(has_key=bool(header)), request.path)
    if request.method != "GET":
        # Without this, POST met the CSRF middleware (403 HTML) and OPTIONS or HEAD opened a
        # stream. Checked after the key, as DRF does for the other endpoints.
        return refusal_response(MethodNotAllowed(request.method or "", ("GET",)), request.path)
    return credential


#: The first bytes of every stream. Daphne sends the status line and headers only with the
#: first body bytes, so a stream with nothing to send yet (an idle inbox, a resume at the
#: head) would leave the client waiting for its response, and an EventSource never "open".
OPENING = b": stream open\n\n"


async def _opened(chunks: AsyncIterator[bytes], slot: Slot) -> AsyncIterator[bytes]:
    try:
        yield OPENING
        async for chunk in chunks:
            yield chunk
    except DatabaseError as error:
        log.warning("stream ended, the database failed: %r", error)
        yield UNAVAILABLE
    finally:
        # Freed as the stream ends, not whenever the collector gets to its generator.
        WATCH.release(slot)


async def _admitted(agent: AgentCredential) -> Slot:
    """The stream's place, once every other check passed: the key's rate limit and its cap
    on open streams are section 7's last refusals (429), then the process's cap (503)."""
    await db(lambda: limits.charge(agent.prefix).admit())
    return WATCH.admit(agent.pk)


def _stream(slot: Slot, chunks: AsyncIterator[bytes]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(_opened(chunks, slot), content_type="text/event-stream")
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"
    return response


# One session --------------------------------------------------------------------------------


@csrf_exempt  # API keys, not cookies, authenticate these; any method gets its problem+json
async def session_events(request: HttpRequest, session_id: str) -> HttpResponse:
    agent = await _authorized(request)
    if isinstance(agent, HttpResponse):
        return agent
    try:
        session = await db(selectors.visible_session, agent=agent, session_id=session_id)
        after = _seq_cursor(_last_event_id(request))
        slot = await _admitted(agent)
        return _stream(slot, _session_frames(agent, slot, session, after))
    except ProtocolError as error:
        return refusal_response(error, request.path)


def _seq_cursor(value: str | None) -> int:
    if value is None:
        return 0
    # isdigit() alone lets through "٣" and "²" (int() of the latter raises: a 500).
    if not (value.isascii() and value.isdigit()) or len(value) > 9:
        raise BadCursor(f"Last-Event-ID {value[:40]!r} is not an entry seq")
    return int(value)


def _session_batch(session: Session, after: int) -> tuple[list[tuple[int, str, str]], bool]:
    """Entries after ``after`` as frames' parts, and whether the session is over and
    nothing more can follow."""
    rows = selectors.entries_after(session, after, limit=200)
    head = Session.objects.filter(pk=session.pk).values_list("phase", "head_seq").get()
    frames = [(e.seq, e.type, selectors.entry_text(e)) for e in rows]
    last = frames[-1][0] if frames else after
    return frames, Phase(head[0]).is_terminal and last >= head[1]


async def _session_frames(
    agent: AgentCredential, slot: Slot, session: Session, after: int
) -> AsyncIterator[bytes]:
    groups = (events.session_group(session.session_id), events.credential_group(agent.prefix))
    async with _listening(groups) as listener:
        waker = Waker(listener, slot, agent)
        if await waker.key_revoked():
            yield REVOKED
            return
        while True:
            change = WATCH.changed()
            read_at = WATCH.head
            frames, finished = await db(_session_batch, session, after)
            for seq, kind, data in frames:
                yield frame(str(seq), kind, data)
                after = seq
            if finished:
                return
            if frames:
                waker.sent()
                continue
            async for line in waker.sleep(change, read_at):
                yield line
            if waker.ended:
                return


# The agent's inbox -------------------------------------------------------------------------

CURSOR_PREFIX = "c"


def _inbox_cursor(value: str | None) -> int | None:
    if value is None:
        return None
    digits = value.removeprefix(CURSOR_PREFIX)
    if (
        not value.startswith(CURSOR_PREFIX)
        or not (digits.isascii() and digits.isdigit())  # see _seq_cursor
        or len(digits) > 18
    ):
        raise BadCursor(f"Last-Event-ID {value[:40]!r} is not an inbox cursor")
    return int(digits)


@csrf_exempt
async def inbox_events(request: HttpRequest) -> HttpResponse:
    agent = await _authorized(request)
    if isinstance(agent, HttpResponse):
        return agent
    try:
        after = _inbox_cursor(_last_event_id(request))
        slot = await _admitted(agent)
        skip: frozenset[int] = frozenset()
        if after is None:
            # The live head, found before the response opens: whatever commits once the client
            # sees it open is after it. Entries already committed past the head (beyond an
            # insert still being committed) are skipped, not sent as new.
            after = await WATCH.refresh()
            skip = await db(selectors.entry_ids_after, after)
        return _stream(slot, _inbox_frames(agent, slot, after, skip))
    except ProtocolError as error:
        return refusal_response(error, request.path)


async def _inbox_frames(
    agent: AgentCredential, slot: Slot, after: int, skip: frozenset[int]
) -> AsyncIterator[bytes]:
    groups = (events.agent_group(agent.agent_id), events.credential_group(agent.prefix))
    async with _listening(groups) as listener:
        waker = Waker(listener, slot, agent)
        if await waker.key_revoked():
            yield REVOKED
            return
        waker.woken_by = events.MESSAGE_TYPE  # the first read is up to a fresh head
        while True:
            change = WATCH.changed()
            # Read only up to the watch's head, below which every entry is committed; a
            # wake-up means an entry past it, so the head is brought up to date first.
            head = WATCH.head
            if waker.woken_by == events.MESSAGE_TYPE or head is None:
                head = await WATCH.refresh()
            page = await db(selectors.inbox_page, agent=agent, after=after, upto=head)
            for cursor, entry in page.entries:
                if cursor not in skip:
                    yield frame(f"{CURSOR_PREFIX}{cursor}", entry.type, selectors.entry_text(entry))
                    waker.sent()
            after = page.scanned_to
            if after < head:
                continue
            async for line in waker.sleep(change, after):
                yield line
            if waker.ended:
                return
