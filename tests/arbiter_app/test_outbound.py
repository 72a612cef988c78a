"""Where the arbiter may send, how it signs, what it sends on agreement, and how targets and
callbacks are configured: everything about deliveries that needs no worker."""

from __future__ import annotations

import base64
import io
import ipaddress
import json
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import transaction
from django.urls import reverse

from arbiter_app import services
from arbiter_app.deliveries import callbacks, outbound
from arbiter_app.deliveries import handoff as handoffs
from arbiter_app.deliveries.handoff import read_checkout
from arbiter_app.deliveries.outbound import AttemptOutcome, TargetNotAllowed, check_target, classify
from arbiter_app.models import (
    AgentCallback,
    AgentCredential,
    CallbackCursor,
    Handoff,
    HandoffTarget,
    Session,
)
from oanp.wire.envelope import parse_envelope
from tests.support.factories.agents import Agent, ClientNegotiation

pytestmark = pytest.mark.django_db

CALLBACK = "/oanp/v0.1/callback"


@pytest.fixture
def private_refused(settings: Any) -> None:
    settings.OANP_ALLOW_PRIVATE_TARGETS = False


# SSRF ------------------------------------------------------------------------------------------

REFUSED = [
    "http://127.0.0.1:8000/acp",
    "http://localhost/acp",
    "http://10.1.2.3/acp",
    "http://172.16.0.1/acp",
    "http://192.168.1.1/acp",
    "http://169.254.169.254/latest/meta-data",
    "http://100.64.0.1/acp",
    "http://0.0.0.0/acp",
    "http://224.0.0.1/acp",
    "http://240.0.0.1/acp",
    "http://[::1]/acp",
    "http://[fe80::1]/acp",
    "http://[fc00::1]/acp",
    "http://[::ffff:127.0.0.1]/acp",
    "http://[::ffff:10.0.0.1]/acp",
    "http://[::ffff:169.254.169.254]/acp",
    "ftp://93.184.215.14/acp",
    "file:///etc/passwd",
    "http:///acp",
    "http://user:pass@93.184.215.14/acp",
]


@pytest.mark.usefixtures("private_refused")
@pytest.mark.parametrize("url", REFUSED)
def test_a_target_off_the_public_internet_is_refused(url: str) -> None:
    with pytest.raises(TargetNotAllowed) as refused:
        check_target(url)
    assert refused.value.code == "target_not_allowed"
    assert isinstance(refused.value, ValueError)


@pytest.mark.usefixtures("private_refused")
@pytest.mark.parametrize(
    "url", ["http://93.184.215.14/acp", "https://8.8.8.8:8443/x", "https://[2606:4700::1111]/"]
)
def test_a_public_address_is_allowed(url: str) -> None:
    check_target(url)


@pytest.mark.usefixtures("private_allowed")
def test_private_targets_are_allowed_only_when_the_setting_says_so() -> None:
    check_target("http://127.0.0.1:9/acp")
    with pytest.raises(TargetNotAllowed):
        check_target("gopher://127.0.0.1/")


@pytest.mark.usefixtures("private_refused")
def test_configuring_a_private_handoff_target_is_refused(merchant: Agent) -> None:
    with pytest.raises(ValueError, match="not a public address"):
        services.configure_handoff(
            merchant_agent_id=merchant.agent_id, endpoint="http://10.0.0.7/acp", api_key="k"
        )
    out = io.StringIO()
    with pytest.raises(CommandError, match="not a public address"):
        call_command(
            "configure_handoff",
            "--merchant-agent-id",
            merchant.agent_id,
            "--endpoint",
            "http://169.254.169.254/",
            "--api-key",
            "k",
            stdout=out,
        )
    assert not HandoffTarget.objects.exists()


