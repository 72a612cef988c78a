"""RFC 9457 problem+json: the one place where refusals become HTTP answers."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable
from typing import Any

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.template.loader import render_to_string
from django.views import defaults
from rest_framework import exceptions
from rest_framework.request import Request
from rest_framework.response import Response

from arbiter_app.refusals import (
    InternalError,
    MethodNotAllowed,
    NotFound,
    Unauthorized,
    Unavailable,
)
from oanp.wire.errors import ProtocolError

log = logging.getLogger(__name__)

PROBLEM_TYPE = "application/problem+json"
#: The media type of every answer that is not a refusal: the API's and the operator's probes'.
JSON = "application/json"
TYPE_BASE = "https://oanp.dev/problems/"

#: DRF's own refusals, as the catalogue's. Its others (a parser's or a throttle's) cannot happen:
#: the endpoints read their bodies with the protocol's parser and count their own rate limits.
DRF_REFUSALS: dict[type[exceptions.APIException], type[ProtocolError]] = {
    exceptions.NotAuthenticated: Unauthorized,
    exceptions.AuthenticationFailed: Unauthorized,
    exceptions.NotFound: NotFound,
    exceptions.MethodNotAllowed: MethodNotAllowed,
}


def problem(error: ProtocolError, instance: str) -> dict[str, Any]:
    """The RFC 9457 body of a refusal."""
    return {"type": TYPE_BASE + error.code, **error.as_problem(), "instance": instance}


def headers_of(error: ProtocolError) -> dict[str, str]:
    """The headers a refusal carries: ``WWW-Authenticate``, ``Retry-After``, ``Allow``."""
    return dict(getattr(error, "headers", {}))


def _add_headers(response: HttpResponse, error: ProtocolError) -> None:
    for name, value in headers_of(error).items():
        response[name] = value


def refusal_response(error: ProtocolError, instance: str) -> HttpResponse:
    """A refusal as problem+json, for plain Django views (the event streams, the probes)."""
    response = HttpResponse(
        json.dumps(problem(error, instance)), status=error.status, content_type=PROBLEM_TYPE
    )
    _add_headers(response, error)
    return response


def _from_drf(exc: exceptions.APIException, context: dict[str, Any]) -> ProtocolError:
    request: Request = context["request"]
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        return Unauthorized.of(has_key=bool(request.headers.get("Authorization")))
    if isinstance(exc, exceptions.MethodNotAllowed):
        return MethodNotAllowed(request.method or "", tuple(context["view"].allowed_methods))
    refusal = next((r for t, r in DRF_REFUSALS.items() if isinstance(exc, t)), InternalError)
    return refusal(exc.detail if isinstance(exc.detail, str) else str(exc.detail))


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's exception handler: every refusal as problem+json with a stable ``code``."""
    request: Request = context["request"]
    if isinstance(exc, exceptions.APIException):
        exc = _from_drf(exc, context)
    if not isinstance(exc, ProtocolError):
        return None
    return Response(
        problem(exc, request.path),
        status=exc.status,
        headers=headers_of(exc),
        content_type=PROBLEM_TYPE,
    )


API_PREFIXES = ("/oanp/", "/.well-known/")


def _api_or(default: Any, refusal: ProtocolError) -> Any:
    """A handler answering problem+json under the API's paths, Django's page elsewhere."""

    def handler(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
        if not request.path.startswith(API_PREFIXES):
            return default(request) if exception is None else default(request, exception)
        return refusal_response(refusal, request.path)

    return handler


handler404 = _api_or(defaults.page_not_found, NotFound("no such endpoint"))
_server_error = _api_or(defaults.server_error, InternalError("the arbiter failed; retry"))


# A dependency that is away --------------------------------------------------------------------

#: Errors that say the database cannot answer now (refused, gone, the pool's wait ran out, a
#: serialization failure): the request may succeed when retried, so it is a 503, not a 500.
UNAVAILABLE_ERRORS = (OperationalError, InterfaceError)


def unavailable(request: HttpRequest, error: BaseException) -> HttpResponse:
    """503 with ``Retry-After``: problem+json ``unavailable`` under the API's paths, a short
    page elsewhere. Rendered with no request context: its processors would ask the database."""
    log.warning(
        "503 for %s %s: the database is unavailable: %s",
        request.method,
        request.path,
        str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__,
    )
    refusal = Unavailable("the arbiter's database is unavailable; nothing was changed; retry later")
    if request.path.startswith(API_PREFIXES):
        response = refusal_response(refusal, request.path)
    else:
        response = HttpResponse(render_to_string("503.html"), status=503)
        _add_headers(response, refusal)
    # Logged above, once and without a traceback: Django's request logger need not repeat it.
    response._has_been_logged = True  # type: ignore[attr-defined]
    return response


class UnavailableMiddleware:
    """Turns a database that is away into 503s wherever a view meets it (DRF's views re-raise
    what its handler does not know, so they come here too)."""

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> Any:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> Any:
        if isinstance(exception, UNAVAILABLE_ERRORS):
            return unavailable(request, exception)
        return None


def handler500(request: HttpRequest) -> HttpResponse:
    """The last resort, for errors outside views (a middleware saving the sign-in, say)."""
    error = sys.exc_info()[1]
    if isinstance(error, UNAVAILABLE_ERRORS):
        return unavailable(request, error)
    return _server_error(request)
