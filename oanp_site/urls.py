from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from arbiter_app import health
from arbiter_app.api.views import DiscoveryView, JwksView

urlpatterns = [
    # Django's admin signs in by password alone; the dashboard's sign-in also asks for the
    # second factor, and the admin site is for the same people.
    path("admin/login/", RedirectView.as_view(url="/login/", query_string=True)),
    path("admin/", admin.site.urls),
    path("oanp/v0.1/", include("arbiter_app.api.urls")),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", health.metrics, name="metrics"),
    path(".well-known/jwks.json", JwksView.as_view(), name="jwks"),
    path(".well-known/oanp.json", DiscoveryView.as_view(), name="discovery"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("sessions_app.urls")),
]

handler404 = "arbiter_app.problems.handler404"
handler500 = "arbiter_app.problems.handler500"