@pytest.mark.usefixtures("private_refused")
@pytest.mark.parametrize("url", ["http://127.0.0.1:9/hook", "http://[::ffff:10.0.0.1]/hook"])
def test_registering_a_private_callback_is_refused_with_a_problem(
    client: Any, buyer: Agent, url: str
) -> None:
    response = client.put(
        CALLBACK, data=json.dumps({"url": url}), content_type="application/json", **_auth(buyer)
    )
    assert response.status_code == 422
    assert response["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "target_not_allowed"
    assert not AgentCallback.objects.exists()


# Signatures and answers ------------------------------------------------------------------------


def test_signatures_follow_standard_webhooks() -> None:
    # The published test vector of the Standard Webhooks libraries.
    headers = outbound.signature_headers(
        secret="whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        message_id="msg_p5jXN8AQM9LWM0D4loKWxJek",
        body=b'{"test": 2432232314}',
        timestamp=1614265330,
    )
    assert headers == {
        "webhook-id": "msg_p5jXN8AQM9LWM0D4loKWxJek",
        "webhook-timestamp": "1614265330",
        "webhook-signature": "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
    }


def test_a_new_secret_is_whsec_and_32_random_bytes() -> None:
    secret = outbound.new_webhook_secret()
    outbound.check_webhook_secret(secret)
    assert len(base64.b64decode(secret.removeprefix("whsec_"))) == 32
    assert secret != outbound.new_webhook_secret()
    for bad in ("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!", "whsec_c2hvcnQ="):
        with pytest.raises(ValueError, match="secret"):
            outbound.check_webhook_secret(bad)


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, AttemptOutcome.DELIVERED),
        (201, AttemptOutcome.DELIVERED),
        (204, AttemptOutcome.DELIVERED),
        (408, AttemptOutcome.RETRY),
        (409, AttemptOutcome.RETRY),
        (429, AttemptOutcome.RETRY),
        (500, AttemptOutcome.RETRY),
        (503, AttemptOutcome.RETRY),
        (410, AttemptOutcome.GONE),
        (400, AttemptOutcome.REJECTED),
        (401, AttemptOutcome.REJECTED),
        (404, AttemptOutcome.REJECTED),
        (422, AttemptOutcome.REJECTED),
        (301, AttemptOutcome.REJECTED),
    ],
)
def test_answers_are_classified_as_protocol_section_8_says(
    status: int, outcome: AttemptOutcome
) -> None:
    assert classify(status) is outcome


def test_retries_double_up_to_an_hour_and_span_about_a_day(settings: Any) -> None:
    settings.OANP_DELIVERY_RETRY_BASE_SECONDS = 30
    settings.OANP_DELIVERY_RETRY_CAP_SECONDS = 3600
    settings.OANP_DELIVERY_MAX_ATTEMPTS = 31
    waits = [outbound.retry_wait(n) for n in range(1, 31)]
    assert waits[:4] == [30, 60, 120, 240]
    assert max(w for w in waits if w is not None) == 3600
    total = sum(w for w in waits if w is not None)
    assert 23 * 3600 < total < 25 * 3600
    assert outbound.retry_wait(31) is None
    assert outbound.retry_wait(1, asked=600) == 600  # Retry-After asks for longer
    assert outbound.retry_wait(1, asked=10**6) == 3600  # within the cap


# The handoff on agreement ----------------------------------------------------------------------


def _auth(agent: Agent) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {agent.api_key}"}


def _configure(merchant: Agent) -> services.Configured:
    return services.configure_handoff(
        merchant_agent_id=merchant.agent_id,
        endpoint="http://127.0.0.1:9/acp",
        api_key="acp_live_123",
    )


@pytest.mark.usefixtures("private_allowed")
def test_an_agreement_writes_its_handoff_with_the_checkout_body(
    client: Any, buyer: Agent, merchant: Agent
) -> None:
    _configure(merchant)
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-body")
    run.open()
    log = run.finish()
    agree = log[-1]["envelope"]
    assert agree["type"] == "session.agree"
    handoff = Handoff.objects.get(session__session_id="sess-body")
    assert (handoff.state, handoff.attempts) == ("pending", 0)
    body = json.loads(handoff.body)
    item_id = body["line_items"][0]["id"]
    assert item_id.startswith("oanp-item-")
    assert body == {
        "line_items": [{"id": item_id, "unit_amount": 34000}],
        "currency": "usd",
        "capabilities": {},
        "quote_id": "sess-body",
        "metadata": {
            "oanp_session_id": "sess-body",
            "oanp_session_digest": agree["payload"]["session_digest"],
            "oanp_agreement_jws": agree["payload"]["signature"],
            "oanp_kid": agree["payload"]["kid"],
            "oanp_jwks_uri": agree["payload"]["jwks_uri"],
        },
    }


