"""The HTTP client's own parts, without a server: the event-stream parser, the mapping of
problems to typed exceptions, the retry of the same bytes, the signing of every envelope with a
party's key and the registration of its public half, and the resume of a stream."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from oanp.net.client import (
    ArbiterClient,
    ProblemError,
    SseDecoder,
    problem_from_response,
)
from oanp.wire.errors import (
    BadPartyKey,
    Conflict,
    MalformedEnvelope,
    OutOfTurn,
    ProtocolError,
    SchemaInvalid,
)
from oanp.wire.party_signatures import PartyKey, check_party_signature, sign_envelope, unsigned
from oanp.wire.signing import SigningKey

# The event-stream parser ---------------------------------------------------------------------


def decode(*chunks: bytes) -> tuple[SseDecoder, list[tuple[str, str, str]]]:
    decoder = SseDecoder()
    events = [(e.id, e.event, e.data) for chunk in chunks for e in decoder.feed(chunk)]
    return decoder, events


def test_lines_end_at_lf_crlf_and_cr_alike() -> None:
    _, events = decode(b"id: 1\nevent: a\ndata: x\n\nid: 2\r\nevent: b\r\ndata: y\r\n\r\n")
    assert events == [("1", "a", "x"), ("2", "b", "y")]
    # A CR that ends a chunk may be half of a CRLF: the next bytes settle it.
    _, events = decode(b"id: 3\revent: c\rdata: z\r\r", b": more")
    assert events == [("3", "c", "z")]


def test_a_crlf_split_across_chunks_is_one_line_end() -> None:
    _, events = decode(b"data: one\r", b"\n", b"\r", b"\ndata: two\r\n\r\n")
    assert events == [("", "message", "one"), ("", "message", "two")]


def test_unicode_line_separators_inside_data_do_not_split_it() -> None:
    text = "route\u2028SFO\x85JFK\x0bnext\x1c"
    _, events = decode(f"data: {text}\n\n".encode())
    assert events == [("", "message", text)]


def test_a_character_split_across_chunks_survives() -> None:
    raw = "data: café 🛫\n\n".encode()
    _, events = decode(*(raw[i : i + 1] for i in range(len(raw))))
    assert events == [("", "message", "café 🛫")]


def test_comments_bom_multi_line_data_and_the_last_id() -> None:
    decoder, events = decode(
        b"\xef\xbb\xbf: stream open\n\n",
        b'id: c7\ndata: {"a":\ndata: 1}\n\n',
        b": keep-alive\n\n",
        b"data: no id here\nretry: 2500\n\n",
        b"data: unfinished",
    )
    assert decoder.comments == 2
    assert events == [("c7", "message", '{"a":\n1}'), ("c7", "message", "no id here")]
    assert decoder.retry_ms == 2500
    assert decoder.last_event_id == "c7"


def test_an_event_without_data_dispatches_nothing() -> None:
    _, events = decode(b"event: ping\n\nid: 9\n\n")
    assert events == []


# Problems ------------------------------------------------------------------------------------


def problem(code: str, status: int, **extra: Any) -> bytes:
    return json.dumps({"type": "x", "title": "t", "status": status, "code": code, **extra}).encode()


def test_a_known_code_raises_its_oanp_errors_class() -> None:
    error = problem_from_response(409, problem("out_of_turn", 409, detail="wait"), {})
    assert isinstance(error, OutOfTurn)
    assert isinstance(error, Conflict)
    assert isinstance(error, ProblemError)
    assert (error.code, error.status, error.detail) == ("out_of_turn", 409, "wait")
    assert "out_of_turn (409): wait" in str(error)


def test_field_errors_come_with_the_problem() -> None:
    body = problem(
        "schema_invalid",
        400,
        detail="bad",
        errors=[{"field": "$.payload.price", "message": "must be positive"}],
    )
    error = problem_from_response(400, body, {})
    assert isinstance(error, SchemaInvalid)
    assert [(e.field, e.message) for e in error.errors] == [("$.payload.price", "must be positive")]
    assert error.problem["code"] == "schema_invalid"


def test_an_unknown_code_is_a_generic_problem_and_a_body_without_one_too() -> None:
    error = problem_from_response(
        429, problem("rate_limited", 429, detail="slow"), {"retry-after": "3"}
    )
    assert type(error) is ProblemError
    assert (error.code, error.status, error.retry_after) == ("rate_limited", 429, 3.0)
    bare = problem_from_response(502, b"<html>bad gateway</html>", {})
    assert (bare.code, bare.status) == ("http_502", 502)
    assert isinstance(bare, ProtocolError)


# Retries -------------------------------------------------------------------------------------

ENVELOPE = {"message_id": "m-1", "session_id": "s-1", "type": "offer.propose"}
ANSWER = {"entry": {"seq": 3}, "arbiter": [], "session": {"state": "NEGOTIATING"}}


def client_with(handler: Any, **options: Any) -> ArbiterClient:
    return ArbiterClient(
        "http://arbiter.test",
        "key",
        transport=httpx.MockTransport(handler),
        sleep=lambda seconds: None,
        **options,
    )


def test_a_network_error_sends_the_same_bytes_again_and_a_replay_is_reported() -> None:
    bodies: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(request.content)
        assert request.headers["authorization"] == "Bearer key"
        if len(bodies) == 1:
            raise httpx.ReadTimeout("lost the answer", request=request)
        return httpx.Response(200, json=ANSWER)

    submission = client_with(handler).submit(ENVELOPE)
    assert len(bodies) == 2
    assert bodies[0] == bodies[1]
    assert json.loads(bodies[0]) == ENVELOPE
    assert submission.repeated
    assert submission.entry == {"seq": 3}


def test_rate_limits_are_waited_out_and_refusals_are_not_retried() -> None:
    calls: list[int] = []
    waits: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(
                429, headers={"Retry-After": "2"}, content=problem("rate_limited", 429)
            )
        return httpx.Response(
            409,
            headers={"Content-Type": "application/problem+json"},
            content=problem("out_of_turn", 409, detail="not yet"),
        )

    client = ArbiterClient(
        "http://arbiter.test", "key", transport=httpx.MockTransport(handler), sleep=waits.append
    )
    with pytest.raises(OutOfTurn):
        client.submit(ENVELOPE)
    assert len(calls) == 2
    assert 2.0 <= waits[0] <= 2.5


def test_retries_are_bounded() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("down", request=request)

    with pytest.raises(httpx.ConnectError):
        client_with(handler, retries=2).submit(ENVELOPE)


# Signing -------------------------------------------------------------------------------------

KEY = SigningKey.from_ed25519_seed(bytes(range(32)))
PARTY_ENVELOPE: dict[str, Any] = {
    "oanp_version": "0.1",
    "message_id": "01SIGNED",
    "session_id": "s-signed",
    "timestamp": "2026-04-28T09:00:00Z",
    "sender": {"role": "buyer", "agent_id": "buyer-001"},
    "type": "offer.propose",
    "payload": {"round": 1, "price": 320.5, "constraints_commit": "sha256:" + "ab" * 32},
}


def signed_by_key(envelope: dict[str, Any]) -> bool:
    """Whether ``envelope`` carries ``KEY``'s signature, checked as the arbiter checks it."""
    registered = PartyKey("buyer-001", KEY.public_jwk(), datetime(2026, 1, 1, tzinfo=UTC))
    return check_party_signature(envelope, [registered], datetime(2026, 4, 28, tzinfo=UTC)) == (
        KEY.kid
    )


