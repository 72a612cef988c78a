"""The audit page's transparency log card (docs/protocol.md §18) in each state of the log:
nothing integrated yet; integrated and signed by the log alone; cosigned by a witness; that
witness stopped answering, or one that never answered, as an alert; a witness configured but
not asked yet. The origin and verifier key are those /.well-known/oanp.json publishes, the note
the one the log serves; and the card is an admin's, as the page is."""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from arbiter_app.log_records import LogCheckpoint, WitnessRecord
from arbiter_app.tlog.integrator import integrate
from sessions_app.models import MemberRole, Merchant
from sessions_app.templatetags.ago import when
from sessions_app.templatetags.transparency_log import transparency_log
from sessions_app.tenancy import scope_of
from tests.support.factories.accounts import member, signed_in
from tests.support.factories.agents import Agent, ClientNegotiation, make_agent
from tests.support.factories.witnesses import RunningWitness, checkpoint_sent, running_witness

pytestmark = pytest.mark.django_db

NO_WITNESSES = (
    "No witnesses are configured (OANP_WITNESSES): checkpoints are signed by the log alone."
)


@pytest.fixture
def admin() -> Client:
    return signed_in(member("ada", MemberRole.ADMIN))


@pytest.fixture
def parties() -> tuple[Agent, Agent]:
    return make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant")


@pytest.fixture
def witness(tmp_path: Path, settings: Any) -> Iterator[RunningWitness]:
    """A witness the log sends its checkpoints to, whose one cosignature serves them."""
    with running_witness(tmp_path) as running:
        settings.OANP_WITNESSES = [running.line]
        settings.OANP_WITNESS_QUORUM = 1
        yield running


def negotiate(client: Client, parties: tuple[Agent, Agent], session_id: str) -> None:
    """A session to its end: 9 entries."""
    negotiation = ClientNegotiation(client, *parties, session_id, f"{session_id}-")
    negotiation.open()
    negotiation.finish()


def card(admin: Client) -> str:
    answer = admin.get("/audit/")
    assert answer.status_code == 200
    page = answer.content.decode()
    assert 'id="transparency-log"' in page, "the audit page has no transparency log card"
    return page.split('id="transparency-log"', 1)[1].split("</section>", 1)[0]