@pytest.mark.usefixtures("private_allowed")
def test_the_item_sku_names_the_line_item(client: Any, buyer: Agent, merchant: Agent) -> None:
    _configure(merchant)
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-sku")
    run.open(item={"route": "SFO-JFK", "sku": "SFOJFK-0428", "id": 7})
    run.finish()
    body = json.loads(Handoff.objects.get(session__session_id="sess-sku").body)
    assert body["line_items"][0]["id"] == "SFOJFK-0428"


def test_no_target_no_handoff(client: Any, buyer: Agent, merchant: Agent) -> None:
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-no-target")
    run.open()
    run.finish()
    assert Session.objects.get(session_id="sess-no-target").phase == "AGREED"
    assert not Handoff.objects.exists()


@pytest.mark.usefixtures("private_allowed")
def test_the_handoff_rolls_back_with_the_agreement(
    client: Any, buyer: Agent, merchant: Agent
) -> None:
    _configure(merchant)
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-rollback")
    run.open()
    run.run_until("offer.accept")
    key, envelope = run.peek()
    agent = AgentCredential.objects.get(agent_id=key.agent_id, role=key.role)

    class CommitFailed(Exception):
        pass

    def agree_then_fail() -> None:
        with transaction.atomic():
            services.receive_envelope(
                agent=agent, envelope=parse_envelope(json.dumps(envelope).encode())
            )
            assert Handoff.objects.filter(session__session_id="sess-rollback").exists()
            raise CommitFailed

    with pytest.raises(CommitFailed):
        agree_then_fail()
    assert not Handoff.objects.exists()
    assert Session.objects.get(session_id="sess-rollback").phase == "NEGOTIATING"


def test_the_checkout_must_carry_the_agreed_unit_amount() -> None:
    sent = json.dumps({"line_items": [{"id": "x", "unit_amount": 34000}], "currency": "usd"})

    def read(checkout: Any) -> tuple[str, str]:
        return read_checkout(sent, json.dumps(checkout).encode())

    assert read({"id": "cs_1", "line_items": [{"unit_amount": 34000}]}) == ("cs_1", "")
    base = {"item": {"id": "x", "quantity": 1}, "base_amount": 34000}
    assert read({"id": "cs_2", "currency": "usd", "line_items": [base]}) == ("cs_2", "")
    assert "33900 is not the agreed 34000" in read({"line_items": [{"unit_amount": 33900}]})[1]
    twice = {"item": {"id": "x", "quantity": 2}, "base_amount": 68000}
    assert "no unit amount" in read({"line_items": [twice]})[1]
    assert "no line item" in read({"id": "cs_3"})[1]
    assert "currency" in read({"currency": "EUR", "line_items": [{"unit_amount": 34000}]})[1]
    assert read_checkout(sent, b"<html>")[1] == "the checkout response is not JSON"


@pytest.mark.usefixtures("private_allowed")
def test_an_operator_redelivers_a_failed_handoff_from_the_admin(
    admin_client: Any, client: Any, buyer: Agent, merchant: Agent
) -> None:
    _configure(merchant)
    run = ClientNegotiation(client, buyer, merchant, session_id="sess-redeliver")
    run.open()
    run.finish()
    Handoff.objects.update(state="failed", attempts=31, next_attempt_at=None)
    handoff = Handoff.objects.get()
    changelist = reverse("admin:arbiter_app_handoff_changelist")
    answer = admin_client.post(
        changelist, {"action": "redeliver", "_selected_action": [handoff.pk]}, follow=True
    )
    assert answer.status_code == 200
    handoff.refresh_from_db()
    assert (handoff.state, handoff.attempts) == ("pending", 0)
    assert handoff.next_attempt_at is not None
    HandoffTarget.objects.update(disabled_at=handoff.created_at, disabled_reason="answered 410")
    with pytest.raises(ValueError, match="configure it again first"):
        services.redeliver_handoff(handoff=handoff)


