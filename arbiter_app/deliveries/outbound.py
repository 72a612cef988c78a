"""Requests the arbiter makes to others: ACP handoffs to merchants, entry callbacks to agents.

Both go the same way: to an address checked against SSRF (the host resolved once, and the
connection made to the very address checked), signed the Standard Webhooks way,
one POST per attempt with every attempt recorded, retried with exponential backoff for about
a day, and classified by what the receiver answered.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import secrets
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.db.models import Max, QuerySet

from arbiter_app import metrics, signing_keys
from arbiter_app.models import DeliveryAttempt
from arbiter_app.refusals import HostNotFound, TargetNotAllowed

SECRET_PREFIX = "whsec_"  # noqa: S105 - the Standard Webhooks prefix, not a secret
#: What an attempt keeps of the answer, and the most of it that is read at all.
EXCERPT_BYTES = 1024
MAX_RESPONSE_BYTES = 1024 * 1024
#: What an attempt keeps of the request body: an envelope is at most 64 KiB.
REQUEST_BODY_BYTES = 64 * 1024
#: Headers whose values are credentials, or prove knowledge of one: kept masked, never in clear.
SECRET_HEADERS = frozenset({"authorization", "signature", "webhook-signature", "set-cookie"})
REDACTED = "[redacted]"
METHOD = "POST"


# Where the arbiter may send ------------------------------------------------------------------


def _forbidden(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_multicast
        or address.is_reserved
        or address.is_unspecified
        # Shared address space (100.64/10) and the like: not private, still not the Internet.
        or not address.is_global
    )


def resolve(host: str, port: int) -> list[str]:
    """Every address of ``host``, as the system's resolver answers: the one lookup a request
    makes (tests replace it). :func:`pin` checks these very addresses and the request connects
    to one of them, so a name that answers differently the second time (DNS rebinding) is
    never asked a second time."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in infos]


@dataclass(frozen=True, slots=True)
class Pinned:
    """A URL and the checked addresses of its host: where a request to it connects."""

    url: httpx.URL
    addresses: tuple[str, ...]

    def at(self, address: str) -> httpx.URL:
        """The URL with the address in place of the name: the connection goes there only."""
        return self.url.copy_with(host=address)

    @property
    def host_header(self) -> str:
        return self.url.netloc.decode("ascii")

    @property
    def extensions(self) -> dict[str, str]:
        # TLS names, and verifies the certificate against, the host the URL names.
        if self.url.scheme != "https":
            return {}
        return {"sni_hostname": self.url.raw_host.decode("ascii")}


def _parse(url: str) -> httpx.URL:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise TargetNotAllowed(f"{url!r} is not an http or https URL")
    if not parts.hostname:
        raise TargetNotAllowed(f"{url!r} names no host")
    if parts.username or parts.password:
        raise TargetNotAllowed("the URL may not carry credentials")
    try:
        # The host resolved and checked is httpx's reading of the URL, the one it would send to.
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise TargetNotAllowed(f"{url!r} is not a valid URL: {exc}") from exc
    if parsed.scheme not in ("http", "https") or not parsed.raw_host or parsed.userinfo:
        raise TargetNotAllowed(f"{url!r} is not a URL the arbiter sends to")
    return parsed


def _addresses(url: httpx.URL, *, check: bool) -> tuple[str, ...]:
    name = url.host
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
        found = resolve(url.raw_host.decode("ascii"), port)
    except socket.gaierror as exc:
        raise HostNotFound(f"The host {name} could not be found.") from exc
    except (OSError, ValueError) as exc:
        raise TargetNotAllowed(f"cannot resolve {name!r}: {exc}") from exc
    if not found:
        raise HostNotFound(f"The host {name} could not be found.")
    addresses: list[str] = []
    for text in found:
        address = ipaddress.ip_address(text.split("%", 1)[0])
        if check and _forbidden(address):
            raise TargetNotAllowed(f"{name!r} resolves to {address}, which is not a public address")
        if str(address) not in addresses:
            addresses.append(str(address))
    return tuple(addresses)


