"""The deliveries page: handoffs and callbacks across sessions in the viewer's scope, filtered
and paged by cursor; a delivery's attempts, numbered on across redeliveries, with their
requests (secrets redacted) and responses; the outcome that matters (a flagged price, the next
retry); and "resend now" for any delivery not cleanly delivered, confirmed and audited."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.utils import timezone

from arbiter_app import tasks
from arbiter_app.models import AgentCallback, CallbackCursor, Handoff, HandoffState
from sessions_app import actions, tenancy
from sessions_app.models import AuditEvent, MemberRole, Merchant
from sessions_app.templatetags.ago import when
from sessions_app.views import deliveries as deliveries_view
from tests.arbiter_app.test_deliveries import Receiver, Reply, Request
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.sessions_app.test_handoff_panel import PAGE, SESSION, agree_and_hand_off, panel, rows
from tests.support.factories.accounts import member, merchant, signed_in

pytestmark = pytest.mark.django_db

LIST = "/deliveries/"
BULK = "/deliveries/resend/"
API_KEY = "acp_123"


@pytest.fixture
def shop() -> Merchant:
    return merchant("sfo")


@pytest.fixture
def acp_server() -> Iterator[Receiver]:
    """First a 400, which fails the handoff for good; then the checkout."""
    replies = [400]

    def answer(request: Request) -> Reply:
        if replies:
            return replies.pop(0), {}, b'{"type": "invalid_request"}'
        sent = json.loads(request.body)
        checkout = {"id": "cs_7", "currency": sent["currency"], "line_items": sent["line_items"]}
        return 201, {"X-Request-Id": "req_9"}, json.dumps(checkout).encode()

    server = Receiver(answer).start()
    yield server
    server.stop()


def failed_handoff(client: Client, shop: Merchant, acp_url: str) -> Handoff:
    """An agreement handed off to ``acp_server``, whose first answer (400) fails it for good.
    The suite's worker may hold that attempt's lease: wait for whoever makes it, never making
    the handoff due again, or a second attempt would take the receiver's checkout instead."""
    handoff, _ = agree_and_hand_off(client, shop, acp_url)
    deadline = time.monotonic() + 30
    while handoff.state != HandoffState.FAILED and time.monotonic() < deadline:
        tasks.deliver_handoff(handoff.pk)
        time.sleep(0.1)
        handoff.refresh_from_db()
    assert handoff.state == HandoffState.FAILED
    return handoff


@pytest.fixture
def failed(settings: Any, client: Client, shop: Merchant, acp_server: Receiver) -> Handoff:
    settings.OANP_ALLOW_PRIVATE_TARGETS = True
    handoff, _ = agree_and_hand_off(client, shop, f"{acp_server.url}/acp")
    assert handoff.state == HandoffState.FAILED
    return handoff


@pytest.fixture
def callback(failed: Handoff) -> CallbackCursor:
    """The merchant agent's callback, behind on the same session: a pending delivery, newer."""
    hook = AgentCallback.objects.create(
        agent_id="merchant-sfo",
        role="merchant",
        url="https://hooks.example/oanp",
        secret_encrypted=b"",
    )
    return CallbackCursor.objects.create(callback=hook, session=failed.session)


def listed(page: Any) -> str:
    html: str = page.content.decode()
    return html.split('id="deliveries"', 1)[1].split("</table>", 1)[0]


def operator() -> Client:
    return signed_in(member("olga", MemberRole.OPERATOR))


def test_the_list_filters_by_state_kind_and_target(
    failed: Handoff, callback: CallbackCursor
) -> None:
    olga = operator()
    both = listed(olga.get(LIST))
    assert both.count("<tr>") == 3  # the head and two deliveries
    assert f"{failed.target.endpoint}/checkout_sessions" in both
    assert "https://hooks.example/oanp" in both
    assert f'href="/sessions/{SESSION}/"' in both
    only_failed = listed(olga.get(LIST, {"state": "failed"}))
    assert "checkout_sessions" in only_failed
    assert "hooks.example" not in only_failed
    assert "<td>400 (rejected)</td>" in only_failed
    assert "hooks.example" in listed(olga.get(LIST, {"kind": "callback"}))
    assert "checkout_sessions" not in listed(olga.get(LIST, {"kind": "callback"}))
    by_target = listed(olga.get(LIST, {"target": "HOOKS.example"}))
    assert "hooks.example" in by_target
    assert "checkout_sessions" not in by_target
    assert "No delivery matches." in listed(olga.get(LIST, {"state": "delivered"}))


