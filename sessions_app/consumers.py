"""Live updates for the dashboard over WebSockets. Thin: check the scope, join the session's
group, pass the arbiter's wake-ups on. Pages fetch what changed over HTTP, scoped as usual."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.http import Http404

from arbiter_app import events
from sessions_app import selectors


class SessionConsumer(AsyncJsonWebsocketConsumer):
    async def connect(self) -> None:
        user = self.scope.get("user")
        session_id = self.scope["url_route"]["kwargs"]["session_id"]
        if user is None or not user.is_authenticated or not await self._visible(user, session_id):
            # The same refusal for an unknown session and another tenant's: nothing leaks.
            await self.close(code=4404)
            return
        self.group = events.session_group(session_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept()

    @database_sync_to_async
    def _visible(self, user: Any, session_id: str) -> bool:
        scope = selectors.scope_of(user)
        if scope is None:
            return False
        try:
            selectors.session(scope, session_id)
        except Http404:
            return False
        return True

    async def disconnect(self, code: int) -> None:
        if hasattr(self, "group"):
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def oanp_entries(self, message: dict[str, Any]) -> None:
        await self.send_json({"session_id": message["session_id"], "head_seq": message["head_seq"]})
