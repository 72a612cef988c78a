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
from rest_framework.response import Response

from oanp.errors import ProtocolError

log = logging.getLogger(__name__)

PROBLEM_TYPE = "application/problem+json"
#: The media type of every answer that is not a refusal: the API's and the operator's probes'.
JSON = "application/json"
TYPE_BASE = "https://oanp.dev/problems/"

#: DRF's own refusals, with the stable codes clients branch on.
_DRF_CODES: dict[type[exceptions.APIException], str] = {
    exceptions.NotAuthenticated: "unauthorized",
    exceptions.AuthenticationFailed: "unauthorized",
    exceptions.PermissionDenied: "forbidden",
    exceptions.NotFound: "not_found",
    exceptions.MethodNotAllowed: "method_not_allowed",
    exceptions.NotAcceptable: "not_acceptable",
    exceptions.UnsupportedMediaType: "unsupported_media_type",
    exceptions.ParseError: "malformed_json",
    exceptions.ValidationError: "schema_invalid",
}


def problem_body(
    *, status: int, code: str, title: str, detail: str, instance: str, **extra: Any
) -> dict[str, Any]:
    return {
        "type": TYPE_BASE + code,
        "title": title,
        "status": status,
        "code": code,
        "detail": detail,
        "instance": instance,
        **extra,
    }


def protocol_problem(error: ProtocolError, instance: str) -> dict[str, Any]:
    return {"type": TYPE_BASE + error.code, **error.as_problem(), "instance": instance}


def problem_response(body: dict[str, Any], headers: dict[str, str] | None = None) -> HttpResponse:
    """For plain Django views (the event streams), outside DRF's handler."""
    response = HttpResponse(json.dumps(body), status=body["status"], content_type=PROBLEM_TYPE)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's exception handler: every refusal as problem+json with a stable ``code``."""
    request: HttpRequest = context["request"]
    headers: dict[str, str] = {}
    if isinstance(exc, ProtocolError):
        body = protocol_problem(exc, request.path)
        headers.update(getattr(exc, "headers", {}))
    elif isinstance(exc, exceptions.APIException):
        code = next((c for t, c in _DRF_CODES.items() if isinstance(exc, t)), exc.default_code)
        detail = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        body = problem_body(
            status=exc.status_code,
            code=code,
            title=code.replace("_", " ").capitalize(),
            detail=detail,
            instance=request.path,
        )
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            headers["WWW-Authenticate"] = 'Bearer realm="oanp"'
    else:
        return None
    return Response(body, status=body["status"], headers=headers, content_type=PROBLEM_TYPE)


API_PREFIXES = ("/oanp/", "/.well-known/")


def _api_or(default: Any, status: int, code: str, detail: str) -> Any:
    """A handler answering problem+json under the API's paths, Django's page elsewhere."""

    def handler(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
        if not request.path.startswith(API_PREFIXES):
            return default(request) if exception is None else default(request, exception)
        title = code.replace("_", " ").capitalize()
        body = problem_body(
            status=status, code=code, title=title, detail=detail, instance=request.path
        )
        return problem_response(body)

    return handler


handler404 = _api_or(defaults.page_not_found, 404, "not_found", "no such endpoint")
_server_error = _api_or(defaults.server_error, 500, "internal_error", "the arbiter failed; retry")


# A dependency that is away --------------------------------------------------------------------

#: Errors that say the database cannot answer now (refused, gone, the pool's wait ran out, a
#: serialization failure): the request may succeed when retried, so it is a 503, not a 500.
UNAVAILABLE_ERRORS = (OperationalError, InterfaceError)
#: How long a client should wait before it retries; the pool's own wait is a few seconds.
RETRY_AFTER_SECONDS = 5


def unavailable(request: HttpRequest, error: BaseException) -> HttpResponse:
    """503 with ``Retry-After``: problem+json ``unavailable`` under the API's paths, a short
    page elsewhere. Rendered with no request context: its processors would ask the database."""
    log.warning(
        "503 for %s %s: the database is unavailable: %s",
        request.method,
        request.path,
        str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__,
    )
    headers = {"Retry-After": str(RETRY_AFTER_SECONDS)}
    if request.path.startswith(API_PREFIXES):
        body = problem_body(
            status=503,
            code="unavailable",
            title="Unavailable",
            detail="the arbiter's database is unavailable; nothing was changed; retry later",
            instance=request.path,
        )
        response = problem_response(body, headers)
    else:
        response = HttpResponse(render_to_string("503.html"), status=503)
        response["Retry-After"] = headers["Retry-After"]
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
