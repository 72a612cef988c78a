from django.contrib import admin
from django.urls import include, path

from arbiter_app.api import JwksView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("oanp/v0.1/", include("arbiter_app.urls")),
    path(".well-known/jwks.json", JwksView.as_view(), name="jwks"),
]