@pytest.mark.parametrize(
    ("params", "says"),
    [
        ({"state": "lost"}, "state: Select a valid choice. lost is not one of the available"),
        ({"kind": "email"}, "kind: Select a valid choice."),
        ({"target": "x" * 201}, "target: Ensure this value has at most 200 characters"),
        ({"target": "a\x01b"}, "target: A URL holds no control characters."),
        ({"after": "yesterday"}, "after: Not a page of this list"),
        ({"after": "1700000000000000-parcel-1"}, "after: Not a page of this list"),
    ],
)
def test_a_bad_filter_is_reported_not_ignored(
    failed: Handoff, params: dict[str, str], says: str
) -> None:
    page = operator().get(LIST, params)
    assert page.status_code == 400
    html = page.content.decode()
    assert 'id="filter-errors"' in html
    assert says in html.replace("&#x27;", "'")
    assert 'id="deliveries"' not in html


def test_pages_run_newest_first_by_cursor(
    failed: Handoff, callback: CallbackCursor, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deliveries_view, "PAGE_SIZE", 1)
    olga = operator()
    first = olga.get(LIST, {"state": ""})
    assert "hooks.example" in listed(first)
    link = first.content.decode().split('id="older"', 1)[0].rsplit('href="', 1)[1].split('"')[0]
    assert link.startswith("?state=&amp;after=")
    second = olga.get(LIST + link.replace("&amp;", "&"))
    assert second.status_code == 200
    assert "checkout_sessions" in listed(second)
    assert "hooks.example" not in listed(second)
    assert 'id="older"' not in second.content.decode()
    assert "offset" not in link


def test_each_merchant_sees_its_own_and_the_operator_sees_all(
    failed: Handoff, callback: CallbackCursor, shop: Merchant
) -> None:
    alice = signed_in(member("alice", MemberRole.MERCHANT_MANAGER, shop))
    bob = signed_in(member("bob", MemberRole.MERCHANT_MANAGER, merchant("b")))
    assert listed(alice.get(LIST)).count("<tr>") == 3
    assert "No delivery matches." in listed(bob.get(LIST))
    olga = operator()
    for kind, pk in (("handoff", failed.pk), ("callback", callback.pk)):
        assert alice.get(f"/deliveries/{kind}/{pk}/").status_code == 200
        assert bob.get(f"/deliveries/{kind}/{pk}/").status_code == 404
        assert olga.get(f"/deliveries/{kind}/{pk}/").status_code == 200
    assert alice.get(f"/deliveries/parcel/{failed.pk}/").status_code == 404
    # Another agent's callback on the same session is that agent's business, not the shop's.
    buyer_hook = AgentCallback.objects.create(
        agent_id="buyer-001", role="buyer", url="https://buyer.example/hook", secret_encrypted=b""
    )
    theirs = CallbackCursor.objects.create(callback=buyer_hook, session=failed.session)
    assert "buyer.example" not in listed(alice.get(LIST))
    assert alice.get(f"/deliveries/callback/{theirs.pk}/").status_code == 404
    assert "buyer.example" in listed(olga.get(LIST))
    # Merchants watch; the bulk action is not offered to them.
    assert 'id="resend-selected"' not in alice.get(LIST).content.decode()
    # Nor is resending, to another merchant's member or to its own.
    for outsider in (alice, bob):
        asked = outsider.post(BULK, {"handoff": [str(failed.pk)], "confirm": "yes"})
        assert asked.status_code == 403
    failed.refresh_from_db()
    assert failed.state == HandoffState.FAILED
    assert not AuditEvent.objects.filter(action="handoff.redeliver").exists()