def signing_client(answers: list[httpx.Response | Exception]) -> tuple[ArbiterClient, list[Any]]:
    """A client with ``KEY`` whose requests are kept, answered with ``answers`` in turn."""
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    return client_with(handler, signing_key=KEY), requests


@pytest.mark.parametrize("as_bytes", [False, True], ids=["mapping", "bytes"])
def test_every_envelope_submitted_is_signed_and_a_resend_sends_the_same_bytes(
    as_bytes: bool,
) -> None:
    lost = httpx.ReadTimeout("lost the answer")
    client, requests = signing_client([lost, httpx.Response(201, json=ANSWER)])
    # Spelled otherwise than JSON's shortest form: signed as the arbiter reads it.
    spelled = json.dumps(PARTY_ENVELOPE, indent=2).replace("320.5", "3.205e2").encode()
    client.submit(spelled if as_bytes else PARTY_ENVELOPE)
    assert len(requests) == 2
    assert requests[0].content == requests[1].content
    sent = json.loads(requests[0].content)
    assert unsigned(sent) == PARTY_ENVELOPE
    assert signed_by_key(sent)


def test_an_envelope_signed_already_is_signed_again_by_the_client_s_key() -> None:
    other = SigningKey.from_ed25519_seed(b"\2" * 32)
    client, requests = signing_client([httpx.Response(201, json=ANSWER)])
    client.submit(sign_envelope(PARTY_ENVELOPE, other))
    assert signed_by_key(json.loads(requests[0].content))


