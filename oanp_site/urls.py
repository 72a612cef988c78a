from django.contrib import admin
from django.urls import include, path

from arbiter_app.api import JwksView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("oanp/v0.1/", include("arbiter_app.urls")),
    path(".well-known/jwks.json", JwksView.as_view(), name="jwks"),
]

handler404 = "arbiter_app.problems.handler404"
handler500 = "arbiter_app.problems.handler500"
