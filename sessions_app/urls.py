from django.contrib.auth import views as auth_views
from django.urls import path

from sessions_app.views import accounts, admin, agents, deliveries, overview, replay, sessions

urlpatterns = [
    path("login/", accounts.SignIn.as_view(), name="login"),
    path("password-reset/", accounts.PasswordReset.as_view(), name="password_reset"),
    path(
        "password-reset/sent/",
        auth_views.PasswordResetDoneView.as_view(),
        name="password_reset_done",
    ),
    path(
        "reset/<uidb64>/<token>/",
        accounts.PasswordResetConfirm.as_view(),
        name="password_reset_confirm",
    ),
    path(
        "reset/done/",
        auth_views.PasswordResetCompleteView.as_view(),
        name="password_reset_complete",
    ),
    path("account/", accounts.account_page, name="account"),
    path("account/sign-out-everywhere/", accounts.sign_out_everywhere, name="sign-out-everywhere"),
    path("", overview.overview, name="overview"),
    path("sessions/", sessions.session_list, name="sessions"),
    path("sessions/<str:session_id>/", sessions.session_page, name="session"),
    path("sessions/<str:session_id>/head/", sessions.session_head, name="session-head"),
    path("sessions/<str:session_id>/replay/", replay.session_replay, name="session-replay"),
    path("deliveries/", deliveries.delivery_list, name="deliveries"),
    path("deliveries/redeliver/", deliveries.bulk_redeliver, name="deliveries-redeliver"),
    path("deliveries/<str:kind>/<int:pk>/", deliveries.delivery_page, name="delivery"),
    path("agents/", agents.agent_list, name="agents"),
    path("agents/new/", agents.agent_new, name="agent-new"),
    path("agents/<str:agent_id>/", agents.agent_page, name="agent"),
    path("agents/<str:agent_id>/edit/", agents.agent_edit, name="agent-edit"),
    path("agents/<str:agent_id>/preview/", agents.agent_preview, name="agent-preview"),
    path("agents/<str:agent_id>/keys/", agents.api_key_issue, name="agent-key-issue"),
    path(
        "agents/<str:agent_id>/keys/<int:key_id>/revoke/",
        agents.api_key_revoke,
        name="agent-key-revoke",
    ),
    path("sessions/<str:session_id>/terminate/", sessions.terminate, name="terminate"),
    path("sessions/<str:session_id>/redeliver/", sessions.redeliver, name="redeliver"),
    path("agents/<str:agent_id>/acp/", agents.acp_configure, name="agent-acp"),
    path("agents/<str:agent_id>/acp/test/", agents.acp_test, name="agent-acp-test"),
    path("agents/<str:agent_id>/listing/", agents.listing_save, name="agent-listing"),
    path("keys/", admin.signing_keys_page, name="signing-keys"),
    path("keys/rotate/", admin.rotate_signing_key, name="rotate-signing-key"),
    path("exports/", admin.exports_page, name="exports"),
    path("exports/<int:export_id>/status/", admin.export_status, name="export-status"),
    path("exports/<int:export_id>/<str:part>/", admin.export_download, name="export-download"),
    path("audit/", admin.audit_page, name="audit"),
]
