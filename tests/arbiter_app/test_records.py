"""The arbiter's records on PostgreSQL: an append-only log the database itself guards, unique
entries, API keys stored only as digests, and signing keys that rotate without breaking
old agreements."""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.core.cache import cache
from django.core.management import CommandError, call_command
from django.db import DatabaseError, connection, transaction

from arbiter_app import services
from arbiter_app.models import AgentCredential, Entry, KeyState, SigningKey
from oanp.audit import verify_log
from tests.support.factories.agents import Agent, ClientNegotiation, make_agent

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_throttle() -> Iterator[None]:
    cache.clear()
    yield
    cache.clear()


def entries() -> list[tuple[Any, ...]]:
    return list(Entry.objects.order_by("id").values_list())


def test_the_tests_run_on_postgresql() -> None:
    assert connection.vendor == "postgresql"


# Append-only ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda: Entry.objects.filter(seq=3).update(type="offer.accept"), id="update"),
        pytest.param(lambda: Entry.objects.all().update(answer=""), id="update-all"),
        pytest.param(lambda: Entry.objects.filter(seq=9).delete(), id="delete"),
        pytest.param(lambda: Entry.objects.all().delete(), id="delete-all"),
    ],
)
def test_the_orm_cannot_change_an_entry(logged: ClientNegotiation, change: Any) -> None:
    before = entries()
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        change()
    assert entries() == before


def test_saving_a_changed_entry_is_refused(logged: ClientNegotiation) -> None:
    entry = Entry.objects.get(seq=3)
    entry.envelope = entry.envelope.replace("320", "420")
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        entry.save()
    assert Entry.objects.get(seq=3).envelope != entry.envelope


@pytest.mark.parametrize(
    "sql",
    [
        "UPDATE arbiter_app_entry SET envelope = '{}' WHERE seq = 3",
        "UPDATE arbiter_app_entry SET entry_hash = prev_hash",
        "DELETE FROM arbiter_app_entry WHERE seq = 9",
        "DELETE FROM arbiter_app_entry",
    ],
)
def test_raw_sql_cannot_change_an_entry(logged: ClientNegotiation, sql: str) -> None:
    before = entries()
    with (
        pytest.raises(DatabaseError, match="append-only"),
        transaction.atomic(),
        connection.cursor() as cursor,
    ):
        cursor.execute(sql)
    assert entries() == before


def test_entries_can_still_be_appended(logged: ClientNegotiation) -> None:
    # The guard refuses changes, not inserts: a second session adds to the same table.
    count = Entry.objects.count()
    other = ClientNegotiation(
        logged.client, logged.buyer_key, logged.merchant_key, session_id="sess-two", tag="two-"
    )
    other.open()
    assert Entry.objects.count() == count + 1


@pytest.mark.parametrize(
    "clash",
    [
        pytest.param({"message_id": "another-id"}, id="same-seq"),
        pytest.param({"seq": 99}, id="same-message-id"),
    ],
)
def test_an_entry_is_unique_by_seq_and_by_message_id(
    logged: ClientNegotiation, clash: dict[str, Any]
) -> None:
    copy = Entry.objects.get(seq=3)
    copy.pk = None
    for name, value in clash.items():
        setattr(copy, name, value)
    with pytest.raises(DatabaseError, match=r"entry_(seq|message)_unique"), transaction.atomic():
        copy.save(force_insert=True)
    assert Entry.objects.count() == 9


# API keys ------------------------------------------------------------------------------------


def create_agent(*args: str) -> dict[str, Any]:
    out = io.StringIO()
    call_command("create_agent", *args, stdout=out)
    printed: dict[str, Any] = json.loads(out.getvalue())
    return printed


def test_create_agent_prints_a_key_that_authenticates(client: Any) -> None:
    printed = create_agent("--role", "buyer", "--agent-id", "buyer-cli")
    assert set(printed) == {"agent_id", "role", "api_key"}
    assert (printed["agent_id"], printed["role"]) == ("buyer-cli", "buyer")
    buyer = Agent("buyer-cli", "buyer", printed["api_key"])
    run = ClientNegotiation(client, buyer, make_agent("merchant-sfo", "merchant"))
    run.buyer.agent_id = "buyer-cli"
    assert run.open().status_code == 201
    summary = client.get("/oanp/v0.1/sessions/sess-sfo-jfk", headers=buyer.headers)
    assert json.loads(summary.content)["buyer"]["agent_id"] == "buyer-cli"


def test_create_agent_records_the_owner_it_is_given_and_prints_it() -> None:
    printed = create_agent("--role", "buyer", "--agent-id", "buyer-sky", "--owner", "skyfare")
    assert set(printed) == {"agent_id", "role", "api_key", "owner"}
    assert printed["owner"] == "skyfare"
    assert AgentCredential.objects.get(agent_id="buyer-sky").owner == "skyfare"
    create_agent("--role", "buyer", "--agent-id", "buyer-nobody")
    assert AgentCredential.objects.get(agent_id="buyer-nobody").owner == ""


