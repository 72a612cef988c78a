from django.urls import path

from sessions_app import views

urlpatterns = [
    path("", views.overview, name="overview"),
    path("sessions/", views.session_list, name="sessions"),
    path("sessions/<str:session_id>/", views.session_page, name="session"),
]