def check_target(url: str) -> None:
    """Refuse, with :class:`TargetNotAllowed`, a URL the arbiter must not POST to.

    Only http(s), and a host whose every address is public, so that an agent or a merchant
    cannot point the arbiter at its own network. Called when a target is configured; each
    request checks again, with :func:`pin`, the addresses it connects to.
    """
    parsed = _parse(url)
    if not settings.OANP_ALLOW_PRIVATE_TARGETS:
        _addresses(parsed, check=True)


def pin(url: str) -> Pinned:
    """Resolve the URL's host once and check every address as :func:`check_target` does (all
    of them pass when private targets are allowed): the addresses a request may connect to.
    """
    parsed = _parse(url)
    return Pinned(parsed, _addresses(parsed, check=not settings.OANP_ALLOW_PRIVATE_TARGETS))


# Secrets -------------------------------------------------------------------------------------


def seal(secret: str) -> bytes:
    return signing_keys.cipher().encrypt(secret.encode())


def unseal(sealed: bytes | memoryview) -> str:
    return signing_keys.cipher().decrypt(bytes(sealed)).decode()


def new_webhook_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode()


def check_webhook_secret(secret: str) -> None:
    """``ValueError`` unless ``secret`` is ``whsec_`` and base64 of at least 24 bytes."""
    try:
        if not secret.startswith(SECRET_PREFIX):
            raise ValueError
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except ValueError:
        raise ValueError("a webhook secret is 'whsec_' followed by base64") from None
    if len(key) < 24:
        raise ValueError("a webhook secret needs at least 24 random bytes")


def signature_headers(
    *, secret: str, message_id: str, body: bytes, timestamp: int
) -> dict[str, str]:
    """Standard Webhooks: ``v1,`` + base64 HMAC-SHA256 of ``{id}.{timestamp}.{body}``."""
    key = base64.b64decode(secret.removeprefix(SECRET_PREFIX))
    signed = f"{message_id}.{timestamp}.".encode() + body
    digest = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": f"v1,{digest}",
    }


# One attempt ---------------------------------------------------------------------------------


class AttemptOutcome(StrEnum):
    DELIVERED = "delivered"
    #: Worth trying again later: 408, 409, 429, 5xx, no answer.
    RETRY = "retry"
    #: This message will never be taken: another 4xx (or a redirect, never followed).
    REJECTED = "rejected"
    #: The receiver is gone (410) or no longer an allowed address: stop sending to it.
    GONE = "gone"
    #: Never an answer: the worker stopped during the POST, found when the lease ran out.
    ABANDONED = "abandoned"


@dataclass(frozen=True, slots=True)
class Answer:
    outcome: AttemptOutcome
    status_code: int | None = None
    latency_ms: int | None = None
    body: bytes = b""
    error: str = ""
    #: Seconds the receiver asked us to wait (``Retry-After``), if it did.
    retry_after: float | None = None
    #: The request as sent, its secrets redacted; empty when none was sent (a refused target).
    request_headers: dict[str, str] = field(default_factory=dict)
    response_headers: dict[str, str] = field(default_factory=dict)


def redacted(headers: Any) -> dict[str, str]:
    """``headers`` to keep on record: the values of :data:`SECRET_HEADERS` masked, the
    ``Authorization`` scheme kept so a reader still sees which kind of credential went."""
    kept = {}
    for name, value in headers.items():
        if name.lower() in SECRET_HEADERS:
            scheme, _, credential = value.partition(" ")
            bearer = credential and name.lower() == "authorization"
            value = f"{scheme} {REDACTED}" if bearer else REDACTED
        kept[name] = value
    return kept


def classify(status: int) -> AttemptOutcome:
    if 200 <= status < 300:
        return AttemptOutcome.DELIVERED
    if status in (408, 409, 429) or status >= 500:
        return AttemptOutcome.RETRY
    if status == 410:
        return AttemptOutcome.GONE
    return AttemptOutcome.REJECTED


def _retry_after(value: str | None) -> float | None:
    # Only the delta-seconds form; an HTTP date from a receiver's clock is not worth trusting.
    if value is None or not value.strip().isdigit():
        return None
    return float(value.strip())