def test_attempts_number_on_across_a_redeliver_with_requests_redacted(failed: Handoff) -> None:
    olga = operator()
    assert olga.post(BULK, {"handoff": [str(failed.pk)], "confirm": "yes"}).status_code == 302
    assert tasks.deliver_handoff(failed.pk) is True
    failed.refresh_from_db()
    assert failed.state == HandoffState.DELIVERED
    assert list(failed.attempt_log.order_by("started_at").values_list("number", flat=True)) == [
        1,
        2,
    ]
    first, second = rows(panel(olga.get(PAGE)))
    assert '<th scope="row">1</th>' in first
    assert '<th scope="row">2</th>' in second
    page = olga.get(f"/deliveries/handoff/{failed.pk}/").content.decode()
    assert "<strong>#1</strong>" in page
    assert "<strong>#2</strong>" in page
    for attempt in failed.attempt_log.all():
        assert f"<strong>#{attempt.number}</strong> · {when(attempt.started_at)}" in page
    listed = olga.get(LIST).content.decode()
    assert when(failed.attempt_log.get(number=2).started_at) in listed  # the last attempt
    assert f"POST {failed.target.endpoint}/checkout_sessions" in page
    assert API_KEY not in page
    assert "Bearer [redacted]" in page
    signature = failed.attempt_log.get(number=2).request_headers
    assert signature["webhook-signature"] == "[redacted]"
    assert signature["Signature"] == "[redacted]"
    assert signature["Idempotency-Key"] == f"oanp-{SESSION}"
    assert "v1," not in page
    assert "&quot;oanp_session_id&quot;:&quot;sess-handoff&quot;" in page  # the body as sent
    assert "req_9" in page  # a response header
    assert "cs_7" in page  # the response body
    assert "invalid_request" in page


def test_resend_is_audited_and_for_staff_only(failed: Handoff, shop: Merchant) -> None:
    alice = member("alice", MemberRole.MERCHANT_MANAGER, shop)
    with pytest.raises(PermissionDenied):
        actions.resend_deliveries(
            actor=alice, scope=tenancy.scope_of(alice), selection={"handoff": [failed.pk]}
        )
    assert not AuditEvent.objects.filter(action="handoff.redeliver").exists()
    olga = member("olga", MemberRole.OPERATOR)
    scope = tenancy.scope_of(olga)
    assert scope is not None
    with pytest.raises(ValueError, match="delivered already or not yours"):
        actions.resend_deliveries(
            actor=olga, scope=scope, selection={"handoff": [failed.pk, 999_999]}
        )
    assert not AuditEvent.objects.filter(action="handoff.redeliver").exists()
    assert (
        actions.resend_deliveries(actor=olga, scope=scope, selection={"handoff": [failed.pk]}) == {}
    )
    event = AuditEvent.objects.get(action="handoff.redeliver")
    assert (event.actor, event.target) == (olga, SESSION)
    assert event.detail == {"redelivered": True, "refused": ""}
    failed.refresh_from_db()
    assert failed.state == HandoffState.PENDING


def test_resend_asks_to_confirm_then_resends(failed: Handoff, shop: Merchant) -> None:
    olga = operator()
    asked = olga.post(BULK, {"handoff": [str(failed.pk)]})
    assert asked.status_code == 200
    assert "Resend 1 delivery now?" in asked.content.decode()
    failed.refresh_from_db()
    assert failed.state == HandoffState.FAILED
    done = olga.post(BULK, {"handoff": [str(failed.pk)], "confirm": "yes"}, follow=True)
    assert done.redirect_chain == [(f"/deliveries/handoff/{failed.pk}/", 302)]
    assert messages_in(done.content.decode()) == ["Resending 1 delivery now."]
    failed.refresh_from_db()
    assert failed.state == HandoffState.PENDING
    assert AuditEvent.objects.filter(action="handoff.redeliver").count() == 1


