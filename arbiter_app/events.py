"""The live-update contract: what the arbiter announces after each commit, and where.

Nothing here runs inside a transaction: :func:`announce_all` is called from
``transaction.on_commit``, so a listener never hears of an entry that may still roll back.

- ``entries_committed`` (a Django signal) is sent with ``session_id``, ``buyer_agent_id``,
  ``merchant_agent_id`` and ``entries`` (their JSON, in seq order). In-process listeners such
  as hosted agents connect to it.
- ``batch_committed`` is sent once per commit with ``announcements``, every session's
  :class:`Announcement` of it (one for an envelope, hundreds for a sweep of timers), for
  listeners that answer a whole batch with one query.
- ``deadlines_set`` is sent once per commit that set timers needing a task now, with
  ``deadlines``: each such session's ``(session_id, due)``. :mod:`arbiter_app.timers` arms them.
- Channel-layer groups :func:`session_group` and :func:`agent_group` receive
  ``{"type": "oanp.entries", "session_id", "head_seq"}``: a wake-up, not the data. Streams
  read the entries from the database, so a lost wake-up delays a push but never loses one.
  The committing thread only queues them: the process's wake-up loop sends all queued since
  its last send in one batch, so no request waits on the channel layer.
- :func:`credential_group` receives ``{"type": "oanp.revoked"}`` when its API key is revoked:
  every stream opened with the key re-checks it at once (and on its own every few seconds, so
  a lost message only delays the end of the stream).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync
from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import InMemoryChannelLayer, channel_layers, get_channel_layer
from django.dispatch import Signal

from arbiter_app.breaker import Breaker
from oanp.wire.canonical import JsonObject

log = logging.getLogger(__name__)

entries_committed = Signal()
batch_committed = Signal()
deadlines_set = Signal()

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


def credential_group(prefix: str) -> str:
    return _group("key", prefix)


REVOKED_TYPE = "oanp.revoked"


WAKE_TIMEOUT_SECONDS = 2.0
#: After the channel layer failed, wake-ups skip it this long before trying again.
layer_breaker = Breaker(open_seconds=5.0)
_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()


def _wake_loop() -> asyncio.AbstractEventLoop:
    """One event loop per process for wake-ups, running in a thread of its own.

    Outside the server (a worker, a command) there is no running loop, and ``async_to_sync``
    would start a new one, with a new Redis connection, for every commit: most of the cost of
    a timer's close. A loop that lives on keeps the layer's connections.
    """
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="oanp-wake-ups", daemon=True).start()
        return _loop


Wake = tuple[set[str], dict[str, Any]]


async def _wake(layer: Any, wakes: Sequence[Wake]) -> None:
    # One hop to the event loop for every message, their sends in parallel; on Redis, every
    # group without members in one round trip (oanp_site.channel_layer).
    sends = [(group, message) for groups, message in wakes for group in groups]
    batched = getattr(layer, "group_send_each", None)
    if batched is not None:
        await batched(sends)
    else:
        await asyncio.gather(*(layer.group_send(group, message) for group, message in sends))


@dataclass(frozen=True, slots=True)
class Announcement:
    """Entries of one session, committed."""

    session_id: str
    buyer_agent_id: str
    merchant_agent_id: str
    entries: Sequence[JsonObject]
    #: The ids of the parties' live callbacks, read under the session's lock in the step's
    #: transaction, or ``None`` where the step did not read them (its listener then does).
    callbacks: tuple[int, ...] | None = None


def announce_all(announcements: Sequence[Announcement]) -> None:
    """Tell every listener of each session what committed: the signal once per session, the
    channel layer once for them all (a batch of timers closes with one wake-up)."""
    wakes: list[Wake] = []
    for a in announcements:
        entries_committed.send(
            sender=__name__,
            session_id=a.session_id,
            buyer_agent_id=a.buyer_agent_id,
            merchant_agent_id=a.merchant_agent_id,
            entries=a.entries,
        )
        if a.entries:
            groups = {
                ALL_SESSIONS_GROUP,
                session_group(a.session_id),
                agent_group(a.buyer_agent_id),
                agent_group(a.merchant_agent_id),
            }
            message = {
                "type": MESSAGE_TYPE,
                "session_id": a.session_id,
                "head_seq": a.entries[-1]["seq"],
            }
            wakes.append((groups, message))
    batch_committed.send(sender=__name__, announcements=announcements)
    # The commit stands either way; streams fall back to polling the database.
    about = (
        f"the streams of session {announcements[0].session_id}"
        if len(wakes) == 1
        else f"the streams of {len(wakes)} sessions"
    )
    _send(wakes, about=about)


def announce_deadlines(deadlines: Sequence[tuple[str, datetime]]) -> None:
    """Tell the timers which sessions' deadlines, committed, need a task armed."""
    deadlines_set.send(sender=__name__, deadlines=deadlines)


