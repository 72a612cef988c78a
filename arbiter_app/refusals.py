"""The arbiter's refusals beyond the protocol's own: each problem code declared once.

The protocol's refusals (malformed envelopes, moves out of turn, reveals that do not open their
commitment) are in :mod:`oanp.wire.errors`; these are the server's: who may call, how often, where
it sends, what its endpoints read. Each class gives its code, HTTP status, title and one-line
meaning; :data:`REFUSALS` lists them, and the OpenAPI document and docs/protocol.md §14.4 are
checked against the two catalogues together. :mod:`arbiter_app.problems` turns any of them into
problem+json.
"""

from __future__ import annotations

import math
from typing import ClassVar

from oanp.wire.errors import ProtocolError, catalogue

#: The one challenge of a 401, wherever it is answered (DRF, the event streams, the transport).
WWW_AUTHENTICATE = 'Bearer realm="oanp"'
#: How long a client should wait before it retries a 503; the database pool's own wait is a few
#: seconds.
RETRY_AFTER_SECONDS = 5


# 400 -----------------------------------------------------------------------------------------


class InvalidCharacters(ProtocolError):
    code = "invalid_characters"
    title = "Invalid characters"
    meaning = (
        "NUL, a lone surrogate or a control character in the path, query, a header, a cookie "
        "or a URL in the body"
    )


class BadCursor(ProtocolError):
    code = "bad_cursor"
    title = "Last-Event-ID is not a cursor of this stream"
    meaning = (
        "a Last-Event-ID that is not a cursor of the stream, or a directory's after that is "
        "not an agent id"
    )


# 401 / 403 -----------------------------------------------------------------------------------


class Unauthorized(ProtocolError):
    code = "unauthorized"
    status = 401
    title = "Unauthorized"
    meaning = "no Authorization: Bearer header, or not a live API key"
    headers: ClassVar[dict[str, str]] = {"WWW-Authenticate": WWW_AUTHENTICATE}

    @classmethod
    def of(cls, *, has_key: bool) -> Unauthorized:
        """The one refusal of a request without a live key, worded by whether it sent one."""
        if has_key:
            return cls("the API key is unknown, revoked or expired")
        return cls("send Authorization: Bearer <api key>")


class SenderMismatch(ProtocolError):
    code = "sender_mismatch"
    status = 403
    title = "The API key does not speak for this sender"
    meaning = "the key's agent and role are not the envelope's sender"


class MetricsForbidden(ProtocolError):
    code = "metrics_forbidden"
    status = 403
    title = "Metrics forbidden"
    meaning = "/metrics without the metrics token, from a network not allowed to scrape"


# 404 / 405 -----------------------------------------------------------------------------


class NotFound(ProtocolError):
    code = "not_found"
    status = 404
    title = "Not found"
    meaning = "no such endpoint"


class NoCallback(ProtocolError):
    code = "no_callback"
    status = 404
    title = "No callback is registered"
    meaning = "the calling agent has registered no callback"


class UnknownAgentKey(ProtocolError):
    code = "unknown_agent_key"
    status = 404
    title = "No such key"
    meaning = "a kid the calling agent never registered"


class TileNotFound(ProtocolError):
    code = "tile_not_found"
    status = 404
    title = "No such tile"
    meaning = "a log path that names no tile, or a tile the tree does not hold yet"


class NotIntegrated(ProtocolError):
    code = "not_integrated"
    status = 404
    title = "Not in the log yet"
    meaning = "an entry no checkpoint covers yet (integration takes about a second), or no entry"


class MethodNotAllowed(ProtocolError):
    code = "method_not_allowed"
    status = 405
    title = "Method not allowed"
    meaning = "a method the endpoint does not answer; Allow names those it does"

    def __init__(self, method: str, allowed: tuple[str, ...]) -> None:
        super().__init__(f"{method} is not allowed here; use {' or '.join(allowed)}")
        self.headers = {"Allow": ", ".join(allowed)}


# 422 -----------------------------------------------------------------------------------------


class UnknownMerchant(ProtocolError):
    code = "unknown_merchant"
    status = 422
    title = "No merchant agent with this id is registered"
    meaning = "an open naming a merchant agent no key was ever issued to"


class SelfDealing(ProtocolError):
    code = "self_dealing"
    status = 422
    title = "The buyer and the merchant are one party"
    meaning = "an open whose buyer is the merchant agent, or whose two agents have one owner"


class CurrencyNotOffered(ProtocolError):
    code = "currency_not_offered"
    status = 422
    title = "The merchant agent does not negotiate in this currency"
    meaning = "an open in a currency the merchant agent's listing does not offer"


class MerchantPaused(ProtocolError):
    code = "merchant_paused"
    status = 422
    title = "The merchant agent is paused"
    meaning = (
        "an open naming a merchant agent its owner paused: it takes no new sessions until it "
        "is resumed; sessions already running go on"
    )


class MerchantArchived(ProtocolError):
    code = "merchant_archived"
    status = 422
    title = "The merchant agent is archived"
    meaning = "an open naming a merchant agent its owner archived: it takes no new sessions"


class TargetNotAllowed(ProtocolError, ValueError):
    """The URL is not one the arbiter will send to."""

    code = "target_not_allowed"
    status = 422
    title = "The arbiter does not send to this address"
    meaning = "a callback URL that is not http(s), or not a public address"


class HostNotFound(TargetNotAllowed):
    """The URL's host has no address: mistyped, or not (yet) in the DNS. Its detail is a
    sentence a merchant can act on, not the resolver's errno."""


# 429 -----------------------------------------------------------------------------------------


class RateLimited(ProtocolError):
    code = "rate_limited"
    status = 429
    title = "Rate limited"
    meaning = (
        "the key's requests this minute, or the address's failed authentications, are used up; "
        "see Retry-After"
    )

    def __init__(self, detail: str, *, retry_after: float) -> None:
        super().__init__(detail)
        self.retry_after = retry_after

    @property
    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(max(1, math.ceil(self.retry_after)))}


class TooManyStreams(ProtocolError):
    code = "too_many_streams"
    status = 429
    title = "Too many streams are open with this API key"
    meaning = "the key holds as many open event streams on this server process as it may"


# 500 / 503 -----------------------------------------------------------------------------------


class InternalError(ProtocolError):
    code = "internal_error"
    status = 500
    title = "Internal error"
    meaning = "the arbiter failed; retry"


class Unavailable(ProtocolError):
    code = "unavailable"
    status = 503
    title = "Unavailable"
    meaning = "the arbiter's database is unavailable; nothing was changed; retry after Retry-After"
    headers: ClassVar[dict[str, str]] = {"Retry-After": str(RETRY_AFTER_SECONDS)}


class StreamsFull(ProtocolError):
    code = "streams_full"
    status = 503
    title = "This server holds as many event streams as it may"
    meaning = "this server process holds as many event streams as it may; retry after Retry-After"
    headers: ClassVar[dict[str, str]] = {"Retry-After": str(RETRY_AFTER_SECONDS)}


REFUSALS = catalogue(__name__)
