"""The Redis transport of oanp_site.redis_broker: a channel whose connection was lost answers
every request for a new connection with the error a lost broker gives (which Celery meets by
reconnecting), never with the AttributeError that stops a Celery 5.7 worker for good; and it
leaves the tasks it held in Redis rather than failing to give them back."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from kombu import Connection
from redis.exceptions import ConnectionError as RedisConnectionError

from oanp_site import redis_broker


@pytest.fixture
def connection() -> Iterator[Connection]:
    with Connection(os.environ["REDIS_URL"], transport=redis_broker.Transport) as conn:
        yield conn


def test_a_closed_channel_asks_for_no_connection_it_cannot_make(connection: Connection) -> None:
    channel = connection.channel()
    channel.client.ping()  # a working channel first
    channel.close()  # as when the broker was lost: the transport lets go of the channel
    assert channel.connection is None
    with pytest.raises(RedisConnectionError):
        channel._connparams()
    # What the worker does next on such a channel is a connection error too.
    with pytest.raises(RedisConnectionError):
        channel._create_client()


def test_a_detached_transport_leaves_the_held_tasks_in_redis(connection: Connection) -> None:
    channel = connection.channel()
    channel.qos._delivered["tag"] = object()  # a task the worker holds
    connection.transport.client = None  # collected after the connection was lost
    assert channel.qos.restore_unacked() is None
    assert not channel.qos._delivered
