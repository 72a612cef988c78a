"""Deliveries on a real Celery worker to real HTTP servers on this machine: the ACP handoff of
an agreement, and an agent's callback receiving every entry of its session, each retried,
recorded and signed as docs/protocol.md §15 says."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import rfc8785
from prometheus_client.parser import text_string_to_metric_families

from arbiter_app import selectors, services
from arbiter_app.deliveries import outbound
from arbiter_app.models import AgentCallback, CallbackCursor, Handoff, HandoffTarget, Session
from sessions_app import actions
from sessions_app.models import AuditEvent, MemberRole
from sessions_app.tenancy import scope_of
from tests.conftest import Worker
from tests.support.factories.accounts import member, signed_in
from tests.support.factories.agents import Agent, ClientNegotiation
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

ITEM = {"route": "SFO-JFK", "date": "2026-04-28", "sku": "SFOJFK-0428"}


def signed_by(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """Standard Webhooks verification, written out as a receiver would."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    given = [s.removeprefix("v1,") for s in headers["webhook-signature"].split()]
    fresh = abs(time.time() - int(headers["webhook-timestamp"])) < 300
    return fresh and any(hmac.compare_digest(expected, g) for g in given)


def acp_signed_by(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """ACP's Signature and Timestamp, verified as a merchant would (docs/protocol.md): the
    unpadded base64url HMAC-SHA256 of ``{Timestamp}.{body}``, body canonical JSON, the
    timestamp RFC 3339 and within five minutes."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    stamp = headers["timestamp"]
    digest = hmac.new(key, stamp.encode() + b"." + body, hashlib.sha256).digest()
    expected = base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
    sent = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    fresh = abs(time.time() - sent.timestamp()) < 300
    canonical = rfc8785.dumps(json.loads(body)) == body
    return fresh and canonical and hmac.compare_digest(expected, headers["signature"])


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: bytes


Reply = tuple[int, dict[str, str], bytes]


@dataclass
class Receiver:
    """An HTTP server on 127.0.0.1 that records every POST and answers with ``answer``."""

    answer: Callable[[Request], Reply]
    requests: list[Request] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                receiver.requests.append(request)
                status, headers, reply = receiver.answer(request)
                # A sender killed while it waited is gone: its answer has nowhere to go.
                with contextlib.suppress(ConnectionError):
                    self.send_response(status)
                    for name, value in {"Content-Type": "application/json", **headers}.items():
                        self.send_header(name, value)
                    self.send_header("Content-Length", str(len(reply)))
                    self.end_headers()
                    self.wfile.write(reply)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        # A short poll: shutdown() waits for the loop's next look, 0.5 s by default, per test.
        serve = partial(self.server.serve_forever, poll_interval=0.02)
        threading.Thread(target=serve, daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receivers() -> Iterator[Callable[[Callable[[Request], Reply]], Receiver]]:
    started: list[Receiver] = []

    def start(answer: Callable[[Request], Reply]) -> Receiver:
        started.append(Receiver(answer).start())
        return started[-1]

    yield start
    for receiver in started:
        receiver.stop()


@pytest.fixture(autouse=True)
def private_allowed(settings: Any, worker_env: dict[str, str]) -> None:
    # The worker's environment allows loopback targets too (tests/conftest.py), and its lease
    # is this process's too: a redeliver made here judges the worker's attempts by it.
    settings.OANP_ALLOW_PRIVATE_TARGETS = True
    for name in ("OANP_DELIVERY_TIMEOUT_SECONDS", "OANP_DELIVERY_LEASE_MARGIN_SECONDS"):
        setattr(settings, name, float(worker_env[name]))


@dataclass
class Hold:
    """Keeps a receiver's answer back until the test lets it go, so the sender is known to
    wait inside its POST: the moment a worker is killed is chosen, not caught."""

    reached: threading.Event = field(default_factory=threading.Event)
    released: threading.Event = field(default_factory=threading.Event)

    def __call__(self) -> None:
        self.reached.set()
        self.released.wait(60)


def kill_inside_the_post(worker: Worker, hold: Hold, while_dead: Callable[[], None]) -> None:
    """SIGKILL ``worker`` while it waits for the answer ``hold`` keeps back, check what it left
    with ``while_dead``, then start it again."""
    wait_for(hold.reached.is_set, 15, message="the POST never reached the receiver")
    try:
        worker.kill()
        while_dead()
    finally:
        hold.released.set()
        worker.start()


def deliveries_counted(client: Any, kind: str, outcome: str) -> float:
    """``oanp_deliveries_total{kind, outcome}`` as /metrics adds it up over every process."""
    text = client.get("/metrics").content.decode()
    return sum(
        sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == "oanp_deliveries_total"
        and sample.labels == {"kind": kind, "outcome": outcome}
    )


def found_abandoned(error: str) -> datetime:
    """When the attempt recorded with ``error`` was found abandoned, as the error says."""
    prefix = "the worker stopped before an answer; found abandoned at "
    assert error.startswith(prefix), error
    return datetime.fromisoformat(error.removeprefix(prefix))


def lease_end(started_at: datetime) -> datetime:
    """The end of the lease of an attempt started at ``started_at``, to the second, as an
    attempt's error writes it."""
    return (started_at + outbound.lease()).replace(microsecond=0)


class Merchant:
    """A merchant's ACP server: checks the key, the signature and the idempotency key, and
    creates one checkout per idempotency key, answering as ``script`` says for each POST
    (``hang``: the checkout is made, and the answer held back by ``hold``)."""

    def __init__(self, script: list[str], unit_amount: int | None = None) -> None:
        self.script = script
        self.unit_amount = unit_amount
        self.secret = ""
        self.checkouts: dict[str, dict[str, Any]] = {}
        self.hold = Hold()

    def __call__(self, request: Request) -> Reply:
        step = self.script.pop(0) if self.script else "ok"
        headers, key = request.headers, request.headers.get("idempotency-key", "")
        if (
            request.path != "/acp/checkout_sessions"
            or headers.get("authorization") != "Bearer acp_live_123"
            or headers.get("api-version") != "2026-04-17"
            or not signed_by(self.secret, headers, request.body)
            or not acp_signed_by(self.secret, headers, request.body)
        ):
            return 401, {}, b'{"type": "invalid_request", "code": "unauthorized"}'
        body = json.loads(request.body)
        if key != f"oanp-{body['quote_id']}":
            return 400, {}, b'{"type": "invalid_request", "code": "idempotency_key"}'
        if step.startswith("4"):
            return int(step), {}, b'{"type": "invalid_request"}'
        if key not in self.checkouts:
            line = body["line_items"][0]
            self.checkouts[key] = {
                "id": f"cs_{len(self.checkouts) + 1}",
                "status": "ready_for_payment",
                "currency": body["currency"],
                "line_items": [
                    {
                        "id": "li_1",
                        "item": {"id": line["id"]},
                        "unit_amount": self.unit_amount or line["unit_amount"],
                    }
                ],
            }
        if step == "hang":
            self.hold()
        if step.startswith("5"):  # the checkout is made, but the answer is an error
            retry_after = {"Retry-After": "2"} if step == "503" else {}
            return int(step), retry_after, b'{"type": "processing_error"}'
        return 201, {}, json.dumps(self.checkouts[key]).encode()


def agree(client: Any, buyer: Agent, merchant: Agent, session_id: str) -> None:
    run = ClientNegotiation(client, buyer, merchant, session_id=session_id)
    run.open(item=ITEM)
    assert run.finish()[-1]["envelope"]["type"] == "session.agree"


def handoff_of(session_id: str) -> Handoff:
    return Handoff.objects.get(session__session_id=session_id)


def attempts_of(handoff: Handoff) -> list[tuple[int, int | None, str]]:
    rows = handoff.attempt_log.order_by("number").values_list("number", "status_code", "outcome")
    return list(rows)


def handoff_to(
    receivers: Any, merchant: Agent, script: list[str], unit_amount: int | None = None
) -> tuple[Merchant, Receiver]:
    acp = Merchant(script, unit_amount)
    server = receivers(acp)
    acp.secret = services.configure_handoff(
        merchant_agent_id=merchant.agent_id, endpoint=f"{server.url}/acp", api_key="acp_live_123"
    ).secret
    return acp, server


def test_a_handoff_is_retried_until_the_merchant_takes_it_once(
    celery_worker_process: Worker, client: Any, buyer: Agent, merchant: Agent, receivers: Any
) -> None:
    # The first answer comes after the checkout was made: only the idempotency key keeps the
    # retries from making another.
    acp, server = handoff_to(receivers, merchant, ["500", "502"])
    agree(client, buyer, merchant, "sess-acp-retry")

    def delivered() -> bool:
        """the handoff is delivered"""
        return handoff_of("sess-acp-retry").state == "delivered"

    wait_for(delivered, 15)
    handoff = handoff_of("sess-acp-retry")
    assert attempts_of(handoff) == [(1, 500, "retry"), (2, 502, "retry"), (3, 201, "delivered")]
    assert len(server.requests) == 3
    assert len(acp.checkouts) == 1
    assert handoff.checkout_id == "cs_1"
    assert not handoff.flagged
    assert {r.body for r in server.requests} == {handoff.body.encode()}  # the same bytes
    assert {r.headers["idempotency-key"] for r in server.requests} == {"oanp-sess-acp-retry"}
    sent = json.loads(server.requests[0].body)
    agreement = Session.objects.get(session_id="sess-acp-retry").entries.get(type="session.agree")
    payload = json.loads(agreement.envelope)["payload"]
    assert sent["line_items"] == [{"id": "SFOJFK-0428", "unit_amount": 34000}]
    assert (sent["currency"], sent["quote_id"]) == ("usd", "sess-acp-retry")
    assert sent["metadata"]["oanp_agreement_jws"] == payload["signature"]
    assert sent["metadata"]["oanp_session_digest"] == payload["session_digest"]
    assert handoff.attempt_log.get(number=3).response_excerpt.startswith('{"id": "cs_1"')


def test_a_refusal_stops_the_retries(
    celery_worker_process: Worker, client: Any, buyer: Agent, merchant: Agent, receivers: Any
) -> None:
    acp, _ = handoff_to(receivers, merchant, ["400"])
    agree(client, buyer, merchant, "sess-acp-400")
    wait_for(lambda: handoff_of("sess-acp-400").state == "failed", 15)
    handoff = handoff_of("sess-acp-400")
    assert attempts_of(handoff) == [(1, 400, "rejected")]
    assert handoff.next_attempt_at is None
    assert not acp.checkouts


def test_a_checkout_at_another_price_is_flagged(
    celery_worker_process: Worker, client: Any, buyer: Agent, merchant: Agent, receivers: Any
) -> None:
    handoff_to(receivers, merchant, [], unit_amount=35000)
    agree(client, buyer, merchant, "sess-acp-price")
    wait_for(lambda: handoff_of("sess-acp-price").state == "delivered", 15)
    handoff = handoff_of("sess-acp-price")
    assert handoff.flagged
    assert handoff.flag_reason == "the checkout's unit amount 35000 is not the agreed 34000"
    assert attempts_of(handoff) == [(1, 201, "delivered")]


def test_a_gone_endpoint_disables_the_target(
    celery_worker_process: Worker, client: Any, buyer: Agent, merchant: Agent, receivers: Any
) -> None:
    handoff_to(receivers, merchant, ["410"])
    agree(client, buyer, merchant, "sess-acp-410")
    wait_for(lambda: handoff_of("sess-acp-410").state == "disabled", 15)
    assert attempts_of(handoff_of("sess-acp-410")) == [(1, 410, "gone")]
    target = HandoffTarget.objects.get(merchant_agent_id=merchant.agent_id)
    assert target.disabled_at is not None
    assert "410" in target.disabled_reason


def test_a_retry_pending_when_the_worker_dies_is_made_after_it_restarts(
    celery_worker_process: Worker, client: Any, buyer: Agent, merchant: Agent, receivers: Any
) -> None:
    # 503 with Retry-After: 2 keeps the retry pending long enough to kill the worker first.
    acp, server = handoff_to(receivers, merchant, ["503"])
    agree(client, buyer, merchant, "sess-acp-crash")
    wait_for(lambda: attempts_of(handoff_of("sess-acp-crash")) == [(1, 503, "retry")], 15)
    celery_worker_process.kill()
    try:
        assert handoff_of("sess-acp-crash").state == "pending"
    finally:
        celery_worker_process.start()
    wait_for(lambda: handoff_of("sess-acp-crash").state == "delivered", timeout=20)
    assert attempts_of(handoff_of("sess-acp-crash")) == [(1, 503, "retry"), (2, 201, "delivered")]
    assert len(server.requests) == 2
    assert len(acp.checkouts) == 1


def test_an_attempt_whose_worker_is_killed_inside_the_post_is_abandoned_and_redelivered(
    celery_worker_process: Worker, client: Any, buyer: Agent, merchant: Agent, receivers: Any
) -> None:
    session_id = "sess-acp-killed"
    counted = deliveries_counted(client, "handoff", "abandoned")
    acp, server = handoff_to(receivers, merchant, ["hang"])
    agree(client, buyer, merchant, session_id)

    def left_running() -> None:
        assert attempts_of(handoff_of(session_id)) == [(1, None, "")]
        # Waiting for its retry, as the overview counts it.
        assert selectors.delivery_backlog().handoffs_retrying == 1

    kill_inside_the_post(celery_worker_process, acp.hold, left_running)

    def delivered() -> bool:
        """the handoff is delivered after its lease ran out"""
        return handoff_of(session_id).state == "delivered"

    wait_for(delivered, 30)
    handoff = handoff_of(session_id)
    assert attempts_of(handoff) == [(1, None, "abandoned"), (2, 201, "delivered")]
    dead = handoff.attempt_log.get(number=1)
    assert found_abandoned(dead.error) >= lease_end(dead.started_at)
    assert (dead.latency_ms, dead.response_excerpt) == (None, "")
    # The merchant made its checkout on the first POST; the retry read it back, no second one.
    assert len(server.requests) == 2
    assert {r.headers["idempotency-key"] for r in server.requests} == {f"oanp-{session_id}"}
    assert len(acp.checkouts) == 1
    assert handoff.checkout_id == "cs_1"
    assert deliveries_counted(client, "handoff", "abandoned") == counted + 1
    assert selectors.delivery_backlog().handoffs_retrying == 0

    # An operator's redeliver (the audited action behind the deliveries' resend; the pages
    # offer it only for a handoff not cleanly delivered) is taken and makes an attempt.
    olga = member("olga", MemberRole.OPERATOR)
    operator = signed_in(olga)
    page = f"/sessions/{session_id}/"
    scope = scope_of(olga)
    assert scope is not None
    actions.redeliver_handoff(actor=olga, scope=scope, session_id=session_id)
    event = AuditEvent.objects.get(action="handoff.redeliver", target=session_id)
    assert event.detail == {"redelivered": True, "refused": ""}

    def redelivered() -> bool:
        """the redelivery's attempt is delivered"""
        handoff = handoff_of(session_id)
        return handoff.state == "delivered" and handoff.attempt_log.count() == 3

    wait_for(redelivered, 15)
    assert len(server.requests) == 3
    assert {r.headers["idempotency-key"] for r in server.requests} == {f"oanp-{session_id}"}
    assert len(acp.checkouts) == 1
    html = operator.get(page).content.decode()
    table = html.split('id="handoff-attempts"', 1)[1].split("</table>", 1)[0]
    first, second, third = table.split("<tbody>", 1)[1].split("<tr>")[1:]
    assert ">abandoned</span>" in first
    assert "the worker stopped before an answer" in first
    assert "<td>delivered</td>" in second
    assert "<td>delivered</td>" in third


# Callbacks -------------------------------------------------------------------------------------


def register(client: Any, agent: Agent, url: str) -> str:
    response = client.put(
        "/oanp/v0.1/callback",
        data=json.dumps({"url": url}),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {agent.api_key}",
    )
    assert response.status_code == 200, response.content
    secret: str = response.json()["secret"]
    return secret


def test_an_agent_receives_every_entry_once_in_order_through_a_failure(
    celery_worker_process: Worker, client: Any, buyer: Agent, merchant: Agent, receivers: Any
) -> None:
    failed: list[int] = []

    def agent_server(request: Request) -> Reply:
        seq = json.loads(request.body)["seq"]
        if seq == 3 and not failed:
            failed.append(seq)
            return 500, {}, b"busy"
        return 204, {}, b""

    server = receivers(agent_server)
    secret = register(client, buyer, f"{server.url}/hooks/oanp")
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-callback")
    run.open()
    log = run.finish()

    def caught_up() -> bool:
        """the callback received the whole log"""
        cursor = CallbackCursor.objects.filter(session__session_id="sess-callback").first()
        return cursor is not None and cursor.delivered_seq == len(log)

    wait_for(caught_up, 15)
    assert all(signed_by(secret, r.headers, r.body) for r in server.requests)
    assert {r.path for r in server.requests} == {"/hooks/oanp"}
    seqs = [json.loads(r.body)["seq"] for r in server.requests]
    assert seqs == [1, 2, 3, *range(3, len(log) + 1)]  # 3 twice: failed once, then taken
    # Each delivered body is the entry exactly as the log serves it; one id per entry.
    assert [json.loads(r.body) for r in server.requests[3:]] == log[2:]
    ids = [r.headers["webhook-id"] for r in server.requests]
    assert ids[2] == ids[3] == "oanp-sess-callback-3"
    assert len(set(ids)) == len(log)
    cursor = CallbackCursor.objects.get(session__session_id="sess-callback")
    assert cursor.attempt_log.count() == len(log) + 1
    assert list(cursor.attempt_log.filter(seq=3).order_by("number").values_list("status_code")) == [
        (500,),
        (204,),
    ]


def test_a_gone_callback_is_disabled(
    celery_worker_process: Worker, client: Any, buyer: Agent, merchant: Agent, receivers: Any
) -> None:
    server = receivers(lambda request: (410, {}, b""))
    register(client, merchant, f"{server.url}/gone")
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-callback-gone")
    run.open()

    def disabled() -> bool:
        """the merchant's callback is disabled"""
        return AgentCallback.objects.filter(disabled_at__isnull=False).exists()

    wait_for(disabled, 15)
    run.finish()
    assert len(server.requests) == 1  # the session.open naming the merchant, then nothing
    callback = AgentCallback.objects.get()
    assert "410" in callback.disabled_reason
    read = client.get("/oanp/v0.1/callback", HTTP_AUTHORIZATION=f"Bearer {merchant.api_key}")
    assert read.json()["disabled_at"] is not None


def test_a_callback_attempt_whose_worker_is_killed_is_abandoned_and_its_entry_sent_again(
    celery_worker_process: Worker, client: Any, buyer: Agent, merchant: Agent, receivers: Any
) -> None:
    counted = deliveries_counted(client, "callback", "abandoned")
    hold = Hold()

    def agent_server(request: Request) -> Reply:
        if not hold.reached.is_set():  # the first POST waits for the kill
            hold()
        return 204, {}, b""

    server = receivers(agent_server)
    register(client, buyer, f"{server.url}/hooks/oanp")
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-callback-killed")
    run.open()

    def left_running() -> None:
        cursor = CallbackCursor.objects.get(session__session_id="sess-callback-killed")
        assert list(cursor.attempt_log.values_list("seq", "outcome")) == [(1, "")]

    kill_inside_the_post(celery_worker_process, hold, left_running)
    log = run.finish()

    def caught_up() -> bool:
        """the callback received the whole log after the lease ran out"""
        cursor = CallbackCursor.objects.get(session__session_id="sess-callback-killed")
        return cursor.delivered_seq == len(log)

    wait_for(caught_up, 30)
    seqs = [json.loads(r.body)["seq"] for r in server.requests]
    assert seqs == [1, *range(1, len(log) + 1)]  # 1 twice: its first POST lost its worker
    assert server.requests[0].headers["webhook-id"] == server.requests[1].headers["webhook-id"]
    cursor = CallbackCursor.objects.get(session__session_id="sess-callback-killed")
    first = cursor.attempt_log.filter(seq=1).order_by("started_at")
    assert list(first.values_list("status_code", "outcome")) == [
        (None, "abandoned"),
        (204, "delivered"),
    ]
    assert found_abandoned(first[0].error) >= lease_end(first[0].started_at)
    assert deliveries_counted(client, "callback", "abandoned") == counted + 1
