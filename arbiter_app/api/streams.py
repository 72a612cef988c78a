"""The Server-Sent Event streams of docs/protocol.md §14: one session's log, and an agent's inbox.

Each stream reads entries from the database and waits on a channel-layer wake-up
(:mod:`arbiter_app.events`) or a short poll, whichever comes first, so a lost wake-up only
delays a frame, and a channel layer that is away only slows streams to the poll. A frame's
``id`` is what ``Last-Event-ID`` resumes from: the entry's ``seq`` for a session, an opaque
cursor for the inbox.

A stream lives as long as its key: it re-checks the key every
``OANP_STREAM_RECHECK_SECONDS`` and at once when the key's revocation is announced, and ends
when the key is revoked (a reconnect then gets 401). Each process serves at most
``OANP_STREAMS_PER_KEY`` streams per key at once (429 beyond).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import weakref
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from channels.layers import BaseChannelLayer, get_channel_layer
from django.conf import settings
from django.db import DatabaseError, connection
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from arbiter_app import events, limits, selectors
from arbiter_app.auth import authenticate, client_address
from arbiter_app.models import AgentCredential, Session
from arbiter_app.problems import problem_body, problem_response, protocol_problem
from oanp.errors import ProtocolError
from oanp.state import Phase

log = logging.getLogger(__name__)

#: Longest wait between two reads when no wake-up comes.
POLL_SECONDS = 1.0
#: A comment line this often keeps proxies from closing an idle stream.
HEARTBEAT_SECONDS = 15.0
#: How long a hole in entry ids may stay open before the inbox passes it (see selectors).
GAP_GRACE_SECONDS = 2.0

#: Bound on one call to the channel layer when joining or leaving its groups.
LAYER_CALL_SECONDS = 2.0
#: After the channel layer failed, a stream polls this long before it joins its groups again;
#: while joined, it joins again this often, since a restarted Redis forgets its groups.
REJOIN_SECONDS = 30.0

R = TypeVar("R")


class BadCursor(ProtocolError):
    code = "bad_cursor"
    title = "Last-Event-ID is not a cursor of this stream"


class TooManyStreams(ProtocolError):
    code = "too_many_streams"
    status = 429
    title = "Too many streams are open with this API key"


def _read_and_release(read: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    # A stream lives for minutes; holding a database connection between reads would pin one
    # per open stream, so each read gives its connection back.
    try:
        return read(*args, **kwargs)
    finally:
        connection.close()


def _db(read: Callable[..., R], *args: Any, **kwargs: Any) -> Awaitable[R]:
    return sync_to_async(_read_and_release)(read, *args, **kwargs)


def frame(event_id: str, event: str, data: str) -> bytes:
    return f"id: {event_id}\nevent: {event}\ndata: {data}\n\n".encode()


class Listener:
    """Wake-ups for one stream: a message to any of its groups, or the timeout, whichever comes
    first. While the channel layer is away the stream just polls, and joins again later."""

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
            log.warning("stream wake-ups unavailable, polling instead: %r", error)
        self.channel = None
        self.join_at = time.monotonic() + REJOIN_SECONDS

    async def wait(self, timeout: float) -> str | None:
        """The type of the message that ended the wait, or ``None`` when it timed out."""
        await self.join()
        if self.layer is None or self.channel is None:
            await asyncio.sleep(timeout)
            return None
        started = time.monotonic()
        try:
            message = await asyncio.wait_for(self.layer.receive(self.channel), timeout)
        except TimeoutError:
            return None
        except Exception as error:
            self._lost(error)
            await asyncio.sleep(max(0.0, timeout - (time.monotonic() - started)))
            return None
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


class KeyWatch:
    """Whether the stream's key is still live: asked of the database once the stream listens
    for revocations (one announced between the key's check and then would be missed), then every
    ``OANP_STREAM_RECHECK_SECONDS``, and at once after a revocation wake-up."""

    def __init__(self, credential: AgentCredential) -> None:
        self.credential_id = credential.pk
        self.checked_at = -math.inf

    async def revoked(self, woken_by: str | None) -> bool:
        due = time.monotonic() - self.checked_at >= settings.OANP_STREAM_RECHECK_SECONDS
        if woken_by != events.REVOKED_TYPE and not due:
            return False
        self.checked_at = time.monotonic()
        return not await _db(selectors.credential_is_live, self.credential_id)


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
        credential = await _db(authenticate, header, client_address(request.META))
    except limits.RateLimited as error:
        return _refusal(request, error)
    if credential is None:
        body = problem_body(
            status=401,
            code="unauthorized",
            title="Authentication required",
            detail="send Authorization: Bearer <api key>" if not header else "unknown API key",
            instance=request.path,
        )
        return problem_response(body, {"WWW-Authenticate": 'Bearer realm="oanp"'})
    if request.method != "GET":
        # Without this, POST met the CSRF middleware (403 HTML) and OPTIONS or HEAD opened a
        # stream. Checked after the key, as DRF does for the other endpoints.
        body = problem_body(
            status=405,
            code="method_not_allowed",
            title="Method not allowed",
            detail=f"{request.method} is not allowed here; use GET",
            instance=request.path,
        )
        return problem_response(body, {"Allow": "GET"})
    return credential


#: The first bytes of every stream. Daphne sends the status line and headers only with the
#: first body bytes, so a stream with nothing to send yet (an idle inbox, a resume at the
#: head) would leave the client waiting for its response, and an EventSource never "open".
OPENING = b": stream open\n\n"


class _Slot:
    """A stream's place among its key's open streams (:data:`_open_streams`)."""


async def _opened(
    chunks: AsyncIterator[bytes], slot: _Slot, slots: weakref.WeakSet[_Slot]
) -> AsyncIterator[bytes]:
    try:
        yield OPENING
        async for chunk in chunks:
            yield chunk
    except DatabaseError as error:
        log.warning("stream ended, the database failed: %r", error)
        yield UNAVAILABLE
    finally:
        # Freed as the stream ends, not whenever the collector gets to its generator.
        slots.discard(slot)


#: The streams each key has open in this process. A stream leaves the set as it ends; one
#: whose client left before it started leaves when its generator, which alone holds its slot,
#: is collected, so it is not counted for ever.
_open_streams: defaultdict[int, weakref.WeakSet[_Slot]] = defaultdict(weakref.WeakSet)


def _refusal(request: HttpRequest, error: ProtocolError) -> HttpResponse:
    return problem_response(protocol_problem(error, request.path), getattr(error, "headers", {}))


def _stream(agent: AgentCredential, chunks: AsyncIterator[bytes]) -> StreamingHttpResponse:
    """The stream's response, once every other check passed: the key's rate limit and its cap
    on open streams are section 7's last refusal (429)."""
    limits.charge(agent.prefix).admit()
    open_now = _open_streams[agent.pk]
    if len(open_now) >= settings.OANP_STREAMS_PER_KEY:
        raise TooManyStreams(
            f"this API key has {len(open_now)} streams open here, the most allowed; "
            "close one or share one inbox stream between tasks"
        )
    slot = _Slot()
    open_now.add(slot)
    content = _opened(chunks, slot, open_now)
    response = StreamingHttpResponse(content, content_type="text/event-stream")
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
        session = await _db(selectors.visible_session, agent=agent, session_id=session_id)
        after = _seq_cursor(_last_event_id(request))
        return await _db(_stream, agent, _session_frames(agent, session, after))
    except ProtocolError as error:
        return _refusal(request, error)


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
    agent: AgentCredential, session: Session, after: int
) -> AsyncIterator[bytes]:
    groups = (events.session_group(session.session_id), events.credential_group(agent.prefix))
    async with _listening(groups) as listener:
        watch = KeyWatch(agent)
        quiet_since = time.monotonic()
        woken_by: str | None = None
        while True:
            if await watch.revoked(woken_by):
                yield REVOKED
                return
            woken_by = None
            frames, finished = await _db(_session_batch, session, after)
            for seq, kind, data in frames:
                yield frame(str(seq), kind, data)
                after = seq
            if finished:
                return
            if frames:
                quiet_since = time.monotonic()
                continue
            if time.monotonic() - quiet_since >= HEARTBEAT_SECONDS:
                yield b": keep-alive\n\n"
                quiet_since = time.monotonic()
            woken_by = await listener.wait(POLL_SECONDS)


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
        return await _db(_stream, agent, _inbox_frames(agent, after))
    except ProtocolError as error:
        return _refusal(request, error)


