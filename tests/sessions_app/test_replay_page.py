"""The replay page as the server renders it: who may see it (the session page's rules), a
running session has none (409), a bad ``?step=`` is a 400 that says what to fix, every step
deep-linked renders what the offline auditor reports for the log up to it, and the frames the
page embeds for stepping are ``oanp.audit.replay``'s of the log the API serves."""

from __future__ import annotations

import html
import json
import re
from typing import Any

import pytest
from django.test import Client

from oanp.audit.invariants import audit_log
from oanp.audit.replay import replay
from sessions_app.models import AgentProfile, MemberRole
from tests.support.factories.accounts import member, merchant, signed_in
from tests.support.factories.agents import ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db

BUYER = "buyer-001"


def negotiation(client: Client, shop: str, *, finish: bool = True) -> ClientNegotiation:
    """A session of merchant ``shop``'s external agent, ``sess-{shop}``; agreed when finished."""
    AgentProfile.objects.create(merchant=merchant(shop), agent_id=f"agent-{shop}", mode="external")
    run = ClientNegotiation(
        client,
        make_agent(BUYER, "buyer") if shop == "a" else make_agent(f"{BUYER}-{shop}", "buyer"),
        make_agent(f"agent-{shop}", "merchant"),
        session_id=f"sess-{shop}",
        tag=f"{shop}-",
    )
    run.open()
    if finish:
        run.finish()
    return run


@pytest.fixture
def agreed(client: Client) -> ClientNegotiation:
    return negotiation(client, "a")


@pytest.fixture
def operator() -> Client:
    return signed_in(member("operator", MemberRole.OPERATOR))


def page(browser: Client, session_id: str, query: str = "") -> Any:
    return browser.get(f"/sessions/{session_id}/replay/{query}")


def embedded_frames(body: str) -> list[dict[str, Any]]:
    match = re.search(r'<script id="replay-frames" type="application/json">(.*?)</script>', body)
    assert match, "no frames in the page"
    frames: list[dict[str, Any]] = json.loads(match.group(1))
    return frames


