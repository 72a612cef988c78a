"""The ASGI entry point (Daphne): HTTP, event streams included, and the dashboard's
WebSockets, through Channels' router."""

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from weakref import WeakKeyDictionary

import django
from asgiref.sync import ThreadSensitiveContext, sync_to_async
from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest
from django.http.response import HttpResponseBase

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oanp_site.settings")


Threads = asyncio.LifoQueue[ThreadPoolExecutor]


class SyncMiddlewareHandler(ASGIHandler):
    """Django's ASGI handler with the middleware chain run synchronously, whole, in the one
    thread that serves the request's sync view.

    Django runs middleware that can go either way (its own, all of it) in async mode under
    ASGI: then each one hops to a thread and back for its request half and again for its
    response half. Loaded in sync mode, the chain costs one hop per request; an async view (an
    event stream) is awaited on the event loop from inside it, as before.

    Each request runs its synchronous code on one thread. Django makes a new thread for every
    request for that, and ends it after: most of a millisecond of CPU per request, more than
    the envelope's own protocol work. A request that cannot stream (any method but GET and
    HEAD: the envelopes, the reveals, the dashboard's forms) borrows one of the process's
    :data:`THREADS` threads instead, waiting for one when all are busy; a GET may be an event
    stream that holds its thread-sensitive context for minutes, so it keeps Django's own.
    """

    #: Threads kept for the requests that cannot stream; as many as a web process pools
    #: connections (oanp_site.connections.WEB_POOL_CAP), since each such request holds one.
    THREADS = 8

    def __init__(self) -> None:
        super().__init__()
        #: The idle threads, per event loop: a server runs one; tests may run several.
        self.idle: WeakKeyDictionary[asyncio.AbstractEventLoop, Threads] = WeakKeyDictionary()

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] in {"GET", "HEAD"}:
            await super().__call__(scope, receive, send)
            return
        idle = self.idle.get(asyncio.get_running_loop())
        if idle is None:
            # Last in, first out: the thread used last is the one still warm, and threads a
            # quiet process never needs are never started.
            idle = self.idle[asyncio.get_running_loop()] = asyncio.LifoQueue()
            for number in range(self.THREADS):
                idle.put_nowait(ThreadPoolExecutor(1, f"oanp-request-{number}"))
        thread = await idle.get()
        try:
            # Django's own context, entered inside, then finds this one and keeps it.
            async with ThreadSensitiveContext(executor=thread):
                await super().__call__(scope, receive, send)
        finally:
            idle.put_nowait(thread)

    async def get_response_async(self, request: HttpRequest) -> HttpResponseBase:
        return await sync_to_async(self.get_response)(request)


# Django first: it sets up the app registry that everything routed below relies on.
django.setup(set_prefix=False)
django_application = SyncMiddlewareHandler()

from arbiter_app.guards import WebsocketGuard  # noqa: E402
from oanp_site import transport  # noqa: E402
from oanp_site.checks import refuse_to_start  # noqa: E402
from oanp_site.forwarded import ForwardedFor  # noqa: E402
from sessions_app.routing import websocket_urlpatterns  # noqa: E402

# Daphne runs no system checks: a server on development secrets stops here.
refuse_to_start()
# Under Daphne: oversize bodies refused while they are read, bodies left to the application.
transport.install()

# The client's address from the proxies' X-Forwarded-For, before anything reads it: the
# per-address limits, the metrics allow-list and the request log (oanp_site.forwarded).
application = ForwardedFor(
    ProtocolTypeRouter(
        {
            "http": django_application,
            # The guard first: no consumer, nor the session lookup of the auth stack, sees a
            # path, query or cookie holding what the database cannot take.
            "websocket": WebsocketGuard(
                AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
            ),
        }
    ),
    hops=settings.OANP_PROXY_HEADERS,
)
