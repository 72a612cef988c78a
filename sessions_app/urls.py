from django.urls import path

from sessions_app import admin_views, agents_views, views

urlpatterns = [
    path("", views.overview, name="overview"),
    path("sessions/", views.session_list, name="sessions"),
    path("sessions/<str:session_id>/", views.session_page, name="session"),
    path("sessions/<str:session_id>/head/", views.session_head, name="session-head"),
    path("agents/", agents_views.agent_list, name="agents"),
    path("agents/new/", agents_views.agent_new, name="agent-new"),
    path("agents/<str:agent_id>/", agents_views.agent_page, name="agent"),
    path("agents/<str:agent_id>/edit/", agents_views.agent_edit, name="agent-edit"),
    path("agents/<str:agent_id>/keys/", agents_views.key_issue, name="agent-key-issue"),
    path(
        "agents/<str:agent_id>/keys/<int:key_id>/revoke/",
        agents_views.key_revoke,
        name="agent-key-revoke",
    ),
    path("sessions/<str:session_id>/terminate/", admin_views.terminate, name="terminate"),
    path("sessions/<str:session_id>/redeliver/", admin_views.redeliver, name="redeliver"),
    path("agents/<str:agent_id>/acp/", agents_views.acp_configure, name="agent-acp"),
    path("agents/<str:agent_id>/acp/test/", agents_views.acp_test, name="agent-acp-test"),
    path("keys/", admin_views.keys_page, name="keys"),
    path("keys/rotate/", admin_views.rotate_key, name="rotate-key"),
    path("exports/", admin_views.exports_page, name="exports"),
    path("exports/<int:export_id>/status/", admin_views.export_status, name="export-status"),
    path(
        "exports/<int:export_id>/<str:part>/", admin_views.export_download, name="export-download"
    ),
    path("audit/", admin_views.audit_page, name="audit"),
]
