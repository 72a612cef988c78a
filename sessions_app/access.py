"""Whether a dashboard connection may go on: the rule a live page re-checks, and the
announcements that make it re-check at once.

A page's WebSocket is authorized when it connects, and lives for hours. Access can end meanwhile:
the member signs out, is deactivated, changes password, loses the membership. Each of those
announces itself to the user's group on commit, and every socket also re-checks on its own
every ``OANP_STREAM_RECHECK_SECONDS``, so a lost announcement only delays the close.
"""

from __future__ import annotations

import hashlib
from functools import partial
from importlib import import_module
from types import SimpleNamespace
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user, get_user_model
from django.contrib.auth.signals import user_logged_out
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.http import Http404

from arbiter_app.events import send_to_groups
from sessions_app import second_factor, selectors
from sessions_app.models import Membership
from sessions_app.tenancy import scope_of

ACCESS_TYPE = "oanp.access"


def access_group(user_id: object) -> str:
    return f"oanp.user.{hashlib.sha256(str(user_id).encode()).hexdigest()[:40]}"


def still_allowed(*, user_id: object, session_key: str | None, session_id: str | None) -> bool:
    """Whether the user signed in under ``session_key`` still may watch ``session_id`` (or the
    sessions list, when ``None``): the sign-in stands (not signed out, password unchanged, no
    second factor owed), the account is active, it has a membership, and the session is within
    its scope."""
    if not session_key:
        return False
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key)
    user = get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]
    if not user.is_authenticated or user.pk != user_id:
        return False
    # A page would sign out or send to enrolment whoever still owes a second factor.
    if second_factor.owed(user, verified=second_factor.session_verified(user, store)) is not None:
        return False
    scope = scope_of(user)
    if scope is None:
        return False
    if session_id is not None:
        try:
            selectors.session(scope, session_id)
        except Http404:
            return False
    return True


def _announce(user_id: object) -> None:
    transaction.on_commit(
        partial(
            send_to_groups,
            {access_group(user_id)},
            {"type": ACCESS_TYPE},
            about=f"the dashboard sockets of user {user_id}",
        )
    )


def _user_changed(sender: Any, instance: Any, **kwargs: Any) -> None:
    # Every sign-in saves last_login, which changes nobody's access.
    if kwargs.get("update_fields") == frozenset({"last_login"}):
        return
    _announce(instance.pk)


def _membership_changed(sender: Any, instance: Membership, **kwargs: Any) -> None:
    _announce(instance.user_id)


def _signed_out(sender: Any, user: Any, **kwargs: Any) -> None:
    if user is not None:
        _announce(user.pk)


def connect_signals() -> None:
    user_model = get_user_model()
    for name, signal in (("saved", post_save), ("deleted", post_delete)):
        signal.connect(_user_changed, sender=user_model, dispatch_uid=f"access-user-{name}")
        signal.connect(_membership_changed, sender=Membership, dispatch_uid=f"access-member-{name}")
    user_logged_out.connect(_signed_out, dispatch_uid="access-signed-out")
