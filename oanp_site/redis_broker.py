"""Celery's Redis transport, made to outlive a Redis that goes away while the worker holds tasks.

When Redis drops, Celery's consumer collects its broker connection and then closes it again. The
close asks the channel to give back the tasks the worker holds unacknowledged; the channel's pool
was dropped with the connection, and building a new one reads the connection's address from the
transport, which the collect has already detached. kombu 5.7 then raises ``AttributeError:
'NoneType' object has no attribute 'hostname'`` and Celery 5.7 stops the worker for good. Here the
give-back is skipped once the transport is detached: nothing could reach Redis through it anyway,
and whatever else asks a detached channel for a connection gets a connection error, which
Celery answers by reconnecting.
The tasks stay in Redis's unacknowledged set, which the next connection hands out again after the
visibility timeout; a Redis that restarted empty has lost them, and the sweeps and the re-arming
of timers (``arbiter_app.timers``) find that work in the database.

Selected with ``CELERY_BROKER_TRANSPORT = "oanp_site.redis_broker:Transport"`` beside a
``redis://`` URL (oanp_site.settings).
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import redis
from redis.exceptions import ConnectionError as RedisConnectionError

log = logging.getLogger("oanp.broker")


def _detached(channel: redis.Channel) -> bool:
    """Whether the channel was closed, or its transport detached, after the connection was
    lost: no new connection to Redis can be made through it."""
    return channel.connection is None or channel.connection.client is None


class QoS(redis.QoS):
    def restore_unacked(self, client: Any = None) -> Any:
        if client is None and _detached(self.channel):
            log.warning(
                "left %d unacknowledged task(s) in Redis for redelivery: the connection to the "
                "broker was lost",
                len(self._delivered),
            )
            self._delivered.clear()
            return None
        return super().restore_unacked(client)


class Channel(redis.Channel):
    QoS = QoS

    def _connparams(self, asynchronous: bool = False) -> Any:
        # Anything else that asks a detached channel for a new connection (an acknowledgement
        # finishing on a worker thread, a consumer cancelled after the read) gets the error a
        # lost broker gives, which Celery answers by reconnecting, not by stopping the worker.
        if _detached(self):
            raise RedisConnectionError("the connection to the broker was lost")
        return super()._connparams(asynchronous=asynchronous)


class Transport(redis.Transport):
    Channel = Channel