async def _inbox_frames(agent: AgentCredential, after: int | None) -> AsyncIterator[bytes]:
    groups = (events.agent_group(agent.agent_id), events.credential_group(agent.prefix))
    async with _listening(groups) as listener:
        if after is None:
            after = await _db(selectors.inbox_start)
        watch = KeyWatch(agent)
        gap: tuple[int, float] | None = None  # (first missing id, since when)
        quiet_since = time.monotonic()
        woken_by: str | None = None
        while True:
            if await watch.revoked(woken_by):
                yield REVOKED
                return
            woken_by = None
            overdue = gap is not None and time.monotonic() - gap[1] >= GAP_GRACE_SECONDS
            page = await _db(selectors.inbox_page, agent=agent, after=after, skip_gap=overdue)
            for cursor, _session_id, entry in page.entries:
                yield frame(f"{CURSOR_PREFIX}{cursor}", entry.type, selectors.entry_text(entry))
            moved = page.scanned_to != after
            after = page.scanned_to
            if page.gap_at is None:
                gap = None
            elif gap is None or gap[0] != page.gap_at:
                gap = (page.gap_at, time.monotonic())
            if moved:
                quiet_since = time.monotonic()
                continue
            if time.monotonic() - quiet_since >= HEARTBEAT_SECONDS:
                yield b": keep-alive\n\n"
                quiet_since = time.monotonic()
            woken_by = await listener.wait(0.1 if gap is not None else POLL_SECONDS)
