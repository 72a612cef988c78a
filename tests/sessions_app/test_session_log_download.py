"""A session's log downloaded from its page: the API's log document with the arbiter's keys,
which ``oanp verify`` checks from the file alone; for those who may see the session only."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.test import Client

from oanp.net import cli
from sessions_app.models import AgentProfile, MemberRole
from tests.support.factories.accounts import member, merchant, signed_in
from tests.support.factories.agents import ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db

SESSION = "sess-log"
DOWNLOAD = f"/sessions/{SESSION}/log.json"


@pytest.fixture
def run(client: Client) -> ClientNegotiation:
    negotiation = ClientNegotiation(
        client, make_agent("buyer-001", "buyer"), make_agent("merchant-sfo", "merchant"), SESSION
    )
    negotiation.open()
    return negotiation


def verified(document: dict[str, object], tmp_path: Path) -> tuple[int, str]:
    """What ``oanp verify FILE`` answers for ``document`` saved as a file, and what it says."""
    path = tmp_path / "log.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    out = io.StringIO()
    return cli.verify(path, jwks_path=None, since_path=None, out=out), out.getvalue()


def test_an_operator_downloads_a_log_that_oanp_verify_checks_alone(
    run: ClientNegotiation, tmp_path: Path
) -> None:
    entries = run.finish()
    operator = signed_in(member("otto", MemberRole.OPERATOR))
    page = operator.get(f"/sessions/{SESSION}/").content.decode()
    assert f'id="log-download" href="{DOWNLOAD}" download>Download log (JSON)</a>' in page

    response = operator.get(DOWNLOAD)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="{SESSION}.log.json"'
    document = json.loads(response.content)
    # The API's own document, and the keys beside it.
    assert document["session_id"] == SESSION
    assert document["entries"] == entries
    assert entries[-1]["envelope"]["type"] == "session.agree"
    assert [key["kid"] for key in document["jwks"]["keys"]]

    code, said = verified(document, tmp_path)
    assert code == 0, said
    assert said.splitlines()[-1].startswith("VERIFIED: ")
    assert "1/1 agreements valid" in said
    # The keys it carries are what check the agreement: without them, I6 fails.
    code, said = verified({"entries": document["entries"]}, tmp_path)
    assert code == 1
    assert "no key set to verify the agreement with" in said


def test_a_live_sessions_log_so_far_downloads_and_verifies(
    run: ClientNegotiation, tmp_path: Path
) -> None:
    run.step()
    operator = signed_in(member("otto", MemberRole.OPERATOR))
    document = json.loads(operator.get(DOWNLOAD).content)
    assert len(document["entries"]) == 2
    assert verified(document, tmp_path)[0] == 0


def test_the_log_is_for_those_who_may_see_the_session(run: ClientNegotiation) -> None:
    shop = merchant("skyways")
    AgentProfile.objects.create(merchant=shop, agent_id="merchant-sfo", mode="external")
    own = signed_in(member("mia", MemberRole.MERCHANT_MEMBER, shop))
    assert own.get(DOWNLOAD).status_code == 200
    other = signed_in(member("rob", MemberRole.MERCHANT_MANAGER, merchant("railco")))
    refused = other.get(DOWNLOAD)
    assert refused.status_code == 404
    assert SESSION.encode() not in refused.content.replace(DOWNLOAD.encode(), b"")
    assert (
        signed_in(member("otto", MemberRole.OPERATOR))
        .get("/sessions/sess-nowhere/log.json")
        .status_code
        == 404
    )
    signed_out = Client().get(DOWNLOAD)
    assert signed_out.status_code == 302
    assert signed_out["Location"].startswith("/login/")
