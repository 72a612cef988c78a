"""The one reader behind every event stream a server process holds open.

An idle stream must cost the rest of the API nothing. Each stream used to read the database
once a second (a poll for entries, its key every ``OANP_STREAM_RECHECK_SECONDS``) on the one
thread that, under ASGI, runs every synchronous view, so a few hundred idle streams queued
ahead of every API request. Now one :class:`Watch` per process reads for them all:

- the entries: one query every :data:`POLL_SECONDS` for the ids committed since its last
  scan, and one at once when a channel-layer wake-up asks for it (:meth:`Watch.refresh`,
  shared by every stream woken meanwhile). Its :attr:`Watch.head` is the id up to which every
  entry is committed: it holds back at a hole in the ids (an insert not yet committed) for
  :data:`GAP_GRACE_SECONDS`, then passes it (a rolled-back insert leaves a hole for ever);
- the keys: one query every ``OANP_STREAM_RECHECK_SECONDS`` for every open stream's key.

A stream sleeps until its channel-layer group wakes it, the head moves, its key is found
revoked or the database is found away (:meth:`Watch.changed`), so an idle stream makes no
query at all. Every read, the watch's and the streams', runs in a worker thread
(``thread_sensitive=False``), never on the synchronous views' thread.

The watch also counts the process's streams: at most ``OANP_STREAMS_PER_KEY`` per key (429
``too_many_streams``) and ``OANP_STREAMS_PER_PROCESS`` in all (503 ``streams_full``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import DatabaseError, connection

from arbiter_app import selectors
from arbiter_app.refusals import RETRY_AFTER_SECONDS, StreamsFull, TooManyStreams

log = logging.getLogger(__name__)

#: Longest wait between two scans of the entries when no wake-up asks for one sooner.
POLL_SECONDS = 1.0
#: How long a hole in entry ids may stay open before the watch passes it.
GAP_GRACE_SECONDS = 2.0
#: Pages of ids one scan reads at most, so a burst is caught up over a few polls.
PAGES_PER_SCAN = 20

R = TypeVar("R")


def _read_and_release(read: Callable[..., R], *args: Any, **kwargs: Any) -> R:
    # A stream lives for minutes; holding a database connection between reads would pin one
    # per open stream, so each read gives its connection back.
    try:
        return read(*args, **kwargs)
    finally:
        connection.close()


def db(read: Callable[..., R], *args: Any, **kwargs: Any) -> Awaitable[R]:
    """``read`` in a worker thread of its own, not on the one thread every synchronous view
    waits for under ASGI, its database connection given back afterwards."""
    return sync_to_async(_read_and_release, thread_sensitive=False)(read, *args, **kwargs)


class Slot:
    """An open stream's place in the watch: whose key it was opened with, and whether that
    key was since found revoked."""

    def __init__(self, credential_id: int) -> None:
        self.credential_id = credential_id
        self.revoked = False


@dataclass
class _Gap:
    since: float
    #: The highest id seen when the hole was first met: every hole below it existed then.
    top: int


class Watch:
    """The process's open streams, and the one task that reads the database for them."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._reset(None)

    def _reset(self, loop: asyncio.AbstractEventLoop | None) -> None:
        # A slot is held by its stream's generator alone: one whose client left before it
        # started leaves the set when the generator is collected, so it is not counted for ever.
        self.slots: weakref.WeakSet[Slot] = weakref.WeakSet()
        self.head: int | None = None
        self.failure: DatabaseError | None = None
        self._loop = loop
        self._task: asyncio.Task[None] | None = None
        self._changed: asyncio.Event | None = None
        self._scan: asyncio.Future[None] | None = None
        self._scans_started = 0
        self._scans_done = 0
        self._gap: _Gap | None = None
        self._passable = 0
        self._keys_checked_at = -math.inf

    # Opening and closing ------------------------------------------------------------------

    def admit(self, credential_id: int) -> Slot:
        """A place for a new stream opened with this key, or the refusal: the key's cap, then
        the process's. Called on the event loop, where the watch lives."""
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            self._reset(loop)  # a new event loop (a test's): the old one's streams are gone
        own = sum(1 for slot in self.slots if slot.credential_id == credential_id)
        if own >= settings.OANP_STREAMS_PER_KEY:
            raise TooManyStreams(
                f"this API key has {own} streams open here, the most allowed; "
                "close one or share one inbox stream between tasks"
            )
        if len(self.slots) >= settings.OANP_STREAMS_PER_PROCESS:
            raise StreamsFull(
                f"this server process holds {len(self.slots)} event streams, its most; "
                f"retry in {RETRY_AFTER_SECONDS} s (perhaps on another)"
            )
        slot = Slot(credential_id)
        self.slots.add(slot)
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())
        return slot

    def release(self, slot: Slot) -> None:
        self.slots.discard(slot)

    # What streams wait on ---------------------------------------------------------------------

    def changed(self) -> asyncio.Event:
        """Set at the watch's next change (the head moved, a key was found revoked, the
        database failed or came back). Take it before reading, wait on it after, so that a
        change in between is not missed."""
        if self._changed is None:
            self._changed = asyncio.Event()
        return self._changed

    def _announce(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def refresh(self) -> int:
        """The head after a scan that started after this call: what a stream woken for a new
        entry reads up to. Streams that ask at once share one scan."""
        asked = self._scans_started
        while self._scans_done <= asked:
            if self._scan is None or self._scan.done():
                self._scan = asyncio.ensure_future(self._scan_entries())
            await asyncio.shield(self._scan)
        assert self.head is not None
        return self.head

    # The one reader -----------------------------------------------------------------------

    async def tick(self) -> None:
        """One round of the watch: scan the entries, and check the keys when that is due.
        A failed read is kept in :attr:`failure`, which ends every stream (they say why)."""
        now = self.clock()
        try:
            await self.refresh()
            if now - self._keys_checked_at >= settings.OANP_STREAM_RECHECK_SECONDS:
                self._keys_checked_at = now
                await self._check_keys()
        except DatabaseError as error:
            if self.failure is None:
                log.warning("event streams: the database failed: %r", error)
            self.failure = error
            self._announce()

    async def _run(self) -> None:
        while self.slots:
            await self.tick()
            await asyncio.sleep(POLL_SECONDS)

    async def _scan_entries(self) -> None:
        self._scans_started += 1
        number = self._scans_started
        try:
            if self.head is None:
                self.head = await db(selectors.entry_scan_start)
            before = self.head
            for _ in range(PAGES_PER_SCAN):
                scan = await db(selectors.scan_entries, self.head, pass_holes_to=self._passable)
                self.head = scan.scanned_to
                self._note_gap(scan.gap_at, scan.top)
                passing = scan.gap_at is not None and scan.gap_at <= self._passable
                if not (scan.more or passing):
                    break
            if self.failure is not None:
                self.failure = None
                self._announce()
            if self.head != before:
                self._announce()
        finally:
            self._scans_done = number

    def _note_gap(self, gap_at: int | None, top: int) -> None:
        now = self.clock()
        if gap_at is None:
            self._gap = None
        elif self._gap is None or gap_at > self._gap.top:
            self._gap = _Gap(since=now, top=top)
        if self._gap is not None and now - self._gap.since >= GAP_GRACE_SECONDS:
            # Passed on the next scan: every hole up to top has stayed open the whole grace.
            self._passable = max(self._passable, self._gap.top)

    async def _check_keys(self) -> None:
        slots = list(self.slots)
        wanted = {slot.credential_id for slot in slots}
        if not wanted:
            return
        live = await db(selectors.live_credentials, wanted)
        revoked = [slot for slot in slots if slot.credential_id not in live and not slot.revoked]
        for slot in revoked:
            slot.revoked = True
        if revoked:
            self._announce()


#: The watch of this server process.
WATCH = Watch()