def failure(exc: httpx.HTTPError, *, host: str, timeout: float) -> str:
    """Why a request got no answer, as a sentence a merchant reads on its agent page and an
    operator on an attempt: the host by name, never the socket's errno."""
    if isinstance(exc, httpx.TimeoutException):
        return f"The host {host} did not answer within {timeout:g} s."
    if isinstance(exc, httpx.ConnectError):
        # httpx and httpcore each chain the error they translate: the resolver's is below.
        cause: BaseException | None = exc
        while cause is not None:
            if isinstance(cause, socket.gaierror):
                return f"The host {host} could not be found."
            cause = cause.__cause__
        return f"The host {host} could not be reached: nothing accepted the connection."
    return f"{type(exc).__name__}: {exc}"


def _send(
    target: Pinned, *, body: bytes, headers: dict[str, str], timeout: float, started: float
) -> tuple[httpx.Response, bytes]:
    """POST to the first of the target's checked addresses that takes the connection: to that
    address, never to the name, with the name in ``Host`` and in TLS."""
    # An explicit transport: no proxy from the environment, which would resolve the name again.
    with httpx.Client(transport=httpx.HTTPTransport(), follow_redirects=False) as client:
        for n, address in enumerate(target.addresses, start=1):
            request = client.build_request(
                METHOD,
                target.at(address),
                content=body,
                headers={**headers, "Host": target.host_header},
                extensions=target.extensions,
                timeout=max(timeout - (time.monotonic() - started), 0.001),
            )
            try:
                response = client.send(request, stream=True)
            except httpx.ConnectError:
                # Nothing was sent: the name's next address may take it (an IPv6 address
                # seen from a network without IPv6, say), as a resolving client would try.
                if n == len(target.addresses) or time.monotonic() - started >= timeout:
                    raise
                continue
            try:
                received = bytearray()
                for chunk in response.iter_bytes():
                    received += chunk
                    # A receiver that answers without end is cut off, not waited for.
                    if len(received) >= MAX_RESPONSE_BYTES or time.monotonic() - started > timeout:
                        break
                return response, bytes(received)
            finally:
                response.close()
    raise AssertionError("a pinned target has at least one address")


def deliver(
    *, url: str, body: bytes, secret: str, message_id: str, headers: dict[str, str]
) -> Answer:
    """POST ``body`` once, signed under ``secret``, and say how it went. Never raises for
    anything the receiver or the network does.

    The host is resolved once and the request goes to the addresses checked (:func:`pin`).
    """
    try:
        target = pin(url)
    except HostNotFound as missing:
        # No answer rather than a refusal: the name may be published yet; retried as one.
        return Answer(AttemptOutcome.RETRY, error=missing.detail)
    except TargetNotAllowed as refused:
        return Answer(AttemptOutcome.GONE, error=f"target not allowed: {refused.detail}")
    signed = signature_headers(
        secret=secret, message_id=message_id, body=body, timestamp=int(time.time())
    )
    request_headers = {"Content-Type": "application/json", **headers, **signed}
    timeout = settings.OANP_DELIVERY_TIMEOUT_SECONDS
    started = time.monotonic()
    try:
        response, received = _send(
            target, body=body, headers=request_headers, timeout=timeout, started=started
        )
    except httpx.HTTPError as exc:
        latency = round((time.monotonic() - started) * 1000)
        return Answer(
            AttemptOutcome.RETRY,
            latency_ms=latency,
            error=failure(exc, host=target.url.host, timeout=timeout),
            request_headers=redacted(request_headers),
        )
    latency = round((time.monotonic() - started) * 1000)
    status = response.status_code
    error = ""
    if 300 <= status < 400:
        error = f"redirect to {response.headers.get('location', '?')} not followed"
    return Answer(
        classify(status),
        status_code=status,
        latency_ms=latency,
        body=received[:MAX_RESPONSE_BYTES],
        error=error,
        retry_after=_retry_after(response.headers.get("retry-after")),
        request_headers=redacted(request_headers),
        response_headers=redacted(response.headers),
    )


