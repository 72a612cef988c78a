"""The vault: a merchant's limits are sealed at rest and reach no arbiter table, page, API
answer or log line in clear, even after its hosted agent negotiated with them."""

from __future__ import annotations

import logging
import re
from decimal import Decimal
from typing import Any

import pytest
from cryptography.fernet import InvalidToken
from django.db import connection
from django.test import Client, override_settings

from oanp.agents.pricelist import PriceLimits, PriceList
from sessions_app import hosted_agents
from sessions_app.models import AgentProfile, HostedSession, MemberRole
from sessions_app.vault import seal, seal_text, unseal, unseal_text
from tests.sessions_app.test_agents import agent_form
from tests.support.factories.accounts import HostedNegotiation, member, merchant, signed_in

pytestmark = pytest.mark.django_db

FLOOR = "280"
ITEM_FLOOR = "251.5"


def as_number(value: str) -> re.Pattern[str]:
    """``value`` where it stands as a number: not inside a hash, a ciphertext or a longer number."""
    edge = r"[\w.+/=-]"
    return re.compile(rf"(?<!{edge}){re.escape(value)}(?:\.0+)?(?!{edge})")


def arbiter_tables_text() -> str:
    """Every row of every arbiter table, as text: a dump of what the arbiter holds."""
    with connection.cursor() as cursor:
        tables = [
            t for t in connection.introspection.table_names(cursor) if t.startswith("arbiter")
        ]
        assert "arbiter_app_entry" in tables
        dump = []
        for table in tables:
            cursor.execute(f'SELECT * FROM "{table}"')
            for row in cursor.fetchall():
                dump += [
                    bytes(v).decode("latin-1") if isinstance(v, bytes | memoryview) else str(v)
                    for v in row
                ]
    return "\n".join(dump)


def test_limits_round_trip_through_the_seal() -> None:
    limits = PriceList(
        (
            PriceLimits(None, "USD", Decimal(280), Decimal(400)),
            PriceLimits("LAX-SFO", "USD", Decimal("251.5"), Decimal(390)),
        )
    )
    sealed = seal(limits)
    assert unseal(sealed) == limits
    assert not as_number(FLOOR).search(sealed.decode())
    assert unseal_text(seal_text("salt")) == "salt"


def test_a_vault_sealed_under_another_key_does_not_open() -> None:
    sealed = seal(PriceList((PriceLimits(None, "USD", Decimal(280), Decimal(400)),)))
    with (
        override_settings(OANP_VAULT_KEY="A" * 43 + "="),
        pytest.raises(InvalidToken),
    ):
        unseal(sealed)


def test_the_scanner_finds_a_number_in_clear_and_not_inside_hashes() -> None:
    assert as_number("280").search('{"price":280,"x":1}')
    assert as_number("280").search("floor 280.00 USD")
    assert not as_number("280").search("sha256:0a280f")
    assert not as_number("280").search("2805")
    assert not as_number("280").search("gAAAA-280_x")


def test_a_floor_of_280_is_nowhere_in_clear_after_a_hosted_negotiation(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    # Other tests may configure logging; this one listens to the runner whatever they did.
    logging.getLogger("sessions_app").addHandler(caplog.handler)
    shop = merchant("sfo")
    browser = signed_in(member("sam", MemberRole.MERCHANT_MANAGER, shop))
    created = browser.post(
        "/agents/new/",
        agent_form(
            agent_id="hosted-sfo",
            strategy="reference",
            floor_price=FLOOR,
            ideal_price="400",
            **{"limits-1-item": "LAX-SFO", "limits-1-currency": "USD"},
            **{"limits-1-floor_price": ITEM_FLOOR},
        )
        | {"limits-1-ideal_price": "390"},
    )
    assert created.status_code == 302
    issued = browser.post("/agents/hosted-sfo/keys/", {"label": "spare"}, follow=True)
    assert "shown this once" in issued.content.decode()

    negotiation = HostedNegotiation(Client(), "hosted-sfo", session_id="sess-vault")
    log = negotiation.play(nudge=lambda: hosted_agents.answer("sess-vault"))
    assert log[-1]["envelope"]["type"] == "session.agree"
    assert HostedSession.objects.filter(session_id="sess-vault").exists()

    dump = arbiter_tables_text()
    assert as_number("340").search(dump), "the scan sees prices the arbiter does hold"
    assert not as_number(FLOOR).search(dump)
    assert not as_number(ITEM_FLOOR).search(dump)

    pages: dict[str, Any] = {
        path: browser.get(path)
        for path in (
            "/",
            "/agents/",
            "/agents/hosted-sfo/",
            "/agents/hosted-sfo/edit/",
            "/sessions/",
            "/sessions/sess-vault/",
        )
    }
    headers = negotiation.buyer_key.headers
    for path in ("/oanp/v0.1/sessions/sess-vault", "/oanp/v0.1/sessions/sess-vault/log"):
        pages[path] = negotiation.client.get(path, headers=headers)
    pages["the page with the new key"] = issued
    for name, response in pages.items():
        assert response.status_code == 200, name
        text = response.content.decode()
        assert not as_number(FLOOR).search(text), name
        assert not as_number(ITEM_FLOOR).search(text), name
    assert "340" in pages["/sessions/sess-vault/"].content.decode()

    logging.getLogger("sessions_app").removeHandler(caplog.handler)
    assert any("hosted agent" in r.getMessage() for r in caplog.records), "nothing to look at"
    for record in caplog.records:
        assert not as_number(FLOOR).search(record.getMessage()), record.getMessage()

    # And the vault still holds the limits, for the next session.
    sealed = AgentProfile.objects.get(agent_id="hosted-sfo").vault
    assert unseal(sealed).limits[0].floor_price == Decimal(FLOOR)