# Configuration ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("private_allowed")
def test_the_command_prints_the_webhook_secret_once_and_keeps_it_encrypted(
    merchant: Agent,
) -> None:
    out = io.StringIO()
    call_command(
        "configure_handoff",
        "--merchant-agent-id",
        merchant.agent_id,
        "--endpoint",
        "http://127.0.0.1:9/acp",
        "--api-key",
        "acp_live_123",
        stdout=out,
    )
    printed = json.loads(out.getvalue())
    assert printed["merchant_agent_id"] == merchant.agent_id
    secret = printed["webhook_secret"]
    outbound.check_webhook_secret(secret)
    target = HandoffTarget.objects.get(merchant_agent_id=merchant.agent_id)
    assert secret.encode() not in bytes(target.webhook_secret_encrypted)
    assert b"acp_live_123" not in bytes(target.api_key_encrypted)
    assert outbound.unseal(target.webhook_secret_encrypted) == secret
    assert outbound.unseal(target.api_key_encrypted) == "acp_live_123"
    # Configuring again replaces the target; a given secret is kept as given.
    given = "whsec_" + base64.b64encode(b"k" * 32).decode()
    again = services.configure_handoff(
        merchant_agent_id=merchant.agent_id,
        endpoint="http://127.0.0.1:9/acp2",
        api_key="acp_live_456",
        webhook_secret=given,
    )
    assert again.secret == given
    assert HandoffTarget.objects.get().endpoint == "http://127.0.0.1:9/acp2"


@pytest.mark.usefixtures("private_allowed")
def test_an_agent_registers_reads_and_removes_its_callback(client: Any, buyer: Agent) -> None:
    assert client.get(CALLBACK, **_auth(buyer)).json()["code"] == "no_callback"
    put = client.put(
        CALLBACK,
        data=json.dumps({"url": "http://127.0.0.1:9/hook"}),
        content_type="application/json",
        **_auth(buyer),
    )
    assert put.status_code == 200, put.content
    secret = put.json()["secret"]
    assert put.json()["url"] == "http://127.0.0.1:9/hook"
    outbound.check_webhook_secret(secret)
    read = client.get(CALLBACK, **_auth(buyer))
    assert read.status_code == 200
    assert read.json() == {
        "url": "http://127.0.0.1:9/hook",
        "disabled_at": None,
        "disabled_reason": None,
    }
    stored = AgentCallback.objects.get(agent_id=buyer.agent_id, role="buyer")
    assert outbound.unseal(stored.secret_encrypted) == secret
    again = client.put(
        CALLBACK,
        data=json.dumps({"url": "http://127.0.0.1:9/hook"}),
        content_type="application/json",
        **_auth(buyer),
    )
    assert again.json()["secret"] != secret  # a fresh secret each time
    assert client.delete(CALLBACK, **_auth(buyer)).status_code == 204
    assert client.get(CALLBACK, **_auth(buyer)).status_code == 404
    assert client.delete(CALLBACK, **_auth(buyer)).status_code == 204


@pytest.mark.parametrize(
    ("body", "code"),
    [(b"{", "malformed_json"), (b'{"uri": "x"}', "schema_invalid"), (b"[1]", "schema_invalid")],
)
def test_a_bad_callback_body_is_refused(client: Any, buyer: Agent, body: bytes, code: str) -> None:
    response = client.put(CALLBACK, data=body, content_type="application/json", **_auth(buyer))
    assert response.status_code == 400
    assert response.json()["code"] == code


def test_the_callback_needs_a_key(client: Any) -> None:
    assert client.get(CALLBACK).status_code == 401


