"""Saved views of the sessions list: saved, opened, renamed and deleted by their owner, shared
with the owner's team only, and refused to everyone else."""

from __future__ import annotations

import pytest
from django.test import Client

from sessions_app.models import MemberRole, SavedView
from tests.support.factories.accounts import member, merchant, signed_in

pytestmark = pytest.mark.django_db


def save(browser: Client, name: str, query: str, *, shared: bool = False) -> SavedView:
    data = {"name": name, "query": query} | ({"shared": "on"} if shared else {})
    answer = browser.post("/views/", data)
    assert answer.status_code == 302, answer.content.decode()
    return SavedView.objects.get(name=" ".join(name.split()))


def test_a_view_keeps_the_filters_and_sort_and_opens_the_list_through_them() -> None:
    browser = signed_in(member("op", MemberRole.OPERATOR))
    view = save(
        browser,
        "  Violations   in EUR ",
        "currency=EUR&violation=yes&sort=-activity&cursor=abc&since=3&item=",
    )
    assert view.name == "Violations in EUR"
    # A page's cursor and the live list's since are the moment's; blanks say nothing.
    assert view.query == "currency=EUR&violation=yes&sort=-activity"
    answer = browser.get(f"/views/{view.pk}/")
    assert answer.status_code == 302
    assert answer["Location"] == "/sessions/?currency=EUR&violation=yes&sort=-activity"
    page = browser.get(answer["Location"]).content.decode()
    assert f'href="/views/{view.pk}/">Violations in EUR</a>' in page


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"name": "", "query": ""}, "Name: This field is required."),
        ({"name": "   ", "query": ""}, "Name: This field is required."),
        ({"name": "x" * 101, "query": ""}, "at most 100 characters"),
        ({"name": "Bad", "query": "currency=EURO"}, "These filters cannot be applied"),
        ({"name": "Bad", "query": "lasted_min=-1"}, "These filters cannot be applied"),
    ],
)
def test_a_view_that_cannot_be_saved_is_a_400_that_says_why(
    data: dict[str, str], message: str
) -> None:
    browser = signed_in(member("op", MemberRole.OPERATOR))
    answer = browser.post("/views/", data)
    assert answer.status_code == 400
    assert message in answer.content.decode()
    assert not SavedView.objects.exists()


def test_one_owner_names_each_view_once() -> None:
    browser = signed_in(member("op", MemberRole.OPERATOR))
    first = save(browser, "Live", "state=NEGOTIATING")
    answer = browser.post("/views/", {"name": "Live", "query": "state=OPENING"})
    assert answer.status_code == 400
    assert "You already have a view named &#x27;Live&#x27;." in answer.content.decode()
    other = save(browser, "Opening", "state=OPENING")
    renamed = browser.post(f"/views/{other.pk}/rename/", {"name": "Live"})
    assert renamed.status_code == 400
    assert SavedView.objects.get(pk=other.pk).name == "Opening"
    assert SavedView.objects.get(pk=first.pk).query == "state=NEGOTIATING"


def test_the_owner_renames_and_deletes_its_views() -> None:
    browser = signed_in(member("op", MemberRole.OPERATOR))
    view = save(browser, "Live", "state=NEGOTIATING")
    assert browser.post(f"/views/{view.pk}/rename/", {"name": "Running"}).status_code == 302
    assert SavedView.objects.get(pk=view.pk).name == "Running"
    assert browser.post(f"/views/{view.pk}/rename/", {"name": " "}).status_code == 400
    assert browser.post(f"/views/{view.pk}/delete/").status_code == 302
    assert not SavedView.objects.exists()


def test_a_shared_view_reaches_the_team_and_no_one_else() -> None:
    shop, other = merchant("shop"), merchant("other")
    owner = signed_in(member("manager", MemberRole.MERCHANT_MANAGER, shop))
    colleague = signed_in(member("colleague", MemberRole.MERCHANT_MEMBER, shop))
    outsider = signed_in(member("outsider", MemberRole.MERCHANT_MANAGER, other))
    operator = signed_in(member("op", MemberRole.OPERATOR))
    shared = save(owner, "Shop's violations", "violation=yes", shared=True)
    private = save(owner, "Mine", "state=AGREED")
    # The organisation opens the shared view, not the private one; it changes neither.
    assert colleague.get(f"/views/{shared.pk}/").status_code == 302
    assert "Shop&#x27;s violations" in colleague.get("/views/").content.decode()
    assert colleague.get(f"/views/{private.pk}/").status_code == 404
    assert colleague.post(f"/views/{shared.pk}/rename/", {"name": "Taken"}).status_code == 403
    assert colleague.post(f"/views/{shared.pk}/delete/").status_code == 403
    # Another organisation, and the staff, see neither: to them it is no view at all.
    for stranger in (outsider, operator):
        for view in (shared, private):
            assert stranger.get(f"/views/{view.pk}/").status_code == 404
            assert stranger.post(f"/views/{view.pk}/rename/", {"name": "x"}).status_code == 404
            assert stranger.post(f"/views/{view.pk}/delete/").status_code == 404
        listed = stranger.get("/views/").content.decode()
        assert "Shop&#x27;s violations" not in listed
        assert "violation=yes" not in stranger.get("/sessions/").content.decode()
    assert set(SavedView.objects.values_list("name", flat=True)) == {"Shop's violations", "Mine"}


def test_an_operators_shared_view_reaches_operators_and_admins_only() -> None:
    operator = signed_in(member("op", MemberRole.OPERATOR))
    admin = signed_in(member("root", MemberRole.ADMIN))
    tenant = signed_in(member("manager", MemberRole.MERCHANT_MANAGER, merchant("shop")))
    view = save(operator, "Stuck", "verdict=fair_but_stuck", shared=True)
    assert admin.get(f"/views/{view.pk}/").status_code == 302
    assert tenant.get(f"/views/{view.pk}/").status_code == 404
