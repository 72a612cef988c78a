"""A typed HTTP client of the arbiter API (docs/protocol.md §14), for agents and scripts.

This module and :mod:`oanp.net.mcp` are the only parts of ``oanp`` that touch the network; nothing
else in the package imports them. Envelopes are carried unchanged but for the sender's
signature: a client given a party signing key signs each envelope it submits
(docs/protocol.md §17), once, before the first send. A resubmission after a network error sends
the very same bytes, and the arbiter's idempotent repeat (same ``message_id``, same body
without ``signature``: 200 with the first answer) makes that safe, even for an envelope
submitted again later and so signed again.

Refusals come back as :class:`ProblemError`. When the problem's ``code`` names a class of
:mod:`oanp.wire.errors`, the exception is also an instance of that class, so callers may write
``except OutOfTurn`` or branch on ``exc.code`` alike.
"""

from __future__ import annotations

import codecs
import json
import random
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Final, cast
from urllib.parse import quote, urlencode

import httpx

from oanp.wire import errors
from oanp.wire.canonical import json_value, read_json
from oanp.wire.errors import BadPartyKey, FieldError, ProtocolError, SchemaInvalid
from oanp.wire.party_signatures import sign_envelope
from oanp.wire.signing import SigningKey

API_PREFIX: Final = "/oanp/v0.1"
#: Statuses worth sending the same request again for: the arbiter did not decide anything.
RETRY_STATUSES: Final = frozenset({429, 502, 503, 504})
#: The arbiter sends a comment every 15 s on an idle stream; silence far longer is a dead link.
STREAM_READ_TIMEOUT: Final = 45.0
TERMINAL_TYPES: Final = frozenset({"session.agree", "session.close"})


# Problems ------------------------------------------------------------------------------------


