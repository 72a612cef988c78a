from django.urls import path

from sessions_app import admin_views, views

urlpatterns = [
    path("", views.overview, name="overview"),
    path("sessions/", views.session_list, name="sessions"),
    path("sessions/<str:session_id>/", views.session_page, name="session"),
    path("sessions/<str:session_id>/terminate/", admin_views.terminate, name="terminate"),
    path("keys/", admin_views.keys_page, name="keys"),
    path("keys/rotate/", admin_views.rotate_key, name="rotate-key"),
    path("exports/", admin_views.exports_page, name="exports"),
    path("exports/<int:export_id>/status/", admin_views.export_status, name="export-status"),
    path(
        "exports/<int:export_id>/<str:part>/", admin_views.export_download, name="export-download"
    ),
    path("audit/", admin_views.audit_page, name="audit"),
]