# DNS rebinding: the connection goes to the address checked --------------------------------------

#: A name whose DNS the test plays, and a public address it may answer (never connected to).
NAME = "shop.rebind.test"
PUBLIC = "93.184.216.34"
SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()


@dataclass
class Dns:
    """The DNS of :data:`NAME` as this process sees it: each lookup gets the next answer (the
    last one repeats; an empty one is "no such name"); every other name is the system's.
    Every connection is recorded, and one to an address off this machine is refused on the
    spot: nothing leaves 127.0.0.0/8."""

    answers: list[tuple[str, ...]] = field(default_factory=list)
    lookups: int = 0
    connections: list[tuple[str, int]] = field(default_factory=list)


@pytest.fixture
def dns(monkeypatch: pytest.MonkeyPatch) -> Dns:
    played = Dns()
    system_lookup, system_connect = socket.getaddrinfo, socket.create_connection

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        if host != NAME:
            return system_lookup(host, port, *args, **kwargs)
        answer = played.answers[min(played.lookups, len(played.answers) - 1)]
        played.lookups += 1
        if not answer:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, port, 0, 0))
            if ":" in a
            else (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (a, port))
            for a in answer
        ]

    def create_connection(address: tuple[Any, ...], *args: Any, **kwargs: Any) -> socket.socket:
        host, port = str(address[0]), int(address[1])
        played.connections.append((host, port))
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:  # a name, looked up as socket.create_connection would
            ip = ipaddress.ip_address(socket.getaddrinfo(host, port)[0][4][0])
        if not ip.is_loopback:
            raise ConnectionRefusedError(f"the tests send nothing to {ip}")
        return system_connect((str(ip), port), *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket, "create_connection", create_connection)
    return played


@dataclass
class Local:
    """A service on 127.0.0.1, over TLS when given a context: it records every request (and
    the name TLS asked for) and answers with what a merchant must never read from it."""

    tls: ssl.SSLContext | None = None
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    server_names: list[str | None] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    ANSWER = b'{"id": "cs_internal", "secret": "loopback-only"}'

    def start(self) -> Local:
        local = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                local.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}))
                self.send_response(201)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(Local.ANSWER)))
                self.end_headers()
                self.wfile.write(Local.ANSWER)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if self.tls is not None:
            self.tls.sni_callback = lambda _sock, name, _ctx: local.server_names.append(name)
            self.server.socket = self.tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(
            target=partial(self.server.serve_forever, poll_interval=0.02), daemon=True
        ).start()
        return self

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    def stop(self) -> None:
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def local() -> Iterator[Local]:
    service = Local().start()
    yield service
    service.stop()


def _certificate(directory: Path) -> tuple[ssl.SSLContext, Path]:
    """A server context whose certificate names :data:`NAME` and no address, and the file of
    the authority that signed it, for the arbiter to trust."""
    now = datetime.now(UTC)

    def issue(
        subject: str,
        key: ec.EllipticCurvePrivateKey,
        signer: ec.EllipticCurvePrivateKey,
        *,
        issuer: str,
        ca: bool,
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - timedelta(minutes=5))
            .not_valid_after(now + timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), False
            )
        )
        if ca:
            usage = dict.fromkeys(
                (
                    "content_commitment",
                    "key_encipherment",
                    "data_encipherment",
                    "key_agreement",
                    "encipher_only",
                    "decipher_only",
                    "digital_signature",
                ),
                False,
            )
            builder = builder.add_extension(
                x509.KeyUsage(key_cert_sign=True, crl_sign=True, **usage), critical=True
            )
        else:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(NAME)]), critical=False
            )
        return builder.sign(signer, hashes.SHA256())

    authority_key, key = (
        ec.generate_private_key(ec.SECP256R1()),
        ec.generate_private_key(ec.SECP256R1()),
    )
    authority = issue(
        "test authority", authority_key, authority_key, issuer="test authority", ca=True
    )
    leaf = issue(NAME, key, authority_key, issuer="test authority", ca=False)
    pem = serialization.Encoding.PEM
    (directory / "ca.pem").write_bytes(authority.public_bytes(pem))
    (directory / "leaf.pem").write_bytes(leaf.public_bytes(pem))
    (directory / "leaf.key").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(directory / "leaf.pem", directory / "leaf.key")
    return context, directory / "ca.pem"


