"""The session page's header, end states and timeline, as the server renders them: the item,
deadline, max rounds and whose turn it is; "ended" and no idle time once a session is over;
a session closed before any offer says how; a termination says who and when."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from sessions_app.models import AgentProfile, AuditEvent, MemberRole, Merchant
from tests.support.factories.accounts import member, merchant, signed_in
from tests.support.factories.agents import ClientNegotiation, make_agent, now, post

pytestmark = pytest.mark.django_db

SESSION = "sess-page"
PAGE = f"/sessions/{SESSION}/"


@pytest.fixture
def run(client: Client) -> ClientNegotiation:
    return ClientNegotiation(
        client, make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant"), SESSION
    )


@pytest.fixture
def operator() -> Client:
    return signed_in(member("operator", MemberRole.OPERATOR))


def text(page: Client, selector_id: str) -> str:
    """The text of the element with ``id``, tags dropped, spaces collapsed."""
    html = page.get(PAGE).content.decode()
    match = re.search(rf'<(\w+)[^>]*\bid="{selector_id}"[^>]*>(.*?)</\1>', html, re.S)
    assert match, f"no #{selector_id} on the page"
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(2)).split())


def test_the_header_names_item_deadline_max_rounds_and_turn(
    run: ClientNegotiation, operator: Client
) -> None:
    deadline = (now() + timedelta(hours=2)).replace(microsecond=0)
    run.open(max_rounds=3, deadline=deadline)
    assert text(operator, "item") == "route: SFO-JFK, date: 2026-04-28"
    assert text(operator, "max-rounds") == "3"
    # The exact UTC time until times.js makes it relative ("in 2 hours"), and on hover after.
    assert text(operator, "deadline") == f"{deadline:%Y-%m-%d %H:%M:%S}"
    page = operator.get(PAGE).content.decode()
    assert f'datetime="{deadline.isoformat()}" title="{deadline:%Y-%m-%d %H:%M:%S} UTC"' in page
    assert text(operator, "turn").startswith("merchant: to join (ack), until 20")
    assert text(operator, "idle").endswith("since the last entry")

    run.step()  # the ack: round 1, the buyer proposes first
    assert text(operator, "turn").startswith("buyer, until ")
    run.step()
    assert text(operator, "turn").startswith("merchant, until ")


def test_the_header_says_when_the_final_answer_is_due(
    run: ClientNegotiation, operator: Client
) -> None:
    run.open(max_rounds=1)
    # The merchant would accept the buyer's price; it counters the last round instead.
    run.run_until("offer.accept")
    key, accepting = run.peek()
    countering = {
        **accepting,
        "message_id": accepting["message_id"] + "-counter",
        "type": "offer.counter",
        "payload": {**accepting["payload"], "price": 390},
    }
    assert post(run.client, key, countering).status_code == 201
    assert text(operator, "turn").startswith(
        "buyer: its final answer (accept the last counter or withdraw) is due, until "
    )


def test_an_ended_session_says_ended_with_no_turn_and_no_idle_time(
    run: ClientNegotiation, operator: Client
) -> None:
    run.open()
    run.finish()
    html = operator.get(PAGE).content.decode()
    assert 'data-state="closed" aria-live="off">ended</p>' in html
    assert 'data-ended="true"' in html
    assert text(operator, "turn") == "nobody: the session has ended"
    assert 'id="idle"' not in html


def test_a_live_session_is_not_marked_ended(run: ClientNegotiation, operator: Client) -> None:
    run.open()
    html = operator.get(PAGE).content.decode()
    assert 'data-state="connecting"' in html
    assert 'data-ended="false"' in html


def test_a_session_closed_before_any_offer_says_how_it_ended(
    run: ClientNegotiation, operator: Client
) -> None:
    run.open()
    assert post(run.client, run.buyer_key, run.buyer.withdraw(now())).status_code == 201
    html = operator.get(PAGE).content.decode()
    assert "waiting for its opening moves" not in html
    assert text(operator, "rounds-h") == "Rounds"
    assert "No offers: the session closed before any, <strong>withdrawn_by_buyer</strong>" in html


@pytest.fixture
def shop() -> Merchant:
    """The merchant whose external agent merchant-sfo is, so its members see the session."""
    found = merchant("skyways")
    AgentProfile.objects.create(merchant=found, agent_id="merchant-sfo", mode="external")
    return found


@pytest.fixture
def terminated(run: ClientNegotiation, operator: Client, shop: Merchant) -> AuditEvent:
    """An operator ended the session in its first round: the audit log's record of it."""
    run.open()
    run.run_until("offer.counter")
    answer = operator.post(f"{PAGE}terminate/", {"detail": "reported abuse"})
    assert answer.status_code == 302
    return AuditEvent.objects.get(action="session.terminate")


def test_an_operator_reads_who_terminated_and_when(
    terminated: AuditEvent, operator: Client
) -> None:
    moment = timezone.localtime(terminated.at).strftime("%Y-%m-%d %H:%M:%S")
    assert text(operator, "terminated-by") == f"operator, {moment}"
    # The close entry on the timeline carries the operator's reason too.
    assert "operator_terminated</strong> (reported abuse)" in operator.get(PAGE).content.decode()


def test_a_merchant_member_is_not_told_which_operator(
    terminated: AuditEvent, shop: Merchant
) -> None:
    page = signed_in(member("alice", MemberRole.MERCHANT_MANAGER, shop))
    shown = text(page, "terminated-by")
    assert shown.startswith("an operator of the arbiter, 20")
    assert "operator," not in shown.replace("arbiter,", "")


def test_no_one_is_named_for_a_session_that_was_not_terminated(
    run: ClientNegotiation, operator: Client
) -> None:
    run.open()
    run.finish()
    assert 'id="terminated-by"' not in operator.get(PAGE).content.decode()


def test_the_timeline_shows_each_entry_with_its_time_gap_and_verdict(
    run: ClientNegotiation, operator: Client
) -> None:
    run.open()
    log = run.finish()
    html = operator.get(PAGE).content.decode()
    rows = re.findall(r'<li id="entry-(\d+)" class="timeline-entry (\w+)">(.*?)</li>', html, re.S)
    assert [int(seq) for seq, _, _ in rows] == [e["seq"] for e in log]
    assert [role for _, role, _ in rows] == [e["envelope"]["sender"]["role"] for e in log]
    first, *rest = (body for _, _, body in rows)
    assert 'class="gap"' not in first
    assert all(re.search(r'class="gap">\+\d+(\.\d)? m?s<', body) for body in rest)
    for entry, (_, _, body) in zip(log, rows, strict=True):
        assert f'<time datetime="{entry["received_at"][:19]}' in body
        assert "<details><summary>JSON" in body  # folded, still there
        assert "<pre>" in body
        if entry["envelope"]["type"] == "round.verdict":
            verdict = entry["envelope"]["payload"]
            assert f'<span class="verdict {verdict["status"]}">' in body
            assert verdict["rationale"] in body