def test_a_pending_callback_is_resent_with_its_retry_budget_renewed(
    failed: Handoff, callback: CallbackCursor
) -> None:
    CallbackCursor.objects.filter(pk=callback.pk).update(
        attempts=3, next_attempt_at=timezone.now() + timedelta(hours=1)
    )
    olga = operator()
    page = olga.get(f"/deliveries/callback/{callback.pk}/").content.decode()
    assert "retrying" in page
    assert when(timezone.now() + timedelta(hours=1))[:10] in page  # the next retry's day
    assert 'id="resend-now"' in page
    assert "hooks.example" in listed(olga.get(LIST, {"state": "retrying"}))
    both = {"handoff": [str(failed.pk)], "callback": [str(callback.pk)]}
    asked = olga.post(BULK, both).content.decode()
    assert "Resend 2 deliveries now?" in asked
    done = olga.post(BULK, {**both, "confirm": "yes"}, follow=True)
    assert done.redirect_chain == [("/deliveries/", 302)]
    assert messages_in(done.content.decode()) == ["Resending 2 deliveries now."]
    callback.refresh_from_db()
    assert callback.attempts == 0
    event = AuditEvent.objects.get(action="callback.resend")
    assert event.target == SESSION
    assert event.detail == {"url": "https://hooks.example/oanp", "resent": True, "refused": ""}


def test_a_disabled_callback_is_refused_and_the_refusal_audited(
    failed: Handoff, callback: CallbackCursor
) -> None:
    AgentCallback.objects.filter(pk=callback.callback_id).update(
        disabled_at=timezone.now(), disabled_reason="the callback answered 410"
    )
    olga = operator()
    assert "abandoned" in listed(olga.get(LIST, {"state": "abandoned"}))
    done = olga.post(BULK, {"callback": [str(callback.pk)], "confirm": "yes"}, follow=True)
    said = messages_in(done.content.decode())
    assert said == [
        f"Not resent, the callback of {SESSION}: the callback of 'merchant-sfo' is disabled "
        "(the callback answered 410); its agent registers it again first"
    ]
    assert AuditEvent.objects.get(action="callback.resend").detail["resent"] is False


def test_a_delivered_one_cannot_be_resent(failed: Handoff) -> None:
    Handoff.objects.filter(pk=failed.pk).update(state=HandoffState.DELIVERED)
    olga = operator()
    assert 'id="resend-now"' not in olga.get(f"/deliveries/handoff/{failed.pk}/").content.decode()
    page = olga.post(BULK, {"handoff": [str(failed.pk)], "confirm": "yes"})
    assert page.status_code == 400
    assert "delivered already or not yours" in page.content.decode()
    assert not AuditEvent.objects.filter(action="handoff.redeliver").exists()


@pytest.mark.parametrize("selection", [[], ["x"], ["1²"], ["999999"]])
def test_a_bad_selection_changes_nothing(failed: Handoff, selection: list[str]) -> None:
    page = operator().post(BULK, {"handoff": selection, "confirm": "yes"})
    assert page.status_code == 400
    assert "Nothing was resent" in page.content.decode()
    assert "This selection cannot be resent:" in error_summary_in(page.content.decode())
    failed.refresh_from_db()
    assert failed.state == HandoffState.FAILED
    assert not AuditEvent.objects.filter(action="handoff.redeliver").exists()


def test_resend_needs_staff_post_and_csrf(failed: Handoff, shop: Merchant) -> None:
    alice = signed_in(member("alice", MemberRole.MERCHANT_MANAGER, shop))
    assert alice.post(BULK, {"handoff": [str(failed.pk)], "confirm": "yes"}).status_code == 403
    assert operator().get(BULK).status_code == 405
    strict = signed_in(member("ada", MemberRole.ADMIN), enforce_csrf_checks=True)
    assert strict.post(BULK, {"handoff": [str(failed.pk)], "confirm": "yes"}).status_code == 403
    failed.refresh_from_db()
    assert failed.state == HandoffState.FAILED
    assert not AuditEvent.objects.filter(action="handoff.redeliver").exists()
