"""The ASGI entry point (Daphne): HTTP, event streams included, and the dashboard's
WebSockets, through Channels' router."""

import os

from channels.auth import AuthMiddlewareStack
from channels.routing import ProtocolTypeRouter, URLRouter
from channels.security.websocket import AllowedHostsOriginValidator
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oanp_site.settings")

# Django first: it sets up the app registry that everything routed below relies on.
django_application = get_asgi_application()

from oanp_site import transport  # noqa: E402
from sessions_app.routing import websocket_urlpatterns  # noqa: E402

# Under Daphne: oversize bodies refused while they are read, bodies left to the application.
transport.install()

application = ProtocolTypeRouter(
    {
        "http": django_application,
        "websocket": AllowedHostsOriginValidator(
            AuthMiddlewareStack(URLRouter(websocket_urlpatterns))
        ),
    }
)