def words(fragment: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def rendered_checks(body: str) -> list[dict[str, Any]]:
    """The checklist as the server wrote it: per invariant, its status, problems and notes."""
    checks = []
    for invariant, item in re.findall(
        r'<li class="check [^"]*" data-invariant="(I\d)">(.*?)</li>\n', body
    ):
        status = re.search(r'<span class="check-status">(.*?)</span>', item)
        assert status
        lists = {
            kind: [words(li) for li in re.findall(r"<li>(.*?)</li>", found.group(1))]
            if (found := re.search(rf'<ul class="{kind}">(.*?)</ul>', item))
            else []
            for kind in ("problems", "notes")
        }
        checks.append({"invariant": invariant, "status": status.group(1), **lists})
    return checks


def field(body: str, name: str) -> str:
    match = re.search(rf'data-field="{re.escape(name)}"[^>]*>(.*?)</', body)
    assert match, f"no field {name}"
    return words(match.group(1))


def test_the_frames_are_oanp_replays_of_the_log_the_api_serves(
    agreed: ClientNegotiation, operator: Client, client: Client
) -> None:
    log = agreed.log()
    keys = client.get("/.well-known/jwks.json").json()
    answer = page(operator, "sess-a")
    assert answer.status_code == 200
    frames = embedded_frames(answer.content.decode())
    assert frames == [f.as_json() for f in replay(log, keys)]
    assert len(frames) == len(log) == 9
    assert frames[-1]["outcome"] == "agreed"


def test_without_a_step_the_first_is_shown(agreed: ClientNegotiation, operator: Client) -> None:
    body = page(operator, "sess-a").content.decode()
    assert field(body, "entry.type") == "session.open"
    assert 'id="replay-position" for="id_step">1 of 9</output>' in body
    assert 'aria-disabled="true">← Previous</a>' in body
    assert 'href="?step=2">Next →</a>' in body


def test_every_step_deep_linked_renders_what_the_auditor_reports_up_to_it(
    agreed: ClientNegotiation, operator: Client, client: Client
) -> None:
    log = agreed.log()
    keys = client.get("/.well-known/jwks.json").json()
    for k in range(1, len(log) + 1):
        answer = page(operator, "sess-a", f"?step={k}")
        assert answer.status_code == 200
        body = answer.content.decode()
        audit = audit_log(log[:k], keys)
        assert rendered_checks(body) == [
            {
                "invariant": r.invariant,
                "status": r.status.value,
                "problems": r.problems,
                "notes": r.notes,
            }
            for r in audit.results.values()
        ], f"step {k}"
        entry = log[k - 1]
        assert field(body, "entry.seq") == str(entry["seq"])
        assert field(body, "entry.type") == entry["envelope"]["type"]
        assert field(body, "entry.role") == entry["envelope"]["sender"]["role"]
        assert field(body, "entry.received_at") == entry["received_at"]
        assert f'value="{k}"' in body


def test_a_step_shows_the_standing_prices_and_the_verdicts_so_far(
    agreed: ClientNegotiation, operator: Client
) -> None:
    log = agreed.log()
    verdict = next(e for e in log if e["envelope"]["type"] == "round.verdict")
    step = verdict["seq"]
    body = page(operator, "sess-a", f"?step={step}").content.decode()
    payload = verdict["envelope"]["payload"]
    assert field(body, "standing.buyer") == str(payload["buyer_price"])
    assert field(body, "standing.merchant") == str(payload["merchant_price"])
    assert field(body, "phase") == "negotiating"
    verdicts = re.search(r'<table id="replay-verdicts"[^>]*>.*?<tbody>(.*?)</tbody>', body, re.S)
    assert verdicts
    assert words(verdicts.group(1)).startswith(f"1 {payload['status']} {payload['rationale']}")

    before = page(operator, "sess-a", f"?step={step - 1}").content.decode()
    assert "No verdict yet." in before


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ("0", "Ensure this value is greater than or equal to 1."),
        ("10", "Ensure this value is less than or equal to 9."),
        ("-3", "Ensure this value is greater than or equal to 1."),
        ("two", "Enter a whole number."),
        ("1.5", "Enter a whole number."),
    ],
)
def test_a_step_out_of_range_or_not_a_whole_number_is_a_400_that_says_so(
    agreed: ClientNegotiation, operator: Client, step: str, message: str
) -> None:
    answer = page(operator, "sess-a", f"?step={step}")
    assert answer.status_code == 400
    body = answer.content.decode()
    assert "This step cannot be shown. Please fix:" in body
    assert f'<a href="#id_step">Step: {html.escape(message)}</a>' in body
    assert 'aria-invalid="true"' in body
    assert 'id="replay-frames"' not in body


def test_a_running_session_has_no_replay_but_a_way_back(client: Client, operator: Client) -> None:
    negotiation(client, "a", finish=False)
    answer = page(operator, "sess-a")
    assert answer.status_code == 409
    body = answer.content.decode()
    assert "This session has not ended" in body
    assert 'href="/sessions/sess-a/"' in body
    assert 'id="replay-frames"' not in body
    assert 'id="replay-link"' not in operator.get("/sessions/sess-a/").content.decode()


def test_an_ended_sessions_page_links_to_its_replay(
    agreed: ClientNegotiation, operator: Client
) -> None:
    body = operator.get("/sessions/sess-a/").content.decode()
    assert 'id="replay-link" href="/sessions/sess-a/replay/"' in body


def test_a_merchant_replays_its_own_sessions_only(client: Client) -> None:
    negotiation(client, "a")
    negotiation(client, "b")
    alice = signed_in(member("alice", MemberRole.MERCHANT_MANAGER, merchant("a")))
    assert page(alice, "sess-a").status_code == 200
    assert page(alice, "sess-b").status_code == 404
    assert page(alice, "sess-b", "?step=1").status_code == 404
    assert page(alice, "sess-none").status_code == 404


def test_signing_in_comes_first(agreed: ClientNegotiation, client: Client) -> None:
    answer = page(client, "sess-a")
    assert answer.status_code == 302
    assert answer["Location"].startswith("/login/")


def test_a_replay_is_only_read(agreed: ClientNegotiation, operator: Client) -> None:
    assert operator.post("/sessions/sess-a/replay/").status_code == 405
