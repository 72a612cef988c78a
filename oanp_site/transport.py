"""How Daphne reads a request before the application sees it.

Its headers: :class:`ArbiterChannel` answers headers over Twisted's limits (16 KiB in all, or a
line longer than that) with 431 instead of a bare 400 or no answer at all, and cuts a
connection whose request headers are not all in within ``OANP_HEADER_TIMEOUT_SECONDS`` of
their first line, however slowly they trickle in (Twisted's own timeout restarts with every
byte, so a client sending one a second was held forever).

Twisted, under Daphne, reads a whole request body before it hands the request on: a 400 MB
body was read (17 s, +200 MB of memory) only to be answered 401. It also parses
``multipart/form-data`` bodies itself and answers what it cannot parse with a bare 400 that
the application never sees. :class:`ArbiterRequest` refuses a body over its limit as soon as
the headers say so, or as soon as the bytes read pass it, and leaves bodies to the application.

The limit is the API's envelope limit under ``/oanp/`` (docs/protocol.md §14: 413, after 401:
a request without a key gets 401 whatever it carries; the key itself is checked by the
application, which a body this size never reaches, so a bad key with an oversize body gets
413) and ``DATA_UPLOAD_MAX_MEMORY_SIZE`` elsewhere.
"""

from __future__ import annotations

import json
from typing import Any

import daphne.http_protocol
from django.conf import settings
from twisted.internet.interfaces import IDelayedCall
from twisted.web import http

from arbiter_app.problems import PROBLEM_TYPE, headers_of, problem
from arbiter_app.refusals import Unauthorized
from oanp.wire.envelope import MAX_ENVELOPE_BYTES
from oanp.wire.errors import EnvelopeTooLarge

API_PREFIX = b"/oanp/"
#: The status lines this module writes, in RFC 9110's words.
REASONS = {401: "Unauthorized", 413: "Content Too Large"}


def body_limit(path: bytes) -> int:
    if path.startswith(API_PREFIX):
        return MAX_ENVELOPE_BYTES
    return int(settings.DATA_UPLOAD_MAX_MEMORY_SIZE)


def refusal(path: bytes, *, has_key: bool, limit: int) -> bytes:
    """The whole HTTP response refusing an oversize body; the connection closes after it."""
    instance = path.split(b"?", 1)[0].decode("ascii", "replace")
    headers: dict[str, str] = {}
    if not path.startswith(API_PREFIX):
        status, content_type = 413, "text/plain; charset=utf-8"
        content = f"the request body is over {limit} bytes\n".encode()
    else:
        # A request without a key learns that first, as it would from the application.
        error = EnvelopeTooLarge.over(limit) if has_key else Unauthorized.of(has_key=False)
        status, content_type = error.status, PROBLEM_TYPE
        headers = headers_of(error)
        content = json.dumps(problem(error, instance)).encode()
    head = (
        f"HTTP/1.1 {status} {REASONS[status]}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {len(content)}\r\nConnection: close\r\n"
    )
    head += "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return head.encode() + b"\r\n" + content


class ArbiterRequest(daphne.http_protocol.WebRequest):  # type: ignore[misc]
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The application parses its own bodies (and refuses what it cannot parse, as 4xx).
        self._parsePOSTFormSubmission = False
        self._limit = 0
        self._read = 0
        self._refused = False

    def _target(self) -> bytes:
        # The request line is parsed before the headers; ``path`` is set only once the body
        # has been read, so the channel's copy is the one there is now.
        return getattr(self.channel, "_path", b"") or b""

    def gotLength(self, length: int | None) -> None:  # noqa: N802 (Twisted's names)
        self._limit = body_limit(self._target())
        if length is not None and length > self._limit:
            super().gotLength(0)  # an empty body file, for Twisted's clean-up to close
            self._refuse()
            return
        super().gotLength(length)

    def handleContentChunk(self, data: bytes) -> None:  # noqa: N802
        if self._refused:
            return
        self._read += len(data)
        if self._read > self._limit:  # a chunked body, whose length was not declared
            self._refuse()
            return
        super().handleContentChunk(data)

    def requestReceived(self, command: bytes, path: bytes, version: bytes) -> None:  # noqa: N802
        if not self._refused:
            super().requestReceived(command, path, version)

    def _refuse(self) -> None:
        self._refused = True
        response = refusal(
            self._target(),
            has_key=self.requestHeaders.hasHeader(b"Authorization"),
            limit=self._limit,
        )
        self.channel.transport.write(response)
        self.channel.transport.loseConnection()


_TOO_LARGE = b"the request's headers are over 16 KiB\n"
HEADERS_TOO_LARGE = (
    b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(_TOO_LARGE), _TOO_LARGE)
)


class ArbiterChannel(http.HTTPChannel):  # type: ignore[misc]
    """Twisted's HTTP channel with a 431 for oversized headers and a deadline for them."""

    _header_deadline: IDelayedCall | None = None

    def lineReceived(self, line: bytes) -> None:  # noqa: N802 (Twisted's names)
        if self._receivedHeaderSize + len(line) > self.totalHeadersSize:
            self._refuse_headers()
            return
        if self._header_deadline is None and line:
            # The first line of a request: its headers have this long to arrive, in all.
            self._header_deadline = self.callLater(
                settings.OANP_HEADER_TIMEOUT_SECONDS, self._headers_too_slow
            )
        super().lineReceived(line)

    def lineLengthExceeded(self, line: bytes) -> None:  # noqa: N802
        self._refuse_headers()

    def allHeadersReceived(self) -> None:  # noqa: N802
        self._cancel_deadline()
        super().allHeadersReceived()

    def connectionLost(self, reason: Any) -> None:  # noqa: N802
        self._cancel_deadline()
        super().connectionLost(reason)

    def _cancel_deadline(self) -> None:
        deadline, self._header_deadline = self._header_deadline, None
        if deadline is not None and deadline.active():
            deadline.cancel()

    def _refuse_headers(self) -> None:
        self._cancel_deadline()
        self.transport.write(HEADERS_TOO_LARGE)
        self.loseConnection()

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        self.transport.abortConnection()


def _channel(factory: http.HTTPFactory) -> Any:
    # Twisted's own factory function, with this channel in place of its HTTPChannel.
    return http._GenericHTTPChannelProtocol(ArbiterChannel())


def install() -> None:
    """Make Daphne build :class:`ArbiterRequest` for every request, on an
    :class:`ArbiterChannel`, for every connection it accepts from now on (its factory reads
    the module's ``WebRequest`` when it builds each connection's protocol)."""
    daphne.http_protocol.WebRequest = ArbiterRequest
    daphne.http_protocol.HTTPFactory.protocol = _channel
