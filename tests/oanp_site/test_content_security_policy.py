"""Every answer carries a Content-Security-Policy: a page the strict one of the dashboard (this
origin only, nothing inline), anything else one that loads nothing; an answer's own policy is
kept; with DEBUG on, Django's technical error pages, styled inline, go without. The pages'
compliance is judged in a browser: tests/sessions_app/test_csp_browser.py."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.test import Client, override_settings
from django.urls import path

from oanp_site.middleware import csp_header

pytestmark = pytest.mark.django_db

PAGES = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "font-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; "
    "form-action 'self'; frame-ancestors 'none'"
)
NOTHING = "default-src 'none'; frame-ancestors 'none'"


def test_the_settings_write_the_strict_policy() -> None:
    assert csp_header(settings.OANP_CSP_PAGES) == PAGES
    assert csp_header(settings.OANP_CSP_OTHER) == NOTHING


# The guard refuses a NUL before any view: the policy's middleware stands before it.
@pytest.mark.parametrize(
    "url", ["/login/", "/no-such-page/", "/sessions/%00/"], ids=["page", "404", "guard's 404"]
)
def test_a_page_has_the_strict_policy(url: str) -> None:
    response = Client().get(url)
    assert response["Content-Type"].startswith("text/html")
    assert response["Content-Security-Policy"] == PAGES


@pytest.mark.parametrize(
    "url",
    ["/oanp/v0.1/openapi.json", "/oanp/v0.1/no-such-endpoint", "/healthz", "/static/css/app.css"],
    ids=["JSON", "problem+json", "probe", "static file"],
)
def test_anything_else_loads_nothing(url: str) -> None:
    response = Client().get(url)
    assert not response["Content-Type"].startswith("text/html")
    assert response["Content-Security-Policy"] == NOTHING


def own_policy(request: HttpRequest) -> HttpResponse:
    response = HttpResponse("<p>framed by design</p>")
    response["Content-Security-Policy"] = "frame-ancestors 'self'"
    return response


urlpatterns = [path("own/", own_policy)]


def test_an_answer_keeps_a_policy_of_its_own() -> None:
    with override_settings(ROOT_URLCONF=__name__):
        response = Client().get("/own/")
    assert response["Content-Security-Policy"] == "frame-ancestors 'self'"


def test_with_debug_on_the_technical_error_pages_go_without() -> None:
    """They style and script themselves inline; the pages of the site keep their policy."""
    client = Client()
    with override_settings(DEBUG=True):
        technical = client.get("/no-such-page/")
        page = client.get("/login/")
    assert technical.status_code == 404
    assert "Content-Security-Policy" not in technical
    assert page["Content-Security-Policy"] == PAGES