class ProblemError(ProtocolError):
    """An RFC 9457 problem the arbiter answered with: ``code``, ``status``, ``detail``.

    ``problem`` is the whole body as received; ``errors`` the bad fields it names.
    """

    def __init__(
        self,
        detail: str,
        *,
        errors: tuple[FieldError, ...] = (),
        code: str = "protocol_error",
        status: int = 400,
        title: str = "",
        problem: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(detail, errors=errors)
        self.code = code
        self.status = status
        self.title = title or self.title
        self.problem: dict[str, Any] = dict(problem or {})
        self.retry_after = retry_after

    def __str__(self) -> str:
        fields = "; ".join(f"{e.field}: {e.message}" for e in self.errors)
        return f"{self.code} ({self.status}): {self.detail}" + (f" [{fields}]" if fields else "")


def _protocol_error_classes() -> dict[str, type[ProtocolError]]:
    found: dict[str, type[ProtocolError]] = {}
    pending: list[type[ProtocolError]] = [ProtocolError]
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if cls.__module__ == errors.__name__:
            found.setdefault(cls.code, cls)
    return found


_KNOWN: Final = _protocol_error_classes()
_REMOTE: dict[str, type[ProblemError]] = {}


def problem_class(code: str) -> type[ProblemError]:
    """The exception class for a problem ``code``: a :class:`ProblemError` that is also the
    :mod:`oanp.wire.errors` class with that code, when there is one."""
    known = _KNOWN.get(code)
    if known is None:
        return ProblemError
    remote = _REMOTE.get(code)
    if remote is None:
        remote = cast(
            "type[ProblemError]",
            type(f"Remote{known.__name__}", (ProblemError, known), {"__module__": __name__}),
        )
        _REMOTE[code] = remote
    return remote


def _retry_after(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None  # an HTTP date: rare for a rate limit, and the back-off covers it


def problem_from_response(status: int, body: bytes, headers: Mapping[str, str]) -> ProblemError:
    """Turn an error answer into its typed exception; a body that is no problem still maps
    to a :class:`ProblemError` with a code made from the status."""
    try:
        problem = json.loads(body)
    except ValueError:
        problem = None
    if not isinstance(problem, dict):
        text = body.decode("utf-8", "replace")[:300]
        problem = {"code": f"http_{status}", "detail": text or f"HTTP {status}"}
    code = problem.get("code")
    code = code if isinstance(code, str) and code else f"http_{status}"
    detail = problem.get("detail")
    found = problem.get("errors")
    field_errors = tuple(
        FieldError(str(e.get("field", "")), str(e.get("message", "")))
        for e in (found if isinstance(found, list) else [])
        if isinstance(e, dict)
    )
    title = problem.get("title")
    return problem_class(code)(
        str(detail) if detail is not None else f"HTTP {status}",
        errors=field_errors,
        code=code,
        status=status,
        title=title if isinstance(title, str) else "",
        problem=problem,
        retry_after=_retry_after(headers.get("retry-after")),
    )


class StreamError(Exception):
    """An event stream could not be kept open (the arbiter was unreachable for too long)."""


#: What a call raises when the arbiter cannot be reached, so callers need not know httpx.
UNREACHABLE: tuple[type[Exception], ...] = (OSError, StreamError, httpx.HTTPError)


# Server-Sent Events --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerEvent:
    """One dispatched event: the stream's last event ``id``, its ``event`` type, its ``data``."""

    id: str
    event: str
    data: str

    def json(self) -> Any:
        """The data as JSON (for both streams of the arbiter: a log entry)."""
        return json.loads(self.data)


_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass
class SseDecoder:
    """An incremental event-stream parser, as WHATWG HTML's EventSource reads a stream.

    Lines end at CRLF, LF or CR and nowhere else (``str.splitlines`` would also split at
    U+2028, U+0085 and others, which JSON carries unescaped). Feed bytes as they arrive;
    a CR at the very end of a chunk waits for the next one, in case it is half of a CRLF.
    """

    last_event_id: str = ""
    retry_ms: int | None = None
    comments: int = 0
    _decoder: codecs.IncrementalDecoder = field(
        default_factory=lambda: codecs.getincrementaldecoder("utf-8")("replace")
    )
    _buffer: str = ""
    _started: bool = False
    _event: str = ""
    _data: list[str] = field(default_factory=list)

    def feed(self, chunk: bytes) -> list[ServerEvent]:
        """Take the next bytes of the stream; return the events they complete."""
        self._buffer += self._decoder.decode(chunk)
        if not self._started and self._buffer:
            self._buffer, self._started = self._buffer.removeprefix("\ufeff"), True
        events: list[ServerEvent] = []
        start = 0
        for end in _LINE_END.finditer(self._buffer):
            if end.group() == "\r" and end.end() == len(self._buffer):
                break
            event = self._line(self._buffer[start : end.start()])
            if event is not None:
                events.append(event)
            start = end.end()
        self._buffer = self._buffer[start:]
        return events

    def _line(self, line: str) -> ServerEvent | None:
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            self.comments += 1
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self.last_event_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> ServerEvent | None:
        data, event = self._data, self._event or "message"
        self._data, self._event = [], ""
        if not data:
            return None
        return ServerEvent(self.last_event_id, event, "\n".join(data))


# The client ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Submission:
    """The arbiter's answer to an envelope: its ``entry``, the ``arbiter`` entries it caused,
    the session summary; ``repeated`` when it was the answer to an earlier identical send."""

    entry: dict[str, Any]
    arbiter: list[dict[str, Any]]
    session: dict[str, Any]
    repeated: bool


def _session_path(session_id: str, tail: str = "") -> str:
    return f"{API_PREFIX}/sessions/{quote(session_id, safe='')}{tail}"


def signed_body(body: bytes, key: SigningKey) -> bytes:
    """The envelope ``body`` signed by ``key`` (docs/protocol.md §17), as bytes to send.

    Raises the :class:`ProtocolError` the arbiter would answer for bytes that are not an
    envelope's JSON object.
    """
    # Signed as the arbiter reads it (strictly, each number as it hashes it), so that the JCS
    # bytes it checks the signature over are the ones signed here, however the envelope was
    # spelled.
    read = json_value(read_json(body))
    if not isinstance(read, dict):
        raise SchemaInvalid(
            "an envelope is a JSON object", errors=[FieldError("$", "not an object")]
        )
    return json.dumps(sign_envelope(read, key)).encode()


class ArbiterClient:
    """A blocking client of one arbiter, authenticated as one agent (thread-safe, like httpx).

    ``retries`` bounds how often a request is sent again after a network error or a
    429/502/503/504; waits grow from ``backoff`` seconds, or follow ``Retry-After``. With a
    ``signing_key`` every envelope submitted is signed with it; the arbiter accepts those once
    its public half is registered (:meth:`register_signing_key`).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 10.0,
        retries: int = 5,
        backoff: float = 0.2,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        signing_key: SigningKey | None = None,
    ) -> None:
        headers = {"User-Agent": "oanp-client/0.1", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        self.base_url = base_url.rstrip("/")
        self.retries = retries
        self.backoff = backoff
        self.signing_key = signing_key
        self._sleep = sleep
        self._http = httpx.Client(
            base_url=self.base_url, headers=headers, timeout=timeout, transport=transport
        )

    def __enter__(self) -> ArbiterClient:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    # Requests ------------------------------------------------------------------------------

    def _wait(self, attempt: int, hint: float | None) -> None:
        delay = hint if hint is not None else self.backoff * (2**attempt)
        self._sleep(min(delay, 10.0) * (1 + random.random() / 4))  # noqa: S311 - jitter

    def _request(self, method: str, path: str, *, content: bytes | None = None) -> httpx.Response:
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    method,
                    path,
                    content=content,
                    headers={"Content-Type": "application/json"} if content is not None else None,
                )
            except httpx.TransportError:
                if attempt >= self.retries:
                    raise
                self._wait(attempt, None)
                attempt += 1
                continue
            if response.status_code in RETRY_STATUSES and attempt < self.retries:
                self._wait(attempt, _retry_after(response.headers.get("retry-after")))
                attempt += 1
                continue
            if response.status_code >= 400:
                raise problem_from_response(
                    response.status_code, response.content, response.headers
                )
            return response

    def _get_json(self, path: str) -> Any:
        return self._request("GET", path).json()

    def submit(self, envelope: Mapping[str, Any] | bytes) -> Submission:
        """POST one envelope, signed when this client has a signing key; on a network error,
        send the same bytes again.

        Raises :class:`ProblemError` (typed by its code) when the arbiter refuses it, and, with
        a signing key, the :class:`ProtocolError` the arbiter would answer for an envelope that
        is not a JSON object it can read, since such bytes cannot be signed.
        """
        body = envelope if isinstance(envelope, bytes) else json.dumps(dict(envelope)).encode()
        if self.signing_key is not None:
            body = signed_body(body, self.signing_key)
        response = self._request("POST", f"{API_PREFIX}/envelopes", content=body)
        answer = response.json()
        return Submission(
            entry=answer["entry"],
            arbiter=list(answer.get("arbiter", [])),
            session=answer.get("session", {}),
            repeated=response.status_code == 200,
        )

    def register_signing_key(self) -> dict[str, Any]:
        """Register the public half of this client's signing key with the arbiter, for this
        agent (docs/protocol.md §17); its answer, ``kid`` and ``registered_at`` (for a key
        registered before, the key as the arbiter lists it). Only the public JWK is sent;
        :class:`~oanp.wire.errors.BadPartyKey` for a key its agent retired."""
        if self.signing_key is None:
            raise ValueError("this client has no signing key to register")
        body = json.dumps(self.signing_key.public_jwk()).encode()
        answer = self._request("POST", f"{API_PREFIX}/agent-keys", content=body).json()
        retired = answer.get("retired_at") if isinstance(answer, dict) else None
        if retired is not None:
            # The arbiter keeps a retired key retired: every envelope it signs would be refused.
            raise BadPartyKey(
                f"this signing key ({answer.get('kid')}) was retired at {retired}: make a new "
                "one with `oanp keygen` and sign with it"
            )
        return cast("dict[str, Any]", answer)

    def summary(self, session_id: str) -> dict[str, Any]:
        """The session summary: state, round, turn, parties, commitments, timers, outcome."""
        return cast("dict[str, Any]", self._get_json(_session_path(session_id)))

    def log(self, session_id: str) -> list[dict[str, Any]]:
        """Every entry of the session, in order (parsed as the log verifier reads them)."""
        return cast(
            "list[dict[str, Any]]", self._get_json(_session_path(session_id, "/log"))["entries"]
        )

    def reveal(self, session_id: str, constraints: Mapping[str, Any], salt: str) -> dict[str, Any]:
        """Reveal this agent's constraints and salt after the end (docs/protocol.md §10)."""
        body = json.dumps({"constraints": dict(constraints), "salt": salt}).encode()
        path = _session_path(session_id, "/reveal")
        return cast("dict[str, Any]", self._request("POST", path, content=body).json())

    def jwks(self) -> dict[str, Any]:
        """The arbiter's public signing keys (``/.well-known/jwks.json``)."""
        return cast("dict[str, Any]", self._get_json("/.well-known/jwks.json"))

    def keys(self) -> dict[str, Any]:
        """Every public key the arbiter ever signed with, with its validity window."""
        return cast("dict[str, Any]", self._get_json(f"{API_PREFIX}/keys"))

    def agent_keys(self, agent_id: str) -> list[dict[str, Any]]:
        """Every key ``agent_id`` registered to sign its envelopes (docs/protocol.md §17),
        retired ones too, each with ``registered_at`` and ``retired_at``."""
        found = self._get_json(f"{API_PREFIX}/agents/{quote(agent_id, safe='')}/keys")
        return cast("list[dict[str, Any]]", found["keys"])

    def discovery(self) -> dict[str, Any]:
        """The arbiter's discovery document (``/.well-known/oanp.json``): its id, versions,
        profiles, settlement rules, endpoints, ``jwks_uri`` and limits."""
        return cast("dict[str, Any]", self._get_json("/.well-known/oanp.json"))

    def merchants(self, q: str | None = None) -> list[dict[str, Any]]:
        """Every listed merchant agent whose id, merchant name, description or catalog holds
        ``q`` (case-insensitively; all of them without it), every page of the directory.

        Pages are followed by their ``Link: rel="next"`` header, only on this client's own
        origin: the API key is never sent to another host a header names.
        """
        base = self._http.base_url
        page = f"{API_PREFIX}/merchants" + (f"?{urlencode({'q': q})}" if q else "")
        found: list[dict[str, Any]] = []
        seen: set[httpx.URL] = set()
        while True:
            response = self._request("GET", page)
            found.extend(response.json())
            seen.add(response.url)
            following = response.links.get("next", {}).get("url")
            if following is None:
                return found
            url = response.url.join(following)
            if (url.scheme, url.netloc) != (base.scheme, base.netloc) or url in seen:
                raise ProblemError(
                    f"the next page {str(url)[:200]!r} is not a new page of {self.base_url}",
                    code="bad_link",
                    status=response.status_code,
                )
            page = str(url)

    # Streams -------------------------------------------------------------------------------

    def _events(
        self, path: str, last_event_id: str | None, on_open: Callable[[], None] | None
    ) -> Iterator[ServerEvent]:
        """One connection's events; ends when the server ends the stream."""
        headers = {"Accept": "text/event-stream", "Cache-Control": "no-cache"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        timeout = httpx.Timeout(self._http.timeout.connect or 10.0, read=STREAM_READ_TIMEOUT)
        with self._http.stream("GET", path, headers=headers, timeout=timeout) as response:
            if response.status_code >= 400:
                response.read()
                raise problem_from_response(
                    response.status_code, response.content, response.headers
                )
            decoder = SseDecoder(last_event_id=last_event_id or "")
            opened = False
            for chunk in response.iter_bytes():
                events = decoder.feed(chunk)
                if not opened and (events or decoder.comments):
                    opened = True
                    if on_open is not None:
                        on_open()
                yield from events

    def _resuming(
        self,
        path: str,
        last_event_id: str | None,
        done: Callable[[ServerEvent], bool],
        on_open: Callable[[], None] | None,
        max_failures: int | None,
    ) -> Iterator[ServerEvent]:
        failures = 0
        while True:
            try:
                for event in self._events(path, last_event_id, on_open):
                    failures = 0
                    last_event_id = event.id or last_event_id
                    yield event
                    if done(event):
                        return
            except ProblemError as problem:
                if problem.status not in RETRY_STATUSES:
                    raise
            except httpx.TransportError as exc:
                if max_failures is not None and failures >= max_failures:
                    raise StreamError(f"{path}: the arbiter stayed unreachable: {exc}") from exc
            # The stream ended or broke before the caller's end: pick it up where it stopped.
            self._wait(min(failures, 5), None)
            failures += 1

    def session_events(
        self,
        session_id: str,
        *,
        after: int = 0,
        on_open: Callable[[], None] | None = None,
        max_failures: int | None = 20,
    ) -> Iterator[ServerEvent]:
        """The session's entries after seq ``after``, live, until its final entry.

        A dropped connection is resumed from the last ``id`` seen (``Last-Event-ID``), so no
        entry is lost or repeated; the iterator ends after ``session.agree`` or the arbiter's
        ``session.close``.
        """

        def final(event: ServerEvent) -> bool:
            if event.event not in TERMINAL_TYPES:
                return False
            return bool(event.json()["envelope"]["sender"]["role"] == "arbiter")

        return self._resuming(
            _session_path(session_id, "/events"),
            str(after) if after else None,
            final,
            on_open,
            max_failures,
        )

    def inbox(
        self,
        *,
        cursor: str | None = None,
        on_open: Callable[[], None] | None = None,
        max_failures: int | None = None,
    ) -> Iterator[ServerEvent]:
        """Every entry of every session this agent is a party to, after ``cursor``, forever.

        Each event's ``id`` is the cursor to resume from; a dropped connection is resumed
        from the last one seen. ``on_open`` is called on every (re)connection.
        """
        return self._resuming(
            f"{API_PREFIX}/inbox", cursor, lambda _event: False, on_open, max_failures
        )