Seen = tuple[str, int | None, str, str]  # outcome, status, what was kept of the answer, error


def _waiting(kind: str, client: Any, buyer: Agent, merchant: Agent, url: str) -> Callable[[], Seen]:
    """A delivery of ``kind`` to ``url`` made ready (private targets allowed, so nothing is
    looked up yet), and the function that makes its first attempt here, in this process,
    and says what the merchant or the agent reads of it."""
    if kind == "callback":
        put = client.put(
            CALLBACK,
            data=json.dumps({"url": url}),
            content_type="application/json",
            **_auth(buyer),
        )
        assert put.status_code == 200, put.content
    else:
        services.configure_handoff(
            merchant_agent_id=merchant.agent_id, endpoint=url, api_key="acp_live_123"
        )
    if kind == "test request":

        def send_test() -> Seen:
            answer = services.send_test_handoff(merchant_agent_id=merchant.agent_id)
            body = answer.body.decode()
            return answer.outcome.value, answer.status_code, body, answer.error

        return send_test
    run = ClientNegotiation(client, buyer, merchant, session_id=f"sess-{kind}-rebind")
    run.open()
    run.finish()
    if kind == "handoff":
        handoff = Handoff.objects.get()

        def handoff_attempt() -> Seen:
            assert handoffs.deliver(handoff.pk)
            a = handoff.attempt_log.get()
            return a.outcome, a.status_code, a.response_excerpt, a.error

        return handoff_attempt
    session = Session.objects.get(session_id=f"sess-{kind}-rebind")
    cursor = CallbackCursor.objects.create(callback=AgentCallback.objects.get(), session=session)

    def callback_attempt() -> Seen:
        assert callbacks.deliver(cursor.pk) >= 1
        a = cursor.attempt_log.order_by("seq", "number").first()
        assert a is not None
        return a.outcome, a.status_code, a.response_excerpt, a.error

    return callback_attempt


