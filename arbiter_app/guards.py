"""The one guard against characters that PostgreSQL or HTTP cannot carry.

PostgreSQL's text refuses NUL, and UTF-8 has no encoding for a lone surrogate: either one,
passed on to a query, fails inside the database driver as a 500 with a logged traceback. A path
holding a control character is no URL of this project, and would forge lines in a text log.
So a request whose path, query string, header values or cookies hold any of them is refused
before anything reads it: 400 problem+json ``invalid_characters`` where machines call (the API,
the JWKS, the probes), a plain 404 page elsewhere, a denied handshake for a WebSocket.
:func:`text_refusal` applies the same rule to a string read from a request's JSON body.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote_to_bytes

from channels.security.websocket import WebsocketDenier
from django.http import Http404, HttpRequest
from django.http.cookie import parse_cookie
from django.http.response import HttpResponseBase
from django.utils.encoding import escape_uri_path
from django.views import defaults

from arbiter_app.problems import API_PREFIXES, refusal_response
from arbiter_app.refusals import InvalidCharacters

#: What no value may hold: NUL (PostgreSQL text) and lone surrogates (no UTF-8 for them).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
#: What a path or a URL may not hold besides: every other C0 control character and DEL.
_CONTROL = re.compile("[\x00-\x1f\x7f\ud800-\udfff]")
#: What a header value may not hold: RFC 9110 allows HTAB, and no other control character.
_HEADER = re.compile("[\x00-\x08\x0a-\x1f\x7f]")

#: Answered to machines (probes, scrapers) rather than people, so in problem+json.
PROBE_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


def text_refusal(value: str, *, url: bool = False) -> str | None:
    """Why ``value``, read from a request, cannot be kept (``None`` when it can); a URL may
    not hold control characters either."""
    found = (_CONTROL if url else _UNSTORABLE).search(value)
    return None if found is None else _named(found.group())


def request_refusal(
    path: str, query: str | bytes, headers: Iterable[tuple[str, str]]
) -> str | None:
    """Why a request with this (decoded) path, raw query string and header values is refused,
    in words that name no character of it verbatim; ``None`` when it is clean."""
    if (reason := text_refusal(path, url=True)) is not None:
        return f"the path holds {reason}"
    # Query strings are decoded as UTF-8 with replacement, so no surrogate comes out of one.
    if b"\x00" in unquote_to_bytes(query):
        return "the query string holds NUL"
    for name, value in headers:
        found = _HEADER.search(value)
        if found is not None:
            return f"the {name} header holds {_named(found.group())}"
        if name.lower() == "cookie":
            # A quoted cookie value may spell NUL as an octal escape ("\000").
            for cookie, text in parse_cookie(value).items():
                if (reason := text_refusal(f"{cookie}={text}")) is not None:
                    return f"a cookie holds {reason}"
    return None


def _named(character: str) -> str:
    return "NUL" if character == "\x00" else f"U+{ord(character):04X}"


def printable(path: str) -> str:
    """``path`` with its control characters escaped, for a log line that must stay one line."""
    return _CONTROL.sub(lambda found: found.group().encode("unicode_escape").decode(), path)


class InvalidCharactersMiddleware:
    """The guard for HTTP: first after the request log, so a refusal is timed, logged and
    counted like any other, and before anything that reads the request."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        reason = request_refusal(
            request.path, request.META.get("QUERY_STRING", ""), request.headers.items()
        )
        if reason is None:
            return self.get_response(request)
        if request.path.startswith(API_PREFIXES) or request.path in PROBE_PATHS:
            return refusal_response(InvalidCharacters(reason), escape_uri_path(request.path))
        return defaults.page_not_found(request, Http404(reason))


class WebsocketGuard:
    """The guard for WebSockets: the handshake of a socket whose path, query or headers hold
    what the guard refuses is denied (403) before any consumer looks at it."""

    def __init__(self, application: Any) -> None:
        self.application = application

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        headers = ((n.decode("latin-1"), v.decode("latin-1")) for n, v in scope["headers"])
        if request_refusal(scope["path"], scope.get("query_string", b""), headers) is not None:
            return await WebsocketDenier.as_asgi()(scope, receive, send)
        return await self.application(scope, receive, send)
