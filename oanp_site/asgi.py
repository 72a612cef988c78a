"""The ASGI entry point (Daphne): HTTP, event streams included, and the dashboard's
WebSockets, through Channels' router."""

import os

import django
from asgiref.sync import sync_to_async
from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest
from django.http.response import HttpResponseBase

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oanp_site.settings")


class SyncMiddlewareHandler(ASGIHandler):
    """Django's ASGI handler with the middleware chain run synchronously, whole, in the one
    thread that serves the request's sync view.

    Django runs middleware that can go either way (its own, all of it) in async mode under
    ASGI: then each one hops to a thread and back for its request half and again for its
    response half. Loaded in sync mode, the chain costs one hop per request; an async view (an
    event stream) is awaited on the event loop from inside it, as before.
    """

    def load_middleware(self, is_async: bool = False) -> None:
        super().load_middleware(is_async=False)

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
