"""The Redis channel layer: its sockets outwait its blocking receive, its wake-ups skip the
groups without members, and a cancelled receive leaves the process's others receiving."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from channels.layers import channel_layers
from channels_redis.core import RedisChannelLayer
from channels_redis.utils import create_pool

from oanp_site.channel_layer import RedisLayer


def test_a_receive_never_times_out_at_its_own_socket() -> None:
    # channels_redis blocks a receive in BZPOPMIN for brpop_timeout; a socket that gives up
    # first raises in the consumer waiting on it (redis-py's default is 5 s, as the block).
    layer = channel_layers.make_backend("default")
    assert isinstance(layer, RedisChannelLayer)
    pool = create_pool(layer.hosts[0])
    assert pool.connection_kwargs["socket_timeout"] > layer.brpop_timeout


def test_wake_ups_to_groups_without_members_cost_one_round_trip(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A commit wakes four groups; under load most have no member. The layer asks all of them
    at once, and sends only to a group that has one, which receives the message."""
    from redis.asyncio.client import Pipeline, Redis

    layer = channel_layers.make_backend("default")
    assert isinstance(layer, RedisLayer)
    trips: list[str] = []
    command, pipeline = Redis.execute_command, Pipeline.execute

    async def counted_command(self: Any, *args: Any, **options: Any) -> Any:
        trips.append(str(args[0]))
        return await command(self, *args, **options)

    async def counted_pipeline(self: Any, *args: Any, **options: Any) -> Any:
        trips.append("pipeline")
        return await pipeline(self, *args, **options)

    tag = uuid.uuid4().hex[:12]
    groups = [f"oanp.test.{tag}.{n}" for n in range(4)]
    message = {"type": "oanp.entries", "session_id": "s", "head_seq": 3}

    async def wake() -> dict[str, Any]:
        channel = await layer.new_channel()
        await layer.group_add(groups[2], channel)
        monkeypatch.setattr(Redis, "execute_command", counted_command)
        monkeypatch.setattr(Pipeline, "execute", counted_pipeline)
        await layer.group_send_each([(group, message) for group in groups[:2]])
        empty_only = list(trips)
        await layer.group_send_each([(group, message) for group in groups])
        monkeypatch.undo()
        received: dict[str, Any] = await asyncio.wait_for(layer.receive(channel), 5)
        await layer.group_discard(groups[2], channel)
        return {"empty_only": empty_only, "received": received}

    outcome = asyncio.run(wake())
    assert outcome["empty_only"] == ["pipeline"]
    assert outcome["received"] == message


async def until(condition: Callable[[], object], what: str, timeout: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.01)


def test_a_cancelled_receive_beside_another_on_its_channel_leaves_the_process_receiving() -> None:
    """Two receives on one channel (a stream's cancelled receive that carried on, and the
    stream's next) wait in line for the layer's receive lock, ahead of another stream's, while
    a fourth holds the lock and reads Redis for the process. The two are cancelled: the first
    removes the channel's buffer, and the second must still give up its place in line, or it
    takes the lock once the reader lets go and never releases it, and the other stream, like
    every receive of the process, hears nothing again."""
    layer = channel_layers.make_backend("default")
    assert isinstance(layer, RedisLayer)

    async def scenario() -> dict[str, Any]:
        reading, channel, other = [await layer.new_channel() for _ in range(3)]
        reader = asyncio.ensure_future(layer.receive(reading))
        await until(lambda: layer.receive_lock and layer.receive_lock.locked(), "a reader")
        carried_on = asyncio.ensure_future(layer.receive(channel))
        current = asyncio.ensure_future(layer.receive(channel))
        await until(lambda: layer.receive_count == 3, "both receives in line")
        listening = asyncio.ensure_future(layer.receive(other))
        await until(lambda: layer.receive_count == 4, "the other stream's receive in line")
        ended = []
        for receive in (carried_on, current):
            receive.cancel()
            ended += await asyncio.gather(receive, return_exceptions=True)
        await layer.send(reading, {"type": "oanp.read"})
        read = await asyncio.wait_for(reader, 10)
        await layer.send(other, {"type": "oanp.heard"})
        await asyncio.wait({listening}, timeout=10)
        heard = listening.result() if listening.done() else None
        listening.cancel()
        await asyncio.gather(listening, return_exceptions=True)
        return {"ended": [type(end).__name__ for end in ended], "received": [read, heard]}

    outcome = asyncio.run(scenario())
    assert outcome == {
        "ended": ["CancelledError", "CancelledError"],
        "received": [{"type": "oanp.read"}, {"type": "oanp.heard"}],
    }
