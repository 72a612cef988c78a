"""Live updates for the dashboard over WebSockets. Thin: check the scope, join the session's
group, pass the arbiter's wake-ups on. Pages fetch what changed over HTTP, scoped as usual.
A socket closes (4403) as soon as its viewer's access ends (:mod:`sessions_app.access`)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings
from django.http import Http404

from arbiter_app import events
from sessions_app import access, selectors
from sessions_app.tenancy import scope_of

log = logging.getLogger(__name__)

#: Close code of a socket whose viewer may no longer watch it.
ACCESS_ENDED = 4403


@database_sync_to_async
def visible(user: Any, session_id: str) -> bool:
    """Whether ``user`` may see ``session_id`` (the same rule as the pages)."""
    scope = scope_of(user)
    if scope is None:
        return False
    try:
        selectors.session(scope, session_id)
    except Http404:
        return False
    return True


class WatchedConsumer(AsyncJsonWebsocketConsumer):
    """A socket that re-checks its viewer's access on each announcement and periodically."""

    #: The session the socket shows, or ``None`` for the sessions list.
    session_id: str | None = None

    async def watch(self, user: Any) -> None:
        self.user_id = user.pk
        self.access_group = access.access_group(user.pk)
        try:
            await self.channel_layer.group_add(self.access_group, self.channel_name)
        except Exception as error:  # the periodic re-check still runs
            log.warning("access announcements unavailable: %r", error)
        self.rechecks = asyncio.create_task(self._recheck_periodically())

    async def _recheck_periodically(self) -> None:
        while True:
            await asyncio.sleep(settings.OANP_STREAM_RECHECK_SECONDS)
            await self._recheck()

    async def _recheck(self) -> None:
        session = self.scope.get("session")
        try:
            allowed = await database_sync_to_async(access.still_allowed)(
                user_id=self.user_id,
                session_key=getattr(session, "session_key", None),
                session_id=self.session_id,
            )
        except Exception as error:  # the database is away: the next re-check decides
            log.warning("could not re-check a dashboard socket's access: %r", error)
            return
        if not allowed:
            await self.close(code=ACCESS_ENDED)

    async def oanp_access(self, message: dict[str, Any]) -> None:
        await self._recheck()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "rechecks"):
            self.rechecks.cancel()
            try:
                await self.channel_layer.group_discard(self.access_group, self.channel_name)
            except Exception:  # a layer that is away forgets the group by itself
                log.debug("could not leave %s", self.access_group)


class SessionConsumer(WatchedConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        session_id = self.scope["url_route"]["kwargs"]["session_id"]
        if user is None or not user.is_authenticated or not await visible(user, session_id):
            # The same refusal for an unknown session and another tenant's: nothing leaks.
            await self.close(code=4404)
            return
        self.session_id = session_id
        self.group = events.session_group(session_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()
        await self.watch(user)

    async def disconnect(self, code: int) -> None:
        await super().disconnect(code)
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def oanp_entries(self, message: dict[str, Any]) -> None:
        await self.send_json({"session_id": message["session_id"], "head_seq": message["head_seq"]})


class SessionListConsumer(WatchedConsumer):
    """Tells a sessions list that one of the sessions it may show changed."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.user = user
        await self.channel_layer.group_add(events.ALL_SESSIONS_GROUP, self.channel_name)
        await self.accept()
        await self.watch(user)

    async def disconnect(self, code: int) -> None:
        await super().disconnect(code)
        if hasattr(self, "user"):
            await self.channel_layer.group_discard(events.ALL_SESSIONS_GROUP, self.channel_name)

    async def oanp_entries(self, message: dict[str, Any]) -> None:
        # Scope checked per message: a merchant never hears of another merchant's session.
        if await visible(self.user, message["session_id"]):
            await self.send_json({"session_id": message["session_id"]})