@pytest.mark.parametrize(
    ("body", "error"),
    [(b'{"type": "offer.propose",', MalformedEnvelope), (b"[1, 2]", SchemaInvalid)],
    ids=["not-json", "not-an-object"],
)
def test_bytes_that_are_no_envelope_are_refused_unsent(body: bytes, error: type) -> None:
    client, requests = signing_client([])
    with pytest.raises(error):
        client.submit(body)
    assert requests == []


def test_registering_sends_the_public_key_only_and_returns_the_answer() -> None:
    answer = {"kid": KEY.kid, "registered_at": "2026-04-28T09:00:00Z"}
    client, requests = signing_client([httpx.Response(201, json=answer)])
    assert client.register_signing_key() == answer
    (request,) = requests
    assert (request.method, request.url.path) == ("POST", "/oanp/v0.1/agent-keys")
    assert request.headers["authorization"] == "Bearer key"
    assert json.loads(request.content) == KEY.public_jwk()


def test_a_key_its_agent_retired_is_refused_before_it_signs_anything() -> None:
    answer = {**KEY.public_jwk(), "registered_at": "2026-04-01T00:00:00Z"}
    client, _ = signing_client(
        [httpx.Response(200, json={**answer, "retired_at": "2026-04-02T00:00:00Z"})]
    )
    with pytest.raises(BadPartyKey, match="was retired at 2026-04-02T00:00:00Z"):
        client.register_signing_key()
    client, _ = signing_client([httpx.Response(200, json={**answer, "retired_at": None})])
    assert client.register_signing_key()["retired_at"] is None


def test_a_client_without_a_key_has_nothing_to_register_and_sends_envelopes_as_given() -> None:
    sent: list[bytes] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request.content)
        return httpx.Response(201, json=ANSWER)

    client = client_with(handler)
    with pytest.raises(ValueError, match="no signing key"):
        client.register_signing_key()
    client.submit(b'{"as":  "given"}')
    assert sent == [b'{"as":  "given"}']


# Stream resume -------------------------------------------------------------------------------


def entry(seq: int, kind: str, role: str = "buyer") -> str:
    envelope = {"type": kind, "sender": {"role": role}}
    return json.dumps({"seq": seq, "envelope": envelope})


