"""No character PostgreSQL or HTTP cannot carry reaches a view as a 500: every URL of the
project with NUL in its path or query is refused (400 problem+json under the API, 404 pages
elsewhere), so are header values and cookies holding one, and WebSocket handshakes; JSON
bodies holding NUL are refused where the string is kept as a column and stored escaped where
it is kept inside JSON text. Also: the middleware chain runs without thread hops of its own."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import SyncToAsync
from asgiref.testing import ApplicationCommunicator
from django.conf import settings
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.test import Client, override_settings
from django.urls import URLPattern, URLResolver, get_resolver, path
from django.utils.deprecation import MiddlewareMixin
from django.utils.regex_helper import normalize
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from arbiter_app.models import Session
from oanp.agents.vaults import BuyerVault
from oanp.wire.commitments import encode_salt
from oanp_site.asgi import SyncMiddlewareHandler
from sessions_app.models import MemberRole, Membership
from tests.conftest import LiveServer
from tests.oanp_site.test_transport import exchange
from tests.support.factories.agents import Agent, ClientNegotiation, make_agent, now, post
from tests.support.processes import ROOT

CALLBACK = "/oanp/v0.1/callback"
MACHINE_PREFIXES = ("/oanp/", "/.well-known/", "/healthz", "/readyz", "/metrics")


def routes(patterns: list[Any] | None = None, prefix: str = "") -> Iterator[str]:
    """Every URL pattern of the project, includes followed, as a path whose every parameter
    is ``%(name)s`` (Django's own reading of its patterns, as ``reverse`` uses it)."""
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        # The first form each pattern can take; optional parts are left out.
        shape = normalize(entry.pattern.regex.pattern)[0][0]
        if isinstance(entry, URLResolver):
            yield from routes(entry.url_patterns, prefix + shape)
        else:
            assert isinstance(entry, URLPattern)
            yield "/" + prefix + shape


def fill(route: str, value: str) -> str:
    names = dict.fromkeys(_parameters(route), value)
    return route % names if names else route


def _parameters(route: str) -> list[str]:
    return [part.split(")s", 1)[0] for part in route.split("%(")[1:]]


def nul_urls() -> list[str]:
    """Each route with NUL in each parameter, and with NUL in its query string."""
    urls = set()
    for route in routes():
        if _parameters(route):
            urls.add(fill(route, "a%00b"))
        urls.add(fill(route, "1") + "?q=%00")
    return sorted(urls)


def refused_as_expected(url: str, response: httpx.Response) -> bool:
    if url.startswith(MACHINE_PREFIXES):
        return (
            response.status_code == 400
            and response.headers["content-type"] == "application/problem+json"
            and response.json()["code"] == "invalid_characters"
        )
    return response.status_code == 404 and response.headers["content-type"].startswith("text/html")


@pytest.fixture
def signed_in(transactional_db: None) -> dict[str, str]:
    """An agent's key and an admin's sign-in, so a request that got past the guard would
    reach each view and its queries."""
    agent = make_agent("buyer-guard", "buyer")
    admin = User.objects.create_superuser("guard-admin", "admin@example.com", "pw-guard-12345")
    Membership.objects.create(user=admin, role=MemberRole.ADMIN)
    browser = Client()
    browser.force_login(admin)
    return {**agent.headers, "Cookie": f"sessionid={browser.cookies['sessionid'].value}"}


def log_of(server: LiveServer) -> Path:
    return ROOT / "var" / f"daphne-{server.url.rsplit(':', 1)[1]}.log"


def test_every_url_with_nul_is_refused_never_a_500(
    live_arbiter: LiveServer, signed_in: dict[str, str]
) -> None:
    urls = nul_urls()
    # The walk found the project's own patterns and the admin's, not a handful.
    assert "/oanp/v0.1/sessions/a%00b/log" in urls
    assert "/sessions/a%00b/" in urls
    assert "/healthz?q=%00" in urls
    assert sum(url.startswith("/admin/") for url in urls) > 20
    log = log_of(live_arbiter)
    logged_before = log.stat().st_size
    wrong = []
    with live_arbiter.client(headers=signed_in) as http:
        for url in urls:
            for method in ("GET", "POST"):
                response = http.request(method, url)
                if not refused_as_expected(url, response):
                    wrong.append(f"{method} {url}: {response.status_code}")
    assert wrong == []
    written = log.read_bytes()[logged_before:].decode("utf-8", "replace")
    assert "Traceback" not in written
    # Each line of the request log stays one line, the NUL written as an escape.
    assert "GET /oanp/v0.1/sessions/a\\x00b/log 400" in written


def test_the_same_urls_without_nul_are_answered_by_their_views(
    live_arbiter: LiveServer, signed_in: dict[str, str]
) -> None:
    """The guard refuses what it must and nothing else."""
    with live_arbiter.client(headers=signed_in) as http:
        assert http.get("/oanp/v0.1/sessions/a-b").json()["code"] == "unknown_session"
        assert http.get("/sessions/?q=a").status_code == 200
        assert http.get("/healthz?q=a").status_code == 200


@pytest.mark.parametrize(
    ("path", "header", "value", "status"),
    [
        ("/oanp/v0.1/inbox", "Authorization", "Bearer oanp_\x00", 400),
        ("/oanp/v0.1/inbox", "X-Trace", "a\x01b", 400),
        ("/healthz", "User-Agent", "\x00", 400),
        ("/sessions/", "X-Trace", "a\x00b", 404),
        ("/sessions/", "Cookie", "sessionid=a\x00b", 404),
        ("/sessions/", "Cookie", 'sessionid="\\000"', 404),
    ],
)
def test_a_header_or_cookie_holding_a_control_character_is_refused(
    client: Client, path: str, header: str, value: str, status: int
) -> None:
    # Daphne refuses these itself (below); the guard holds under any server.
    response = client.get(path, headers={header: value})
    assert response.status_code == status
    if status == 400:
        assert response.json()["code"] == "invalid_characters"


@pytest.mark.parametrize("path", ["/oanp/v0.1/inbox", "/sessions/"])
def test_daphne_refuses_a_raw_control_character_in_a_header(
    live_arbiter: LiveServer, path: str
) -> None:
    head = f"GET {path} HTTP/1.1\nHost: localhost\nConnection: close\nX-Trace: a\x00b\n"
    assert exchange(live_arbiter, head)[0] == 400


def test_a_cookie_spelling_nul_as_an_octal_escape_is_refused_under_daphne(
    live_arbiter: LiveServer, transactional_db: None
) -> None:
    # Cookie parsing turns the quoted "\000" into NUL, which the session lookup would query.
    with live_arbiter.client() as http:
        response = http.get("/sessions/", headers={"Cookie": 'sessionid="\\000"'})
    assert response.status_code == 404


def _handshake(server: LiveServer, path: str, cookie: str) -> int:
    """The status of a WebSocket handshake on ``path``: 101 when it opened."""
    url = server.url.replace("http://", "ws://") + path
    headers = {"Cookie": cookie, "Origin": server.url}
    try:
        with connect(url, additional_headers=headers, open_timeout=10):
            return 101
    except InvalidStatus as refused:
        return refused.response.status_code


def test_a_websocket_holding_nul_is_denied_at_the_handshake(
    live_arbiter: LiveServer, signed_in: dict[str, str]
) -> None:
    cookie = signed_in["Cookie"]
    log = log_of(live_arbiter)
    logged_before = log.stat().st_size
    assert _handshake(live_arbiter, "/ws/sessions/", cookie) == 101
    assert _handshake(live_arbiter, "/ws/sessions/a%00b/", cookie) == 403
    assert _handshake(live_arbiter, "/ws/sessions/?q=%00", cookie) == 403
    assert _handshake(live_arbiter, "/ws/sessions/", 'sessionid="\\000"') == 403
    assert "Traceback" not in log.read_bytes()[logged_before:].decode("utf-8", "replace")


# JSON bodies ---------------------------------------------------------------------------------


@pytest.fixture
def parties(db: None) -> tuple[Agent, Agent]:
    return make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")


def test_nul_inside_an_item_is_kept_escaped_and_read_back(
    client: Client, parties: tuple[Agent, Agent]
) -> None:
    """Envelopes are kept as JSON text, where NUL is the escape \\u0000: safe to store."""
    buyer, merchant = parties
    run = ClientNegotiation(client, buyer, merchant)
    run.open(item={"route": "SFO-JFK", "note": "a\x00b"})
    opened = run.log()[0]["envelope"]
    assert opened["payload"]["item"]["note"] == "a\x00b"
    assert "\x00" not in Session.objects.get(session_id=run.session_id).state


@pytest.mark.parametrize(
    ("field", "value"), [("message_id", "m-\x00"), ("session_id", "s-\x00"), ("item", "\ud800")]
)
def test_nul_or_a_surrogate_where_it_would_be_a_column_is_refused(
    client: Client, parties: tuple[Agent, Agent], field: str, value: str
) -> None:
    buyer, merchant = parties
    envelope = ClientNegotiation(client, buyer, merchant).buyer.open(
        session_id="sess-nul",
        merchant_agent_id=merchant.agent_id,
        item={"route": "SFO-JFK"},
        currency="USD",
        max_rounds=5,
        now=now(),
    )
    if field == "item":
        envelope["payload"]["item"] = {"note": value}
    else:
        envelope[field] = value
    response = post(client, buyer, envelope)
    assert response.status_code == 400
    assert response.json()["code"] == "schema_invalid"
    assert not Session.objects.exists()


@pytest.mark.parametrize(
    "reveal",
    [
        {"constraints": {"true_ceiling": "4\x0020"}, "salt": encode_salt(b"\x01" * 32)},
        {"constraints": {"note": "\ud800"}, "salt": encode_salt(b"\x01" * 32)},
        {"constraints": {}, "salt": "\x00"},
        {"constraints": {}, "salt": "\ud800"},
    ],
)
def test_a_reveal_holding_nul_or_a_surrogate_is_refused_and_changes_nothing(
    client: Client, parties: tuple[Agent, Agent], reveal: dict[str, Any]
) -> None:
    buyer, merchant = parties
    run = ClientNegotiation(client, buyer, merchant)
    run.open()
    run.finish()
    path = f"/oanp/v0.1/sessions/{run.session_id}/reveal"
    response = post(client, buyer, json.dumps(reveal), path=path)
    assert 400 <= response.status_code < 500, response.content
    assert Session.objects.get(session_id=run.session_id).reveals == "{}"
    # What the factories' buyer committed to: the refusals left its reveal to be made.
    vault = BuyerVault(true_ceiling=Decimal(420), budget_cap=Decimal(400), urgency="medium")
    genuine = {"constraints": vault.constraints(), "salt": encode_salt(b"\x01" * 32)}
    assert post(client, buyer, genuine, path=path).status_code == 200


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ('{"url": "https://example.com/\\u0000"}', "invalid_characters"),
        ('{"url": "https://example.com/\\ud800"}', "invalid_characters"),
        ('{"url": "https://example.com/a\\u000ab"}', "invalid_characters"),
        ('{"url": "https://example.com/a", "url": "https://example.com/b"}', "malformed_json"),
    ],
)
def test_a_callback_url_that_cannot_be_kept_is_refused(
    client: Client, parties: tuple[Agent, Agent], body: str, code: str
) -> None:
    buyer, _ = parties
    response = client.put(
        CALLBACK, data=body, content_type="application/json", headers=buyer.headers
    )
    assert response.status_code == 400, response.content
    assert response.json()["code"] == code
    assert client.get(CALLBACK, headers=buyer.headers).json()["code"] == "no_callback"


