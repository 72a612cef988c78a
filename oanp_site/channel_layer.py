"""The channel layer on Redis, with the wake-ups' sends batched.

After each commit the arbiter wakes four groups (the session's, each party's and the list of
all sessions: :mod:`arbiter_app.events`), and the wake-up loop sends what several commits
queued at once. ``channels_redis`` sends to a group in two round trips even when the group is
empty (drop its expired members, read the rest), which under load is every group but those of
the few sessions someone watches: eight round trips an envelope, each paid in the web
process's CPU. :meth:`RedisLayer.group_send_each` asks how many members every group has in
one pipeline per Redis host, and sends only to the groups that have some, as
``group_send`` does.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from channels_redis.core import RedisChannelLayer

Send = tuple[str, dict[str, Any]]


class RedisLayer(RedisChannelLayer):
    """``channels_redis``'s layer, and :meth:`group_send_each`."""

    async def group_send_each(self, sends: Sequence[Send]) -> None:
        """``group_send`` of each message to its group; the groups without members cost one
        round trip per host for them all."""
        by_host: defaultdict[int, list[Send]] = defaultdict(list)
        for send in sends:
            by_host[self.consistent_hash(send[0])].append(send)
        expired = int(time.time()) - self.group_expiry
        listened: list[Send] = []
        for host, batch in by_host.items():
            pipe = self.connection(host).pipeline(transaction=False)
            for group, _ in batch:
                key = self._group_key(group)
                pipe.zremrangebyscore(key, min=0, max=expired)
                pipe.zcard(key)
            members = (await pipe.execute())[1::2]
            listened += [send for send, count in zip(batch, members, strict=True) if count]
        await asyncio.gather(*(self.group_send(group, message) for group, message in listened))
