"""The Redis channel layer's sockets outwait its blocking receive."""

from __future__ import annotations

from channels.layers import channel_layers
from channels_redis.core import RedisChannelLayer
from channels_redis.utils import create_pool


def test_a_receive_never_times_out_at_its_own_socket() -> None:
    # channels_redis blocks a receive in BZPOPMIN for brpop_timeout; a socket that gives up
    # first raises in the consumer waiting on it (redis-py's default is 5 s, as the block).
    layer = channel_layers.make_backend("default")
    assert isinstance(layer, RedisChannelLayer)
    pool = create_pool(layer.hosts[0])
    assert pool.connection_kwargs["socket_timeout"] > layer.brpop_timeout
