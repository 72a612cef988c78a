from django.urls import path
from drf_spectacular.views import SpectacularJSONAPIView

from arbiter_app.api import log_endpoints, streams, views

app_name = "oanp"

urlpatterns = [
    path("envelopes", views.EnvelopesView.as_view(), name="envelopes"),
    path("sessions/<str:session_id>", views.SessionView.as_view(), name="session"),
    path("sessions/<str:session_id>/log", views.SessionLogView.as_view(), name="session-log"),
    path("sessions/<str:session_id>/events", streams.session_events, name="session-events"),
    path("sessions/<str:session_id>/reveal", views.RevealView.as_view(), name="reveal"),
    path("sessions/<str:session_id>/proof", log_endpoints.ProofView.as_view(), name="proof"),
    path("log/checkpoint", log_endpoints.CheckpointView.as_view(), name="log-checkpoint"),
    path("log/tile/<path:path>", log_endpoints.TileView.as_view(), name="log-tile"),
    path("inbox", streams.inbox_events, name="inbox"),
    path("callback", views.CallbackView.as_view(), name="callback"),
    path("agent-keys", views.AgentKeysView.as_view(), name="agent-keys"),
    path(
        "agent-keys/<str:kid>/retire", views.AgentKeyRetireView.as_view(), name="agent-key-retire"
    ),
    path("agents/<str:agent_id>/keys", views.AgentKeyListView.as_view(), name="agent-keys-of"),
    path("merchants", views.MerchantsView.as_view(), name="merchants"),
    path("keys", views.KeysView.as_view(), name="keys"),
    path(
        "envelope.schema.json",
        views.SchemaView.as_view(component="Envelope"),
        name="envelope-schema",
    ),
    path(
        "summary.schema.json",
        views.SchemaView.as_view(component="SessionSummary"),
        name="summary-schema",
    ),
    path(
        "openapi.json",
        SpectacularJSONAPIView.as_view(authentication_classes=[], permission_classes=[]),
        name="openapi",
    ),
]
