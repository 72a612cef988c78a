"""The channel layer on Redis, with the wake-ups' sends batched.

After each commit the arbiter wakes four groups (the session's, each party's and the list of
all sessions: :mod:`arbiter_app.events`), and the wake-up loop sends what several commits
queued at once. ``channels_redis`` sends to a group in two round trips even when the group is
empty (drop its expired members, read the rest), which under load is every group but those of
the few sessions someone watches: eight round trips an envelope, each paid in the web
process's CPU. :meth:`RedisLayer.group_send_each` asks how many members every group has in
one pipeline per Redis host, and sends only to the groups that have some, as
``group_send`` does.

It also keeps a receive that is cancelled from leaving the process deaf: see
:class:`ReceiveBuffers`.
"""

from __future__ import annotations

import asyncio
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from channels_redis.core import RedisChannelLayer

Send = tuple[str, dict[str, Any]]


class ReceiveBuffers(defaultdict[str, Any]):
    """``channels_redis``'s queues of the messages already read for this process's channels,
    one a channel; removing a channel's queue that is already gone does nothing.

    A receive that is cancelled while it waits removes its channel's queue, and only then gives
    up its place in line for the layer's receive lock (or the lock itself, if it has just got
    it). Where two receives on one channel overlap, the first to end removes the queue, and the
    other's removal raises ``KeyError`` before it gives anything up: the lock then goes to a
    waiter nobody cancelled and is never released, so no receive of the process reads Redis
    again. Every stream and socket of the process stops hearing its wake-ups, the process's
    list in Redis fills up, and senders meet ``ChannelFull``.

    Two receives on one channel overlap when a stream's cancelled receive carries on: on
    Python 3.11, ``asyncio.wait_for``, which redis-py writes each command through when a
    socket timeout is set, returns instead of raising when the cancellation comes just as the
    write finished (3.12 rewrote it). The stream's next wait then starts a receive on the same
    channel beside it.
    """

    def __delitem__(self, channel: str) -> None:
        self.pop(channel, None)


class RedisLayer(RedisChannelLayer):
    """``channels_redis``'s layer, :meth:`group_send_each`, and receive buffers that survive
    two receives on one channel (:class:`ReceiveBuffers`)."""

    receive_buffer: defaultdict[str, Any]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The same queues, bounded by the layer's capacity, as channels_redis makes.
        self.receive_buffer = ReceiveBuffers(self.receive_buffer.default_factory)

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
