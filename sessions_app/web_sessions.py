"""A person's signed-in dashboard sessions: each page they open moves the session's end on
(``OANP_SESSION_IDLE_SECONDS`` later), and "sign out everywhere" ends them all at once.

Django keeps a session's user inside its signed data, not in a column, so finding one person's
sessions reads every live one. The idle timeout (``OANP_SESSION_IDLE_SECONDS``) keeps that
number to the people active in the last half hour or so, and only a person's own request pays
for it; expired rows are skipped, not read.
"""

from __future__ import annotations

from collections.abc import Callable

from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.sessions.models import Session
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

#: Not pages of a person's: the agents' API, the discovery documents, the probes, the files.
NOT_PAGES = ("/oanp/", "/.well-known/", "/static/", "/healthz", "/readyz", "/metrics")


class IdleTimeoutMiddleware:
    """Saves a signed-in person's session with each page, which sets its end (in the database
    and the cookie) ``SESSION_COOKIE_AGE`` from now: the session ends after that long idle.

    Not Django's SESSION_SAVE_EVERY_REQUEST, which would also write the session of any request
    bearing a cookie, the probes' included, and make one up for a cookie that names none.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.path.startswith(NOT_PAGES) and request.user.is_authenticated:
            request.session.modified = True
        return self.get_response(request)


def end_all(user: AbstractBaseUser) -> int:
    """Deletes every live session signed in as ``user``; how many there were."""
    mine = [
        session.session_key
        for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator()
        if session.get_decoded().get(SESSION_KEY) == str(user.pk)
    ]
    deleted, _ = Session.objects.filter(session_key__in=mine).delete()
    return deleted
