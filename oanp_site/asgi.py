"""The ASGI entry point (Daphne): HTTP, event streams included, through Channels' router."""

import os

from channels.routing import ProtocolTypeRouter
from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "oanp_site.settings")

# Django first: it sets up the app registry that everything routed below relies on.
django_application = get_asgi_application()

application = ProtocolTypeRouter({"http": django_application})
