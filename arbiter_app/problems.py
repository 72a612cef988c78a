"""RFC 9457 problem+json: the one place where refusals become HTTP answers."""

from __future__ import annotations

import json
import math
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views import defaults
from rest_framework import exceptions
from rest_framework.response import Response

from oanp.errors import ProtocolError

PROBLEM_TYPE = "application/problem+json"
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
    exceptions.Throttled: "rate_limited",
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
        if isinstance(exc, exceptions.Throttled) and exc.wait is not None:
            headers["Retry-After"] = str(math.ceil(exc.wait))
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
handler500 = _api_or(defaults.server_error, 500, "internal_error", "the arbiter failed; retry")