def test_a_session_stream_cut_short_is_resumed_from_the_last_id_until_the_final_entry() -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("last-event-id"))
        if len(seen) == 1:
            body = (
                f": stream open\n\nid: 1\nevent: session.open\ndata: {entry(1, 'session.open')}\n\n"
            )
            body += "id: 2\nevent: session.ack\ndata: {half"  # the connection dies here
        else:
            body = (
                f": stream open\n\nid: 2\nevent: session.ack\ndata: {entry(2, 'session.ack')}\n\n"
                f"id: 3\nevent: session.close\ndata: {entry(3, 'session.close', 'buyer')}\n\n"
                f"id: 4\nevent: session.close\n"
                f"data: {entry(4, 'session.close', 'arbiter')}\n\n"
                "id: 5\nevent: never\ndata: {}\n\n"
            )
        return httpx.Response(200, content=body.encode())

    opened: list[int] = []
    events = list(client_with(handler).session_events("s-1", on_open=lambda: opened.append(1)))
    assert [e.id for e in events] == ["1", "2", "3", "4"]
    assert seen == [None, "1"]
    assert len(opened) == 2


def test_the_inbox_resumes_from_a_saved_cursor() -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("last-event-id"))
        return httpx.Response(
            200,
            content=f"id: c42\nevent: session.open\ndata: {entry(1, 'session.open')}\n\n".encode(),
        )

    stream = iter(client_with(handler).inbox(cursor="c41"))
    assert next(stream).id == "c42"
    assert next(stream).id == "c42"  # after the server ended the stream, from c42 on
    assert seen == ["c41", "c42"]


def test_importing_the_cli_loads_neither_the_network_nor_the_mcp_sdk() -> None:
    probe = (
        "import sys, oanp.net.cli, oanp.net.negotiators, oanp.net.commands\n"
        "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('httpx', 'mcp', 'django', 'anyio'))))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


# The directory -------------------------------------------------------------------------------


def directory_server(pages: dict[str, tuple[list[str], str | None]]) -> Any:
    """An arbiter whose directory answers ``pages``: by query string, the agent ids of the
    page and its next link; the requests it saw, with their Authorization headers."""
    seen: list[tuple[str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((str(request.url), request.headers.get("authorization")))
        assert request.url.path == "/base/oanp/v0.1/merchants"
        ids, following = pages[request.url.query.decode()]
        headers = {"Link": f'<{following}>; rel="next"'} if following else {}
        return httpx.Response(200, json=[{"agent_id": i} for i in ids], headers=headers)

    return handler, seen


def test_merchants_follows_every_next_link_with_the_search() -> None:
    handler, seen = directory_server(
        {
            "q=flights+%26+trains": (["a", "b"], "/base/oanp/v0.1/merchants?q=x&after=b"),
            "q=x&after=b": (["c"], "http://arbiter.test/base/oanp/v0.1/merchants?after=c"),
            "after=c": (["d"], None),
        }
    )
    client = ArbiterClient(
        "http://arbiter.test/base", "key", transport=httpx.MockTransport(handler)
    )
    found = client.merchants("flights & trains")
    assert [entry["agent_id"] for entry in found] == ["a", "b", "c", "d"]
    assert [authorization for _, authorization in seen] == ["Bearer key"] * 3


def test_merchants_never_sends_the_key_to_another_origin_or_round_in_circles() -> None:
    handler, seen = directory_server(
        {"": (["a"], "https://elsewhere.test/base/oanp/v0.1/merchants?after=a")}
    )
    client = ArbiterClient(
        "http://arbiter.test/base", "key", transport=httpx.MockTransport(handler)
    )
    with pytest.raises(ProblemError) as refused:
        client.merchants()
    assert refused.value.code == "bad_link"
    assert len(seen) == 1
    handler, seen = directory_server(
        {
            "": (["a"], "/base/oanp/v0.1/merchants?after=a"),
            "after=a": (["b"], "/base/oanp/v0.1/merchants"),
        }
    )
    client = ArbiterClient(
        "http://arbiter.test/base", "key", transport=httpx.MockTransport(handler)
    )
    with pytest.raises(ProblemError, match="not a new page"):
        client.merchants()
    assert len(seen) == 2


def test_discovery_reads_the_well_known_document() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/.well-known/oanp.json"
        return httpx.Response(200, json={"arbiter_id": "arbiter.test"})

    assert client_with(handler).discovery() == {"arbiter_id": "arbiter.test"}