def record(attempt: DeliveryAttempt, answer: Answer, *, url: str, body: bytes) -> None:
    """Keep the attempt as it went: the request to ``url`` (its secrets already redacted by
    :func:`deliver`), the answer's status, headers and first KiB, or why there was none."""
    attempt.request_method, attempt.request_url = METHOD, url
    attempt.request_headers = answer.request_headers
    attempt.request_body = body[:REQUEST_BODY_BYTES].decode("utf-8", "replace")
    attempt.status_code = answer.status_code
    attempt.latency_ms = answer.latency_ms
    attempt.outcome = answer.outcome.value
    attempt.response_headers = answer.response_headers
    attempt.response_excerpt = answer.body[:EXCERPT_BYTES].decode("utf-8", "replace")
    attempt.error = answer.error
    attempt.save(
        update_fields=[
            "request_method",
            "request_url",
            "request_headers",
            "request_body",
            "status_code",
            "latency_ms",
            "outcome",
            "response_headers",
            "response_excerpt",
            "error",
        ]
    )
    kind = "handoff" if attempt.handoff_id is not None else "callback"
    metrics.DELIVERIES.labels(kind=kind, outcome=answer.outcome.value).inc()


def next_number(attempts: QuerySet[DeliveryAttempt]) -> int:
    """The number of a delivery's next attempt: one past its last, so the numbers run on
    across redeliveries (whose fresh retry budget restarts the count that retries go by)."""
    last = attempts.aggregate(last=Max("number"))["last"]
    return (last or 0) + 1


def is_latest(budget: int, attempts: QuerySet[DeliveryAttempt], number: int) -> bool:
    """Whether attempt ``number`` is still the delivery's current one, under the delivery's
    lock: not when a redelivery has reset the retry ``budget`` since (to 0, or past it with
    a newer attempt)."""
    return budget > 0 and not attempts.filter(number__gt=number).exists()


# Leases and retries --------------------------------------------------------------------------


def lease() -> timedelta:
    """How long a claimed attempt may go unanswered before its worker is presumed dead."""
    return timedelta(
        seconds=settings.OANP_DELIVERY_TIMEOUT_SECONDS + settings.OANP_DELIVERY_LEASE_MARGIN_SECONDS
    )


def lease_until(now: datetime) -> datetime:
    return now + lease()


def abandon_dead(
    now: datetime,
    *,
    handoffs: Iterable[int] | QuerySet[Any] = (),
    cursors: Iterable[int] | QuerySet[Any] = (),
) -> int:
    """Close as abandoned the attempts of ``handoffs`` and callback ``cursors`` that are still
    unanswered past their lease: their worker died during the POST and no answer will come.
    How many were closed.

    The sweep and each claim call this, whichever comes first; the update's own condition
    closes and counts each attempt once however many call at the same time.
    """
    dead = DeliveryAttempt.objects.filter(outcome="", started_at__lte=now - lease())
    found = now.isoformat(timespec="seconds")
    error = f"the worker stopped before an answer; found abandoned at {found}"
    closed = 0
    for kind, attempts in (
        ("handoff", dead.filter(handoff__in=handoffs)),
        ("callback", dead.filter(cursor__in=cursors)),
    ):
        count = attempts.update(outcome=AttemptOutcome.ABANDONED.value, error=error)
        if count:
            metrics.DELIVERIES.labels(kind=kind, outcome=AttemptOutcome.ABANDONED.value).inc(count)
        closed += count
    return closed


def retry_wait(attempts: int, asked: float | None = None) -> float | None:
    """Seconds before attempt ``attempts + 1``, or ``None`` when the retries are spent.

    Doubling from the base, capped per wait; a receiver's ``Retry-After`` is honoured when it
    asks for longer, within the same cap.
    """
    if attempts >= settings.OANP_DELIVERY_MAX_ATTEMPTS:
        return None
    cap = settings.OANP_DELIVERY_RETRY_CAP_SECONDS
    wait = min(cap, settings.OANP_DELIVERY_RETRY_BASE_SECONDS * 2 ** (attempts - 1))
    return min(cap, max(wait, asked or 0.0))
