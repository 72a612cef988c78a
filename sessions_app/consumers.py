"""Live updates for the dashboard over WebSockets. Thin: check the scope, join the session's
group, pass the arbiter's wake-ups on. Pages fetch what changed over HTTP, scoped as usual."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.http import Http404

from arbiter_app import events
from sessions_app import selectors


@database_sync_to_async
def visible(user: Any, session_id: str) -> bool:
    """Whether ``user`` may see ``session_id`` (the same rule as the pages)."""
    scope = selectors.scope_of(user)
    if scope is None:
        return False
    try:
        selectors.session(scope, session_id)
    except Http404:
        return False
    return True


class SessionConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        session_id = self.scope["url_route"]["kwargs"]["session_id"]
        if user is None or not user.is_authenticated or not await visible(user, session_id):
            # The same refusal for an unknown session and another tenant's: nothing leaks.
            await self.close(code=4404)
            return
        self.group = events.session_group(session_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def oanp_entries(self, message: dict[str, Any]) -> None:
        await self.send_json({"session_id": message["session_id"], "head_seq": message["head_seq"]})


class SessionListConsumer(AsyncJsonWebsocketConsumer):
    """Tells a sessions list that one of the sessions it may show changed."""

    async def connect(self) -> None:
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            await self.close(code=4401)
            return
        self.user = user
        await self.channel_layer.group_add(events.ALL_SESSIONS_GROUP, self.channel_name)
        await self.accept()

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "user"):
            await self.channel_layer.group_discard(events.ALL_SESSIONS_GROUP, self.channel_name)

    async def oanp_entries(self, message: dict[str, Any]) -> None:
        # Scope checked per message: a merchant never hears of another merchant's session.
        if await visible(self.user, message["session_id"]):
            await self.send_json({"session_id": message["session_id"]})