def text(fragment: str) -> str:
    """What a reader reads of ``fragment``: no tags, spaces as a browser folds them."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


def shown(shown_card: str, element_id: str) -> str:
    """The text of the element ``element_id`` of the card."""
    found = re.search(rf'<(\w+)[^>]*\bid="{element_id}"[^>]*>(.*?)</\1>', shown_card, re.S)
    assert found, f"the card shows no #{element_id}"
    return text(found.group(2))


def value(shown_card: str, element_id: str) -> str:
    found = re.search(rf'<input id="{element_id}"[^>]*\bvalue="([^"]*)"', shown_card)
    assert found, f"the card has no field #{element_id}"
    return html.unescape(found.group(1))


def rows(shown_card: str, table_id: str) -> list[list[str]]:
    """The cells of each row of the table ``table_id``'s body."""
    table = shown_card.split(f'<table id="{table_id}">', 1)[1].split("</table>", 1)[0]
    body = table.split("<tbody>", 1)[1]
    return [
        [text(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)]
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def alerts(shown_card: str) -> list[str]:
    found = re.findall(r'<div [^>]*role="alert"[^>]*>(.*?)</div>', shown_card, re.S)
    return [text(alert) for alert in found]


def test_before_the_first_entry_is_integrated_the_card_says_so(
    admin: Client, client: Client, parties: tuple[Agent, Agent]
) -> None:
    negotiate(client, parties, "sess-waiting")  # committed, not integrated yet
    log = client.get("/.well-known/oanp.json").json()["log"]
    seen = card(admin)
    assert value(seen, "log-origin") == log["origin"]
    assert value(seen, "log-key") == log["verifier_key"]
    assert shown(seen, "log-size") == "0 entries"
    assert shown(seen, "log-waiting") == "9"
    assert shown(seen, "log-age") == "none yet"
    assert shown(seen, "log-not-integrated") == (
        "No entry has been integrated yet: the log has no checkpoint to serve."
    )
    assert 'id="log-checkpoint"' not in seen
    assert shown(seen, "no-witnesses") == NO_WITNESSES
    assert alerts(seen) == []


def test_integrated_with_no_witness_the_card_shows_the_checkpoint_the_log_serves(
    admin: Client, client: Client, parties: tuple[Agent, Agent]
) -> None:
    negotiate(client, parties, "sess-one")
    integrate(timezone.now() - timedelta(minutes=5))
    served = client.get("/oanp/v0.1/log/checkpoint").content.decode()
    checkpoint = LogCheckpoint.objects.get()
    seen = card(admin)
    assert shown(seen, "log-size") == "9 entries"
    assert shown(seen, "log-waiting") == "0"
    assert shown(seen, "log-age") == "5 min ago"
    assert shown(seen, "checkpoint-size") == "9"
    assert shown(seen, "checkpoint-signed") == text(when(checkpoint.signed_at))
    root = base64.b64encode(bytes(checkpoint.root)).decode()
    assert shown(seen, "checkpoint-root") == root == served.splitlines()[2]
    note = re.search(r'<details id="log-note">.*?<pre>(.*?)</pre>', seen, re.S)
    assert note, "the card shows no note"
    assert html.unescape(note.group(1)) == served
    assert 'id="cosignatures"' not in seen
    assert shown(seen, "no-witnesses") == NO_WITNESSES
    assert alerts(seen) == []


def test_a_witness_cosigning_shows_its_cosignature_and_answering(
    admin: Client, client: Client, parties: tuple[Agent, Agent], witness: RunningWitness
) -> None:
    negotiate(client, parties, "sess-one")
    checkpoint = checkpoint_sent()
    cosignature = checkpoint.cosignatures.get()
    seen = card(admin)
    assert 'id="no-witnesses"' not in seen
    received = text(when(cosignature.received_at))
    assert rows(seen, "cosignatures") == [[witness.name, received]]
    note = re.search(r'<details id="log-note">.*?<pre>(.*?)</pre>', seen, re.S)
    assert note, "the card shows no note"
    assert html.unescape(note.group(1)) == checkpoint.note + cosignature.line
    assert rows(seen, "witnesses") == [[witness.name, "answering", "size 9", received]]
    assert alerts(seen) == []


def test_a_witness_that_stopped_answering_is_an_alert_saying_since_when_and_why(
    admin: Client, client: Client, parties: tuple[Agent, Agent], witness: RunningWitness
) -> None:
    negotiate(client, parties, "sess-one")
    checkpoint_sent(timezone.now() - timedelta(minutes=10))
    witness.stop()
    negotiate(client, parties, "sess-two")
    checkpoint_sent()
    record = WitnessRecord.objects.get()
    assert record.answered_at is not None
    assert record.failed_at is not None
    seen = card(admin)
    assert alerts(seen) == [
        f"Witness {witness.name} stopped answering: it last answered "
        f"{text(when(record.answered_at))}, cosigning size 9. "
        f"Last tried {text(when(record.failed_at))}: {record.error}. "
        "The log goes on without its cosignature and sends it the next checkpoint."
    ]
    assert "Connection refused" in record.error
    assert rows(seen, "witnesses") == [
        [witness.name, "stopped answering", "size 9", text(when(record.answered_at))]
    ]
    # The log serves the last checkpoint its witness cosigned; the tree went on without it.
    assert shown(seen, "log-size") == "18 entries"
    assert shown(seen, "checkpoint-size") == "9"
    assert shown(seen, "checkpoint-behind").startswith("The tree has grown to 18 since:")


def test_a_witness_that_never_answered_says_so(
    admin: Client, client: Client, parties: tuple[Agent, Agent], witness: RunningWitness
) -> None:
    witness.stop()
    negotiate(client, parties, "sess-one")
    checkpoint_sent()
    record = WitnessRecord.objects.get()
    seen = card(admin)
    assert alerts(seen) == [
        f"Witness {witness.name} stopped answering: it has not answered once. "
        f"Last tried {text(when(record.failed_at))}: {record.error}. "
        "The log goes on without its cosignature and sends it the next checkpoint."
    ]
    assert rows(seen, "witnesses") == [[witness.name, "stopped answering", "–", "never"]]
    # With no cosignature to wait for, the log serves its latest checkpoint.
    assert shown(seen, "checkpoint-size") == "9"
    assert shown(seen, "no-cosignatures") == "No witness has cosigned it yet."


def test_a_witness_not_sent_a_checkpoint_yet_is_not_asked_yet(
    admin: Client, witness: RunningWitness
) -> None:
    seen = card(admin)
    assert rows(seen, "witnesses") == [[witness.name, "not asked yet", "–", "never"]]
    assert shown(seen, "log-not-integrated").startswith("No entry has been integrated yet")
    assert alerts(seen) == []


@pytest.mark.parametrize("role", [MemberRole.OPERATOR, MemberRole.MERCHANT_MANAGER])
def test_the_card_is_for_admins_only(role: str) -> None:
    shop = Merchant.objects.create(name="Skyways", slug="skyways")
    someone = member("someone", role, shop if role == MemberRole.MERCHANT_MANAGER else None)
    assert transparency_log(scope_of(someone)) == {}
    assert signed_in(someone).get("/audit/").status_code == 403