def test_deleting_the_callback_answers_204_without_a_content_type(
    client: Client, parties: tuple[Agent, Agent]
) -> None:
    buyer, _ = parties
    response = client.delete(CALLBACK, headers=buyer.headers)
    assert response.status_code == 204
    assert "Content-Type" not in response


# The middleware chain's threads ---------------------------------------------------------------

#: Where each part of a request ran: (part, thread).
seen: list[tuple[str, int]] = []


class Witness(MiddlewareMixin):
    """Runs either way, as Django's own middleware does; notes the thread of each half."""

    def process_request(self, request: HttpRequest) -> None:
        seen.append(("request", threading.get_ident()))

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        seen.append(("response", threading.get_ident()))
        return response


def witnessed_view(request: HttpRequest) -> HttpResponse:
    seen.append(("view", threading.get_ident()))
    return HttpResponse("ok")


urlpatterns = [path("witnessed", witnessed_view)]
WITNESS = f"{__name__}.Witness"


async def _crossings(middleware: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    """How many times one request to a sync view crossed from the event loop to a thread."""
    count = 0
    original = SyncToAsync.__call__

    async def counted(self: SyncToAsync[Any, Any], *args: Any, **kwargs: Any) -> Any:
        nonlocal count
        count += 1
        return await original(self, *args, **kwargs)

    scope = {
        "type": "http",
        "method": "GET",
        "path": "/witnessed",
        "query_string": b"",
        "headers": [(b"host", b"localhost")],
    }
    with override_settings(MIDDLEWARE=middleware, ROOT_URLCONF=__name__):
        communicator = ApplicationCommunicator(SyncMiddlewareHandler(), scope)
        with monkeypatch.context() as patched:
            patched.setattr(SyncToAsync, "__call__", counted)
            await communicator.send_input({"type": "http.request", "body": b""})
            assert (await communicator.receive_output(10))["status"] == 200
            await communicator.receive_output(10)
            await communicator.wait(10)
    return count


@pytest.mark.asyncio
async def test_the_whole_chain_runs_in_the_views_thread_without_hops_of_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen.clear()
    chain = [WITNESS, *settings.MIDDLEWARE, WITNESS]
    with_chain = await _crossings(chain, monkeypatch)
    assert {part for part, _ in seen} == {"request", "view", "response"}
    assert len({thread for _, thread in seen}) == 1
    assert threading.get_ident() not in {thread for _, thread in seen}
    # Ten middleware, each able to run either way, add no crossing to a request without them.
    assert with_chain == await _crossings([], monkeypatch)


async def _threads_of(handler: SyncMiddlewareHandler, method: str, requests: int) -> set[int]:
    """The threads the view of ``requests`` requests ran on, one request after the other."""
    seen.clear()
    scope = {
        "type": "http",
        "method": method,
        "path": "/witnessed",
        "query_string": b"",
        "headers": [(b"host", b"localhost")],
    }
    for _ in range(requests):
        communicator = ApplicationCommunicator(handler, scope)
        await communicator.send_input({"type": "http.request", "body": b""})
        assert (await communicator.receive_output(10))["status"] == 200
        await communicator.receive_output(10)
        await communicator.wait(10)
    return {thread for part, thread in seen if part == "view"}


@pytest.mark.asyncio
@override_settings(MIDDLEWARE=[], ROOT_URLCONF=__name__)
async def test_a_request_that_cannot_stream_reuses_the_process_threads() -> None:
    """Django starts and ends a thread for each request; a POST takes one of the handler's
    threads instead, while a GET, which may be an event stream, still gets its own."""
    handler = SyncMiddlewareHandler()
    started = threading.Thread.start
    starts = 0

    def counted(self: threading.Thread) -> None:
        nonlocal starts
        starts += 1
        started(self)

    await _threads_of(handler, "POST", 1)  # the first POST starts the thread it runs on
    threading.Thread.start = counted  # type: ignore[method-assign]
    try:
        posts = await _threads_of(handler, "POST", 10)
        assert starts == 0
        assert len(posts) == 1  # one after the other: the same idle thread each time
        gets = await _threads_of(handler, "GET", 3)
        assert starts >= 3  # a thread of its own each (the system may reuse an ended one's id)
        assert not gets & posts
    finally:
        threading.Thread.start = started  # type: ignore[method-assign]
