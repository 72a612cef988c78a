"""The product's URLs plus the service section's peer endpoint (settings :mod:`bench.site`)."""

from django.urls import path

from bench.peer import BARE_PATH, bare
from oanp_site.urls import handler404, handler500
from oanp_site.urls import urlpatterns as site_urlpatterns

urlpatterns = [*site_urlpatterns, path(BARE_PATH, bare, name="bench-bare")]

__all__ = ["handler404", "handler500", "urlpatterns"]
