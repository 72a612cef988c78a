"""The Server-Sent Event streams of PROTOCOL section 7: one session's log, and an agent's inbox.

Each stream reads entries from the database and waits on a channel-layer wake-up
(:mod:`arbiter_app.events`) or a short poll, whichever comes first, so a lost wake-up only
delays a frame. A frame's ``id`` is what ``Last-Event-ID`` resumes from: the entry's ``seq``
for a session, an opaque cursor for the inbox.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.views.decorators.csrf import csrf_exempt

from arbiter_app import events, selectors
from arbiter_app.auth import credential_for
from arbiter_app.models import AgentCredential, Session
from arbiter_app.problems import problem_body, problem_response, protocol_problem
from oanp.errors import ProtocolError

#: Longest wait between two reads when no wake-up comes.
POLL_SECONDS = 1.0
#: A comment line this often keeps proxies from closing an idle stream.
HEARTBEAT_SECONDS = 15.0
#: How long a hole in entry ids may stay open before the inbox passes it (see selectors).
GAP_GRACE_SECONDS = 2.0

TERMINAL_PHASES = frozenset({"AGREED", "CLOSED"})
R = TypeVar("R")


class BadCursor(ProtocolError):
    code = "bad_cursor"
    title = "Last-Event-ID is not a cursor of this stream"


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


@asynccontextmanager
async def _wakeups(group: str) -> AsyncIterator[Callable[[float], Awaitable[None]]]:
    """A wait that ends at the next wake-up for ``group`` or after the timeout."""
    layer = get_channel_layer()
    if layer is None:

        async def sleep(timeout: float) -> None:
            await asyncio.sleep(timeout)

        yield sleep
        return
    channel = await layer.new_channel()
    await layer.group_add(group, channel)

    async def wait(timeout: float) -> None:
        with suppress(TimeoutError):
            await asyncio.wait_for(layer.receive(channel), timeout)

    try:
        yield wait
    finally:
        await layer.group_discard(group, channel)


def _last_event_id(request: HttpRequest) -> str | None:
    return request.headers.get("Last-Event-ID") or request.GET.get("last_event_id")


async def _authorized(request: HttpRequest) -> AgentCredential | HttpResponse:
    header = request.headers.get("Authorization", "")
    credential = await _db(credential_for, header) if header else None
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


async def _opened(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    yield OPENING
    async for chunk in chunks:
        yield chunk


def _stream(chunks: AsyncIterator[bytes]) -> StreamingHttpResponse:
    response = StreamingHttpResponse(_opened(chunks), content_type="text/event-stream")
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
    except ProtocolError as error:
        return problem_response(protocol_problem(error, request.path))
    return _stream(_session_frames(session, after))


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
    return frames, head[0] in TERMINAL_PHASES and last >= head[1]


async def _session_frames(session: Session, after: int) -> AsyncIterator[bytes]:
    async with _wakeups(events.session_group(session.session_id)) as wait:
        quiet_since = time.monotonic()
        while True:
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
            await wait(POLL_SECONDS)


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
    except ProtocolError as error:
        return problem_response(protocol_problem(error, request.path))
    return _stream(_inbox_frames(agent, after))


async def _inbox_frames(agent: AgentCredential, after: int | None) -> AsyncIterator[bytes]:
    async with _wakeups(events.agent_group(agent.agent_id)) as wait:
        if after is None:
            after = await _db(selectors.inbox_start)
        gap: tuple[int, float] | None = None  # (first missing id, since when)
        quiet_since = time.monotonic()
        while True:
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
            await wait(0.1 if gap is not None else POLL_SECONDS)