KINDS = ["handoff", "callback", "test request"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_name_that_turns_to_loopback_after_the_check_is_never_connected_to(
    settings: Any, client: Any, buyer: Agent, merchant: Agent, dns: Dns, local: Local, kind: str
) -> None:
    settings.OANP_ALLOW_PRIVATE_TARGETS = True
    attempt = _waiting(kind, client, buyer, merchant, f"http://{NAME}:{local.port}/acp")
    settings.OANP_ALLOW_PRIVATE_TARGETS = False
    # Public when the arbiter checks, this machine when a second lookup would connect.
    dns.answers = [(PUBLIC,), ("127.0.0.1",)]
    outcome, status, kept, error = attempt()
    assert local.requests == []
    assert dns.lookups == 1
    assert dns.connections == [(PUBLIC, local.port)]  # the address checked, and only it
    assert (outcome, status, kept) == ("retry", None, "")
    assert error == f"The host {NAME} could not be reached: nothing accepted the connection."


@pytest.mark.parametrize("kind", KINDS)
def test_a_name_that_answers_loopback_at_the_check_is_refused_there(
    settings: Any, client: Any, buyer: Agent, merchant: Agent, dns: Dns, local: Local, kind: str
) -> None:
    settings.OANP_ALLOW_PRIVATE_TARGETS = True
    attempt = _waiting(kind, client, buyer, merchant, f"http://{NAME}:{local.port}/acp")
    settings.OANP_ALLOW_PRIVATE_TARGETS = False
    dns.answers = [("127.0.0.1",), (PUBLIC,)]
    outcome, status, kept, error = attempt()
    assert local.requests == []
    assert (dns.lookups, dns.connections) == (1, [])
    assert (outcome, status, kept) == ("gone", None, "")
    assert error == (
        f"target not allowed: '{NAME}' resolves to 127.0.0.1, which is not a public address"
    )
    # The delivery stops there; a merchant's test request disables nothing.
    if kind == "callback":
        assert AgentCallback.objects.get().disabled_at is not None
    elif kind == "handoff":
        assert HandoffTarget.objects.get().disabled_at is not None


@pytest.mark.usefixtures("private_refused")
def test_every_address_of_the_one_lookup_is_checked(dns: Dns, local: Local) -> None:
    dns.answers = [(PUBLIC, "127.0.0.1")]
    answer = outbound.deliver(
        url=f"http://{NAME}:{local.port}/hook",
        body=b"{}",
        secret=SECRET,
        message_id="m",
        headers={},
    )
    assert (answer.outcome, dns.lookups, dns.connections) == (AttemptOutcome.GONE, 1, [])
    assert "resolves to 127.0.0.1" in answer.error
    assert local.requests == []


@pytest.mark.usefixtures("private_allowed")
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_the_pinned_connection_names_the_host_in_http_and_tls(
    dns: Dns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, scheme: str
) -> None:
    tls = None
    if scheme == "https":
        # The certificate names the host and no address: it verifies only against the name.
        tls, authority = _certificate(tmp_path)
        monkeypatch.setenv("SSL_CERT_FILE", str(authority))
    service = Local(tls=tls).start()
    try:
        dns.answers = [("127.0.0.1",)]
        answer = outbound.deliver(
            url=f"{scheme}://{NAME}:{service.port}/hook?x=1",
            body=b"{}",
            secret=SECRET,
            message_id="m",
            headers={},
        )
    finally:
        service.stop()
    assert (answer.outcome, answer.status_code, answer.error) == (AttemptOutcome.DELIVERED, 201, "")
    assert answer.body == Local.ANSWER
    assert (dns.lookups, dns.connections) == (1, [("127.0.0.1", service.port)])
    [(path, headers)] = service.requests
    assert path == "/hook?x=1"
    assert headers["host"] == f"{NAME}:{service.port}"
    assert service.server_names == ([NAME] if scheme == "https" else [])


@pytest.mark.usefixtures("private_allowed")
def test_a_certificate_for_another_name_is_refused(
    dns: Dns, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tls, authority = _certificate(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(authority))
    service = Local(tls=tls).start()
    try:
        # The same address under the address itself: the certificate does not name it.
        answer = outbound.deliver(
            url=f"https://127.0.0.1:{service.port}/hook",
            body=b"{}",
            secret=SECRET,
            message_id="m",
            headers={},
        )
    finally:
        service.stop()
    assert (answer.outcome, answer.status_code) == (AttemptOutcome.RETRY, None)
    assert service.requests == []


@pytest.mark.usefixtures("private_allowed")
def test_the_next_checked_address_is_tried_when_one_refuses(dns: Dns, local: Local) -> None:
    # Nothing listens on 127.0.0.2 at that port: the second address of the same lookup takes it.
    dns.answers = [("127.0.0.2", "127.0.0.1")]
    answer = outbound.deliver(
        url=f"http://{NAME}:{local.port}/hook",
        body=b"{}",
        secret=SECRET,
        message_id="m",
        headers={},
    )
    assert (answer.outcome, answer.status_code) == (AttemptOutcome.DELIVERED, 201)
    assert dns.lookups == 1
    assert dns.connections == [("127.0.0.2", local.port), ("127.0.0.1", local.port)]
    assert [h["host"] for _, h in local.requests] == [f"{NAME}:{local.port}"]


@pytest.mark.usefixtures("private_refused")
def test_a_name_not_found_at_delivery_is_retried_not_refused(dns: Dns) -> None:
    dns.answers = [()]
    answer = outbound.deliver(
        url=f"https://{NAME}/hook", body=b"{}", secret=SECRET, message_id="m", headers={}
    )
    assert (answer.outcome, answer.error) == (
        AttemptOutcome.RETRY,
        f"The host {NAME} could not be found.",
    )
    assert (dns.lookups, dns.connections) == (1, [])
