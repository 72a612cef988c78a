from django.urls import path
from drf_spectacular.views import SpectacularJSONAPIView

from arbiter_app import api, streams

app_name = "oanp"

urlpatterns = [
    path("envelopes", api.EnvelopesView.as_view(), name="envelopes"),
    path("sessions/<str:session_id>", api.SessionView.as_view(), name="session"),
    path("sessions/<str:session_id>/log", api.SessionLogView.as_view(), name="session-log"),
    path("sessions/<str:session_id>/events", streams.session_events, name="session-events"),
    path("sessions/<str:session_id>/reveal", api.RevealView.as_view(), name="reveal"),
    path("inbox", streams.inbox_events, name="inbox"),
    path("callback", api.CallbackView.as_view(), name="callback"),
    path("keys", api.KeysView.as_view(), name="keys"),
    path(
        "openapi.json",
        SpectacularJSONAPIView.as_view(authentication_classes=[], permission_classes=[]),
        name="openapi",
    ),
]
