"""A person's signed-in dashboard sessions, ended all at once ("sign out everywhere").

Django keeps a session's user inside its signed data, not in a column, so finding one person's
sessions reads every live one. The idle timeout (``OANP_SESSION_IDLE_SECONDS``) keeps that
number to the people active in the last half hour or so, and only a person's own request pays
for it; expired rows are skipped, not read.
"""

from __future__ import annotations

from django.contrib.auth import SESSION_KEY
from django.contrib.auth.models import AbstractBaseUser
from django.contrib.sessions.models import Session
from django.utils import timezone


def end_all(user: AbstractBaseUser) -> int:
    """Deletes every live session signed in as ``user``; how many there were."""
    mine = [
        session.session_key
        for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator()
        if session.get_decoded().get(SESSION_KEY) == str(user.pk)
    ]
    deleted, _ = Session.objects.filter(session_key__in=mine).delete()
    return deleted