def announce_revocation(*, prefixes: Sequence[str]) -> None:
    """Tell the streams opened with these API keys that the keys are revoked."""
    send_to_groups(
        {credential_group(prefix) for prefix in prefixes},
        {"type": REVOKED_TYPE},
        about="the streams of revoked keys",
    )


def send_to_groups(groups: set[str], message: dict[str, Any], *, about: str) -> None:
    """Send ``message`` to ``groups`` from synchronous code; never raises.

    Every caller has committed already and its listeners also poll, so a layer that is away
    costs a delay, never a change: it is logged and skipped. While the layer keeps failing,
    :data:`layer_breaker` skips it outright rather than pay a timeout on every commit.
    """
    _send([(groups, message)], about=about)


def _send(wakes: Sequence[Wake], *, about: str) -> None:
    layer = get_channel_layer()
    if layer is None or not any(groups for groups, _ in wakes) or not layer_breaker.allows():
        return
    if isinstance(layer, InMemoryChannelLayer):
        # Its queues belong to the server's event loop: hop onto that loop and wait.
        try:
            async_to_sync(_wake)(layer, wakes)
        except Exception as error:
            log.warning("could not wake %s: %s", about, error or type(error).__name__)
        return
    # Off the caller's path: the commit has been answered for, and the wake-up loop sends
    # what every thread of the process queued since its last flush in one batch.
    with _queue_lock:
        _queued.append((wakes, about))
        flush_pending = _flush_pending.is_set()
        _flush_pending.set()
    if not flush_pending:
        _wake_loop().call_soon_threadsafe(_start_flush, layer)


#: Wake-ups queued by this process's threads for the wake-up loop, and whether a flush of them
#: is already on its way there.
_queued: list[tuple[Sequence[Wake], str]] = []
_queue_lock = threading.Lock()
_flush_pending = threading.Event()
#: Flushes in flight, kept so that the loop does not collect them before they end.
_flushes: set[asyncio.Task[None]] = set()


def _start_flush(layer: Any) -> None:
    task = asyncio.get_running_loop().create_task(_flush(layer))
    _flushes.add(task)
    task.add_done_callback(_flushes.discard)


async def _flush(layer: Any) -> None:
    with _queue_lock:
        batch = list(_queued)
        _queued.clear()
        _flush_pending.clear()
    wakes = [wake for queued, _ in batch for wake in queued]
    try:
        await asyncio.wait_for(_wake(layer, wakes), WAKE_TIMEOUT_SECONDS)
    except Exception as error:
        layer_breaker.failed()
        about = batch[0][1] if len(batch) == 1 else f"{len(batch)} commits' streams"
        log.warning("could not wake %s: %s", about, error or type(error).__name__)
    else:
        layer_breaker.succeeded()


async def _echo(layer: Any) -> None:
    channel = await layer.new_channel()
    await layer.send(channel, {"type": "oanp.echo"})
    await layer.receive(channel)


#: The echo's own layer, built from the same settings as the process's shared one, and that
#: shared layer it mirrors. The echo runs on the wake-up loop while streams wait in receive()
#: on the shared layer from the server's loop, and channels_redis refuses receive() on one
#: layer from two loops at once: on the shared layer the check failed (and could fail a
#: stream's own wait) exactly while streams were open.
_echo_layers: tuple[Any, Any] | None = None
_echo_lock = threading.Lock()


def _echo_layer(shared: Any) -> Any:
    global _echo_layers  # one per process, used only on the wake-up loop
    with _echo_lock:
        if _echo_layers is None or _echo_layers[0] is not shared:
            _echo_layers = (shared, channel_layers.make_backend(DEFAULT_CHANNEL_LAYER))
        return _echo_layers[1]


def echo(timeout: float) -> str:
    """Send one message through the channel layer and read it back, as a wake-up would travel;
    the layer's class name. Raises when the layer fails or takes longer than ``timeout``.

    The message travels through a layer of the check's own, made from the same settings (the
    same Redis), so that the check never receives alongside a stream on the shared layer. The
    in-memory layer lives inside this process and cannot be away: it is only named.
    """
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer is configured")
    if not isinstance(layer, InMemoryChannelLayer):
        future = asyncio.run_coroutine_threadsafe(_echo(_echo_layer(layer)), _wake_loop())
        try:
            future.result(timeout)
        except BaseException:
            future.cancel()  # a receive left waiting on a silent server would never end
            raise
    return type(layer).__name__
