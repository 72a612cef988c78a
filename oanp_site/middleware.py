"""The request log: one line and one latency observation per request; the
Content-Security-Policy of every answer.

Django's own middleware is listed under its own dotted paths (so ``check --deploy`` sees it)
and runs synchronously, in the thread that serves the view: see :mod:`oanp_site.asgi`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence

from django.conf import settings
from django.contrib.auth.base_user import AbstractBaseUser
from django.http import HttpRequest
from django.http.response import HttpResponseBase

from arbiter_app import metrics
from arbiter_app.guards import PROBE_PATHS, printable
from arbiter_app.problems import PROBLEM_TYPE
from arbiter_app.request_fields import log_fields

request_log = logging.getLogger("oanp.request")

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestLogMiddleware:
    """One log line and one latency observation per request, with the agent, the session and,
    for a refusal, its problem code. First in the chain, so it times all the others."""

    async_capable = False
    sync_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        started = time.perf_counter()
        response = self.get_response(request)
        try:
            self._record(request, response, time.perf_counter() - started)
        except Exception:  # the answer stands whatever its log line does
            request_log.exception("could not log %s %s", request.method, printable(request.path))
        return response

    @staticmethod
    def _record(request: HttpRequest, response: HttpResponseBase, seconds: float) -> None:
        match = request.resolver_match
        route = f"/{match.route}" if match is not None else "unmatched"
        # Labels come only from fixed sets: a client must not mint time series of its own.
        method = request.method if request.method in METHODS else "other"
        code = _problem_code(response)
        # A refused path may hold control characters; a line of the log stays one line.
        path = printable(request.path)
        if code:
            metrics.REFUSALS.labels(code=code).inc()
        metrics.REQUEST_SECONDS.labels(
            method=method, route=route, status=response.status_code
        ).observe(seconds)
        fields = {
            "method": request.method,
            "path": path,
            "status": response.status_code,
            "duration_ms": round(seconds * 1000, 1),
            # As the proxies in front said (oanp_site.forwarded), as the limits counted it.
            "client": request.META.get("REMOTE_ADDR", ""),
            "code": code,
            "agent_id": getattr(getattr(request, "auth", None), "agent_id", ""),
            "session_id": (match.kwargs.get("session_id", "") if match is not None else "")
            or log_fields(request).get("session_id", ""),
            "user": _username(request),
        }
        level = logging.INFO
        # Probes answer every few seconds; their lines would drown the rest.
        if request.path in PROBE_PATHS:
            level = logging.DEBUG
        elif response.status_code >= 500:
            level = logging.WARNING
        request_log.log(
            level,
            "%s %s %s",
            request.method,
            path,
            response.status_code,
            extra={"oanp": fields},
        )


def _username(request: HttpRequest) -> str:
    # Only a user the request already loaded: loading one here would cost a probe two queries,
    # and a database that is away would turn its answer into an error. On API requests the
    # "user" is the agent's credential; only people have a username.
    user = request.__dict__.get("_cached_user")
    return user.get_username() if isinstance(user, AbstractBaseUser) else ""


def _problem_code(response: HttpResponseBase) -> str:
    if response.streaming or not response.get("Content-Type", "").startswith(PROBLEM_TYPE):
        return ""
    try:
        body = json.loads(response.content)  # type: ignore[attr-defined]
    except ValueError:
        return ""
    code = body.get("code") if isinstance(body, dict) else None
    return code if isinstance(code, str) else ""


CSP_HEADER = "Content-Security-Policy"


class ContentSecurityPolicyMiddleware:
    """What a browser may load with an answer: a page, ``OANP_CSP_PAGES`` (from this origin
    only, nothing inline); anything else, ``OANP_CSP_OTHER`` (nothing). An answer that brings
    a policy of its own keeps it. (Django 6.0 has this middleware; 5.2 does not.)"""

    async_capable = False
    sync_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response
        self.pages = csp_header(settings.OANP_CSP_PAGES)
        self.other = csp_header(settings.OANP_CSP_OTHER)

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        if CSP_HEADER in response:
            return response
        page = response.get("Content-Type", "").startswith("text/html")
        # With DEBUG on, a 404 or a 500 is Django's technical page, styled and scripted inline.
        if page and settings.DEBUG and (response.status_code == 404 or response.status_code >= 500):
            return response
        response[CSP_HEADER] = self.pages if page else self.other
        return response


def csp_header(directives: Mapping[str, Sequence[str]]) -> str:
    """``{"script-src": ["'self'"], …}`` as the header writes it: ``script-src 'self'; …``."""
    return "; ".join(" ".join([name, *sources]) for name, sources in directives.items())
