"""An agent's signing keys on its page (docs/protocol.md §17), without a browser: only those who
manage the agent add, retire or require them, a private key is refused and never echoed, every
post needs its CSRF token; a hosted agent, which signs with a key of its own, may be required to
sign as any agent."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from arbiter_app import selectors as arbiter
from arbiter_app import services as arbiter_services
from arbiter_app.models import AgentKey
from oanp.wire.signing import SigningKey
from sessions_app.models import AgentProfile, AuditEvent, MemberRole, Merchant
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.support.factories.accounts import member, merchant, signed_in

pytestmark = pytest.mark.django_db

KEY = SigningKey.from_ed25519_seed(bytes(32))
OTHER_KEY = SigningKey.from_ed25519_seed(bytes(range(32)))
PAGE = "/agents/ext-a/"
ADD = "/agents/ext-a/signing-keys/"
REQUIRE = "/agents/ext-a/signatures-required/"


def retire_url(kid: str) -> str:
    return f"/agents/ext-a/signing-keys/{kid}/retire/"


@pytest.fixture
def external_a(shop_a: Merchant) -> AgentProfile:
    return AgentProfile.objects.create(merchant=shop_a, agent_id="ext-a", mode="external")


def keys_of(agent_id: str) -> list[tuple[str, object]]:
    return [(key.kid, key.retired_at) for key in arbiter.agent_keys(agent_id)]


def test_only_those_who_manage_the_agent_change_its_keys_and_nothing_changes_for_others(
    external_a: AgentProfile, shop_a: Merchant
) -> None:
    arbiter_services.register_agent_key(agent_id="ext-a", jwk=KEY.public_jwk())
    before = keys_of("ext-a")
    looker = signed_in(member("mo", MemberRole.MERCHANT_MEMBER, shop_a))
    operator = signed_in(member("olga", MemberRole.OPERATOR))
    stranger = signed_in(member("sam", MemberRole.MERCHANT_MANAGER, merchant("b")))
    posts = [
        (ADD, {"jwk": json.dumps(OTHER_KEY.public_jwk())}),
        (retire_url(KEY.kid), {"confirmed": "yes"}),
        (REQUIRE, {"required": "true"}),
    ]
    # Those who may look at the agent see its keys, without a form or a button to change them.
    for client in (looker, operator):
        page = client.get(PAGE).content.decode()
        assert KEY.kid in page
        assert 'id="party-key-form"' not in page
        assert 'id="signatures-switch"' not in page
        assert "Retire…" not in page
        assert client.get(retire_url(KEY.kid)).status_code == 403
        for url, data in posts:
            assert client.post(url, data).status_code == 403
    # Another merchant's manager does not learn that the agent exists.
    assert stranger.get(PAGE).status_code == 404
    assert stranger.get(retire_url(KEY.kid)).status_code == 404
    for url, data in posts:
        assert stranger.post(url, data).status_code == 404
    assert keys_of("ext-a") == before
    assert not arbiter.signatures_required("ext-a")
    assert not AuditEvent.objects.filter(action__startswith="agent_key.").exists()


def test_every_post_needs_its_csrf_token(external_a: AgentProfile, alice: User) -> None:
    arbiter_services.register_agent_key(agent_id="ext-a", jwk=KEY.public_jwk())
    before = keys_of("ext-a")
    forged = signed_in(alice, enforce_csrf_checks=True)
    assert forged.post(ADD, {"jwk": json.dumps(OTHER_KEY.public_jwk())}).status_code == 403
    assert forged.post(retire_url(KEY.kid), {"confirmed": "yes"}).status_code == 403
    assert forged.post(REQUIRE, {"required": "true"}).status_code == 403
    assert keys_of("ext-a") == before
    assert not arbiter.signatures_required("ext-a")


def test_a_pasted_key_and_a_key_file_are_added_and_audited(
    browser: Client, external_a: AgentProfile
) -> None:
    pasted = browser.post(ADD, {"jwk": json.dumps(KEY.public_jwk())}, follow=True)
    assert pasted.redirect_chain == [(f"{PAGE}#signing-h", 302)]
    assert messages_in(pasted.content.decode()) == [
        f"Key {KEY.kid} added: the agent may sign with it now."
    ]
    upload = SimpleUploadedFile(
        "agent.jwk", json.dumps(OTHER_KEY.public_jwk()).encode(), "application/jwk+json"
    )
    uploaded = browser.post(ADD, {"jwk": "", "jwk_file": upload}, follow=True)
    assert messages_in(uploaded.content.decode()) == [
        f"Key {OTHER_KEY.kid} added: the agent may sign with it now."
    ]
    assert [kid for kid, _ in keys_of("ext-a")] == [KEY.kid, OTHER_KEY.kid]
    again = browser.post(ADD, {"jwk": json.dumps(KEY.public_jwk())}, follow=True)
    assert messages_in(again.content.decode()) == [
        f"Key {KEY.kid} is registered already: nothing changed."
    ]
    audited = AuditEvent.objects.filter(action="agent_key.registered").order_by("pk")
    assert [(e.target, e.detail) for e in audited] == [
        ("ext-a", {"kid": KEY.kid, "alg": "Ed25519"}),
        ("ext-a", {"kid": OTHER_KEY.kid, "alg": "Ed25519"}),
    ]


def test_a_private_key_is_refused_stored_nowhere_and_not_sent_back(
    browser: Client, external_a: AgentProfile
) -> None:
    private = KEY.private_jwk()
    for data in (
        {"jwk": json.dumps(private)},
        {"jwk_file": SimpleUploadedFile("agent.jwk", json.dumps(private).encode())},
    ):
        answer = browser.post(ADD, data)
        assert answer.status_code == 400
        page = answer.content.decode()
        assert "No key was added. Please fix:" in error_summary_in(page)
        assert (
            "This is a private key: paste the public key only. Nothing was stored."
            in error_summary_in(page)
        )
        assert private["d"] not in page
        assert answer["Cache-Control"] == "no-store"
    assert not AgentKey.objects.exists()
    assert not AuditEvent.objects.filter(action__startswith="agent_key.").exists()


@pytest.mark.parametrize(
    ("data", "said"),
    [
        ({"jwk": '{"kty": "RSA", "n": "x", "e": "AQAB"}'}, "Not a usable public key: key type"),
        ({"jwk": "[1, 2]"}, "A key is one JWK: a JSON object."),
        ({"jwk": '{"kty": "OKP",'}, "This is not valid JSON:"),
        ({"jwk": ""}, "Paste a public JWK, or choose a .jwk or .json file."),
        (
            {"jwk_file": SimpleUploadedFile("key.jwk", b"\xff\xfe{}")},
            "This file is not text: choose the key's .jwk or .json file.",
        ),
        (
            {"jwk_file": SimpleUploadedFile("key.json", b" " * 5000)},
            "This file holds 5000 bytes; a public JWK is a few hundred",
        ),
    ],
)
def test_a_key_that_is_no_public_jwk_says_why(
    browser: Client, external_a: AgentProfile, data: dict[str, object], said: str
) -> None:
    answer = browser.post(ADD, data)
    assert answer.status_code == 400
    assert said in error_summary_in(answer.content.decode())
    assert not AgentKey.objects.exists()


def test_retiring_asks_first_and_a_retired_key_stays_retired(
    browser: Client, external_a: AgentProfile
) -> None:
    arbiter_services.register_agent_key(agent_id="ext-a", jwk=KEY.public_jwk())
    for answer in (browser.get(retire_url(KEY.kid)), browser.post(retire_url(KEY.kid))):
        assert answer.status_code == 200
        assert "Are you sure?" in answer.content.decode()
    assert keys_of("ext-a") == [(KEY.kid, None)]
    assert browser.get(retire_url(OTHER_KEY.kid)).status_code == 404

    done = browser.post(retire_url(KEY.kid), {"confirmed": "yes"}, follow=True)
    assert messages_in(done.content.decode()) == [
        f"Key {KEY.kid} retired: envelopes signed with it are refused."
    ]
    [(_, retired_at)] = keys_of("ext-a")
    assert retired_at is not None
    assert AuditEvent.objects.get(action="agent_key.retired").detail == {"kid": KEY.kid}
    assert "retired already" in browser.get(retire_url(KEY.kid)).content.decode()
    again = browser.post(ADD, {"jwk": json.dumps(KEY.public_jwk())}, follow=True)
    assert messages_in(again.content.decode()) == [
        f"Key {KEY.kid} was retired and stays retired: make a new key pair. Nothing was added."
    ]
    assert keys_of("ext-a") == [(KEY.kid, retired_at)]


def test_signatures_are_switched_on_and_off_a_hosted_agents_too(
    browser: Client, external_a: AgentProfile, agent_a: AgentProfile
) -> None:
    on = browser.post(REQUIRE, {"required": "true"}, follow=True)
    assert messages_in(on.content.decode()) == [
        "Signatures required: this agent's unsigned envelopes are refused (signature_required). "
        "It has no key in force: every envelope it sends is refused until a key is added."
    ]
    assert arbiter.signatures_required("ext-a")
    assert 'aria-checked="true"' in on.content.decode()
    off = browser.post(REQUIRE, {"required": "false"}, follow=True)
    assert "Signatures no longer required" in messages_in(off.content.decode())[0]
    assert not arbiter.signatures_required("ext-a")
    assert [
        e.detail["required"]
        for e in AuditEvent.objects.filter(action="agent_key.signatures_required").order_by("pk")
    ] == [True, False]

    # A hosted agent signs with a key of its own: no key in force yet is no warning for it.
    hosted = browser.post("/agents/hosted-a/signatures-required/", {"required": "true"})
    assert hosted.status_code == 302
    assert arbiter.signatures_required("hosted-a")
    page = browser.get("/agents/hosted-a/").content.decode()
    assert messages_in(page) == [
        "Signatures required: this agent's unsigned envelopes are refused (signature_required)."
    ]
    assert "A hosted agent signs with a key of its own" in page
