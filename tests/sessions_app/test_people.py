"""Admins create and rename organisations and change who is what: a person's role and
organisation, whether they may sign in. Every change is audited, the last active admin stays
one, and nobody but an admin sees or does any of it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from sessions_app.models import (
    AuditEvent,
    MemberRole,
    Membership,
    Merchant,
    OrganisationKind,
)
from tests.sessions_app.pages import error_summary_in, messages_in
from tests.support.factories.accounts import PASSWORD, hosted_agent, member, merchant, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture
def boss() -> User:
    return member("boss", MemberRole.ADMIN)


@pytest.fixture
def admin_browser(boss: User) -> Client:
    return signed_in(boss)


def buyer_platform(slug: str) -> Merchant:
    return Merchant.objects.create(
        name=f"Platform {slug}", slug=slug, kind=OrganisationKind.BUYER_PLATFORM
    )


def test_an_admin_creates_an_organisation_of_either_kind(admin_browser: Client) -> None:
    answer = admin_browser.post(
        "/organisations/", {"name": "Fly Buyers", "kind": "buyer_platform"}, follow=True
    )
    created = Merchant.objects.get(name="Fly Buyers")
    assert answer.redirect_chain == [(f"/organisations/{created.pk}/", 302)]
    assert (created.slug, created.kind) == ("fly-buyers", OrganisationKind.BUYER_PLATFORM)
    assert messages_in(answer.content.decode()) == ["Organisation Fly Buyers created."]
    event = AuditEvent.objects.get(action="organisation.created")
    assert (event.actor.get_username(), event.target) == ("boss", "fly-buyers")
    assert event.detail == {"name": "Fly Buyers", "kind": "buyer_platform"}
    assert "Fly Buyers" in admin_browser.get("/organisations/").content.decode()


def test_a_taken_or_empty_name_is_refused_with_its_reason(admin_browser: Client) -> None:
    merchant("a")
    taken = admin_browser.post("/organisations/", {"name": "merchant A", "kind": "merchant"})
    assert taken.status_code == 400
    assert "An organisation is already named 'merchant A'." in error_summary_in(
        taken.content.decode()
    )
    blank = admin_browser.post("/organisations/", {"name": "  ", "kind": "merchant"})
    assert blank.status_code == 400
    odd = admin_browser.post("/organisations/", {"name": "X", "kind": "seller"})
    assert odd.status_code == 400
    assert Merchant.objects.count() == 1


def test_a_rename_keeps_the_slug_its_keys_are_owned_by(admin_browser: Client) -> None:
    shop = merchant("a")
    answer = admin_browser.post(f"/organisations/{shop.pk}/", {"name": "Alpha Air"}, follow=True)
    assert messages_in(answer.content.decode()) == ["Organisation renamed Alpha Air."]
    shop.refresh_from_db()
    assert (shop.name, shop.slug) == ("Alpha Air", "a")
    event = AuditEvent.objects.get(action="organisation.renamed")
    assert event.detail == {"was": "Merchant a", "now": "Alpha Air"}


def test_an_admin_changes_a_persons_role_and_organisation(admin_browser: Client) -> None:
    shop, platform = merchant("a"), buyer_platform("p")
    alice = member("alice", MemberRole.MERCHANT_MANAGER, shop)
    answer = admin_browser.post(
        f"/people/{alice.pk}/", {"role": "buyer_member", "organisation": platform.pk}, follow=True
    )
    assert messages_in(answer.content.decode()) == ["alice is now buyer-platform member."]
    membership = Membership.objects.get(user=alice)
    assert (membership.role, membership.merchant) == (MemberRole.BUYER_MEMBER, platform)
    event = AuditEvent.objects.get(action="person.changed")
    assert event.detail == {
        "was": {"role": "merchant_manager", "organisation": "a"},
        "now": {"role": "buyer_member", "organisation": "p"},
    }


@pytest.mark.parametrize(
    ("role", "organisation", "reason"),
    [
        ("merchant_member", "p", "A merchant member belongs to a merchant, and Platform p is a"),
        ("buyer_member", "a", "A buyer-platform member belongs to a buyer platform"),
        ("merchant_manager", None, "A merchant manager belongs to an organisation: choose one."),
        ("operator", "a", "An operator sees every organisation and belongs to none."),
    ],
)
def test_a_role_that_does_not_fit_its_organisation_is_refused(
    admin_browser: Client, role: str, organisation: str | None, reason: str
) -> None:
    shop, platform = merchant("a"), buyer_platform("p")
    alice = member("alice", MemberRole.MERCHANT_MANAGER, shop)
    chosen = {"a": shop.pk, "p": platform.pk, None: ""}[organisation]
    answer = admin_browser.post(f"/people/{alice.pk}/", {"role": role, "organisation": chosen})
    assert answer.status_code == 400
    assert reason in error_summary_in(answer.content.decode())
    assert Membership.objects.get(user=alice).role == MemberRole.MERCHANT_MANAGER
    assert not AuditEvent.objects.filter(action="person.changed").exists()


def test_a_merchant_member_sees_agents_but_changes_none() -> None:
    shop = merchant("a")
    hosted_agent(shop, "hosted-a")
    reader = signed_in(member("reader", MemberRole.MERCHANT_MEMBER, shop))
    listing = reader.get("/agents/")
    assert listing.status_code == 200
    assert "hosted-a" in listing.content.decode()
    assert "New agent" not in listing.content.decode()
    assert "Issue a key" not in reader.get("/agents/hosted-a/").content.decode()
    assert reader.get("/agents/new/").status_code == 403
    assert reader.get("/agents/hosted-a/edit/").status_code == 403
    assert reader.post("/agents/hosted-a/keys/", {"label": "x"}).status_code == 403
    assert reader.get("/exports/").status_code == 200


def test_the_last_active_admin_is_neither_demoted_nor_deactivated(
    admin_browser: Client, boss: User
) -> None:
    demoted = admin_browser.post(f"/people/{boss.pk}/", {"role": "operator", "organisation": ""})
    assert demoted.status_code == 400
    assert "The last active admin is boss; make another admin first." in error_summary_in(
        demoted.content.decode()
    )
    gone = admin_browser.post(f"/people/{boss.pk}/deactivate/")
    assert gone.status_code == 400
    assert "boss was not deactivated: the last active admin is boss" in error_summary_in(
        gone.content.decode()
    )
    boss.refresh_from_db()
    assert boss.is_active
    assert Membership.objects.get(user=boss).role == MemberRole.ADMIN
    # A deactivated admin does not count: it cannot sign in to put things right.
    other = member("other", MemberRole.ADMIN)
    other.is_active = False
    other.save()
    assert admin_browser.post(f"/people/{boss.pk}/deactivate/").status_code == 400
    other.is_active = True
    other.save()
    answer = admin_browser.post(f"/people/{boss.pk}/", {"role": "operator", "organisation": ""})
    assert answer.status_code == 302
    assert Membership.objects.get(user=boss).role == MemberRole.OPERATOR


def test_a_deactivated_person_cannot_sign_in_until_reactivated(admin_browser: Client) -> None:
    alice = member("alice", MemberRole.MERCHANT_MANAGER, merchant("a"))
    alices_browser = signed_in(alice)
    answer = admin_browser.post(f"/people/{alice.pk}/deactivate/", follow=True)
    assert messages_in(answer.content.decode()) == ["alice deactivated."]
    assert not Client().login(username="alice", password=PASSWORD)
    assert alices_browser.get("/").status_code == 302  # the open sign-in ends too
    admin_browser.post(f"/people/{alice.pk}/reactivate/")
    assert Client().login(username="alice", password=PASSWORD)
    actions = list(
        AuditEvent.objects.filter(target="alice").order_by("at").values_list("action", flat=True)
    )
    assert actions == ["person.deactivated", "person.reactivated"]


def _probes(shop: Merchant, person: User) -> list[tuple[str, str, dict[str, object]]]:
    return [
        ("get", "/organisations/", {}),
        ("post", "/organisations/", {"name": "Mine", "kind": "merchant"}),
        ("get", f"/organisations/{shop.pk}/", {}),
        ("post", f"/organisations/{shop.pk}/", {"name": "Renamed"}),
        ("get", "/people/", {}),
        ("post", "/people/invite/", {"email": "x@example.com", "role": "admin"}),
        ("get", f"/people/{person.pk}/", {}),
        ("post", f"/people/{person.pk}/", {"role": "admin", "organisation": ""}),
        ("post", f"/people/{person.pk}/deactivate/", {}),
        ("post", f"/people/{person.pk}/reactivate/", {}),
    ]


@pytest.mark.parametrize(
    "role",
    [
        MemberRole.MERCHANT_MANAGER,
        MemberRole.MERCHANT_MEMBER,
        MemberRole.BUYER_MEMBER,
        MemberRole.OPERATOR,
    ],
)
def test_nobody_but_an_admin_sees_or_changes_people(role: str, boss: User) -> None:
    mine = buyer_platform("mine") if role == MemberRole.BUYER_MEMBER else merchant("mine")
    theirs = merchant("theirs")
    neighbour = member("neighbour", MemberRole.MERCHANT_MANAGER, theirs)
    probe = signed_in(member("probe", role, mine if role != MemberRole.OPERATOR else None))
    for target, person in ((mine, boss), (theirs, neighbour)):
        for method, path, data in _probes(target, person):
            answer = getattr(probe, method)(path, data)
            assert answer.status_code == 403, (method, path)
            assert "neighbour" not in answer.content.decode()
    assert Merchant.objects.filter(name__in=("Mine", "Renamed")).count() == 0
    assert not AuditEvent.objects.exists()
    neighbour.refresh_from_db()
    assert neighbour.is_active
    assert Membership.objects.get(user=neighbour).role == MemberRole.MERCHANT_MANAGER


@pytest.mark.django_db(transaction=True)
def test_the_migration_makes_each_merchant_member_a_manager() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate([("sessions_app", "0006_currency_limits")])
    old = executor.loader.project_state([("sessions_app", "0006_currency_limits")]).apps
    shop = old.get_model("sessions_app", "Merchant").objects.create(name="A", slug="a")
    memberships = old.get_model("sessions_app", "Membership").objects
    for name, role, tied in (("alice", "merchant", shop), ("staff", "operator", shop)):
        user = User.objects.create_user(name)
        memberships.create(user_id=user.pk, role=role, merchant=tied)
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    roles = {m.user.username: (m.role, m.merchant_id) for m in Membership.objects.all()}
    assert roles == {"alice": ("merchant_manager", shop.pk), "staff": ("operator", None)}
    assert Merchant.objects.get(slug="a").kind == OrganisationKind.MERCHANT
