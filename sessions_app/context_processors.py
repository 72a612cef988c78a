"""What every dashboard template may show, whichever view rendered it."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from sessions_app import background
from sessions_app.tenancy import scope_of


def worker_outage(request: HttpRequest) -> dict[str, Any]:
    """``worker_outage``: a :class:`background.Outage`, or falsy while a worker is alive.

    Lazy, so only a template that reads it pays its one query: the base template for signed-in
    people, a queued export's status; not the login page nor the fragments htmx polls.
    """
    return {"worker_outage": SimpleLazyObject(background.worker_outage)}


def scope(request: HttpRequest) -> dict[str, Any]:
    """``scope``: the viewer's :class:`~sessions_app.tenancy.Scope`, for pages whose view does
    not pass one (Django's 403 and 404 pages), so their navigation is the same as everywhere
    else. A view's own ``scope`` wins; lazy, so a page that never reads it pays no query."""
    return {"scope": SimpleLazyObject(lambda: scope_of(request.user))}