def test_only_the_keys_digest_is_stored() -> None:
    printed = create_agent("--role", "merchant", "--agent-id", "merchant-cli")
    api_key = printed["api_key"]
    secret = api_key.split("_", 2)[2]  # oanp_<prefix>_<secret>; the secret may hold "_"
    credential = AgentCredential.objects.get(agent_id="merchant-cli")
    assert credential.digest == hashlib.sha256(api_key.encode()).hexdigest()
    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM arbiter_app_agentcredential WHERE agent_id = 'merchant-cli'")
        (row,) = cursor.fetchall()
    assert not [column for column in row if secret in str(column)]


def test_a_revoked_key_no_longer_authenticates(client: Any) -> None:
    printed = create_agent("--role", "buyer", "--agent-id", "buyer-revoked")
    headers = {"Authorization": f"Bearer {printed['api_key']}"}
    assert client.get("/oanp/v0.1/sessions/none", headers=headers).status_code == 404
    services.revoke_credential(credential=AgentCredential.objects.get(agent_id="buyer-revoked"))
    refused = client.get("/oanp/v0.1/sessions/none", headers=headers)
    assert refused.status_code == 401
    assert json.loads(refused.content)["code"] == "unauthorized"


def test_a_second_key_of_the_same_agent_survives_the_firsts_revocation(client: Any) -> None:
    first = create_agent("--role", "buyer", "--agent-id", "buyer-two-keys")
    second = create_agent("--role", "buyer", "--agent-id", "buyer-two-keys")
    assert first["api_key"] != second["api_key"]
    credential = AgentCredential.objects.get(
        digest=hashlib.sha256(first["api_key"].encode()).hexdigest()
    )
    services.revoke_credential(credential=credential)
    for printed, status in ((first, 401), (second, 404)):
        headers = {"Authorization": f"Bearer {printed['api_key']}"}
        assert client.get("/oanp/v0.1/sessions/none", headers=headers).status_code == status


@pytest.mark.parametrize(
    "args",
    [
        ("--role", "buyer", "--agent-id", "not an id"),
        ("--role", "buyer", "--agent-id", "x" * 65),
        ("--role", "buyer", "--agent-id", ""),
        ("--role", "arbiter", "--agent-id", "arbiter-1"),
        ("--role", "seller", "--agent-id", "seller-1"),
        ("--agent-id", "buyer-no-role"),
        ("--role", "buyer", "--agent-id", "buyer-1", "--owner", "o" * 65),
    ],
)
def test_create_agent_refuses_a_bad_id_role_or_owner(args: tuple[str, ...]) -> None:
    with pytest.raises(CommandError):
        create_agent(*args)
    assert AgentCredential.objects.count() == 0


# Signing keys --------------------------------------------------------------------------------


def test_the_first_signing_key_exists_after_migrate(client: Any) -> None:
    # Nothing in this test asked for a key: migrate's post_migrate handler made it.
    active = SigningKey.objects.filter(state=KeyState.ACTIVE)
    assert active.count() == 1
    jwks = json.loads(client.get("/.well-known/jwks.json").content)
    assert [k["kid"] for k in jwks["keys"]] == [active.get().kid]
    assert "d" not in jwks["keys"][0]  # public halves only


def test_rotation_keeps_old_agreements_verifiable(client: Any, logged: ClientNegotiation) -> None:
    old_log = logged.log()
    old_kid = SigningKey.objects.get(state=KeyState.ACTIVE).kid
    assert old_log[-1]["envelope"]["payload"]["kid"] == old_kid

    out = io.StringIO()
    call_command("rotate_signing_key", stdout=out)
    new = SigningKey.objects.get(state=KeyState.ACTIVE)
    assert new.kid != old_kid
    assert new.kid in out.getvalue()
    assert SigningKey.objects.get(kid=old_kid).state == KeyState.RETIRING

    later = ClientNegotiation(
        client, logged.buyer_key, logged.merchant_key, session_id="sess-after", tag="after-"
    )
    later.open()
    new_log = later.finish()
    assert new_log[-1]["envelope"]["type"] == "session.agree"
    assert new_log[-1]["envelope"]["payload"]["kid"] == new.kid

    jwks = json.loads(client.get("/.well-known/jwks.json").content)
    assert {k["kid"] for k in jwks["keys"]} == {old_kid, new.kid}
    for log in (old_log, new_log):
        report = verify_log(log, jwks)
        assert report.ok, report.summary()
    # Without the retiring key the old agreement cannot be checked: the JWKS is what saves it.
    only_new = {"keys": [k for k in jwks["keys"] if k["kid"] == new.kid]}
    assert not verify_log(old_log, only_new).ok


def test_rotation_to_es256(client: Any) -> None:
    call_command("rotate_signing_key", "--alg", "ES256", stdout=io.StringIO())
    active = SigningKey.objects.get(state=KeyState.ACTIVE)
    assert active.alg == "ES256"
    jwks = json.loads(client.get("/.well-known/jwks.json").content)
    assert {k["kid"] for k in jwks["keys"]} >= {active.kid}
    assert len(jwks["keys"]) == 2
