"""The Redis channel layer's sockets outwait its blocking receive."""

from __future__ import annotations

import asyncio
import uuid
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
