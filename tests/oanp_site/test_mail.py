"""The site's mail settings from the environment: EMAIL_URL, Django's EMAIL_* variables, or
neither (printed on a development machine, a local SMTP server in production)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ImproperlyConfigured

from oanp_site import mail

SMTP = "django.core.mail.backends.smtp.EmailBackend"


def test_an_smtp_url_with_starttls_and_an_encoded_password() -> None:
    found = mail.from_url("smtp://mailer%40example.org:p%2Fss@smtp.example.org:587/?tls=1")
    assert found == {
        "EMAIL_BACKEND": SMTP,
        "EMAIL_HOST": "smtp.example.org",
        "EMAIL_PORT": 587,
        "EMAIL_HOST_USER": "mailer@example.org",
        "EMAIL_HOST_PASSWORD": "p/ss",
        "EMAIL_USE_TLS": True,
        "EMAIL_USE_SSL": False,
        "EMAIL_TIMEOUT": mail.DEFAULT_TIMEOUT_SECONDS,
    }


def test_smtps_means_tls_from_the_first_byte_on_port_465() -> None:
    found = mail.from_url("smtps://smtp.example.org?timeout=3")
    assert (found["EMAIL_PORT"], found["EMAIL_USE_SSL"], found["EMAIL_USE_TLS"]) == (
        465,
        True,
        False,
    )
    assert found["EMAIL_TIMEOUT"] == 3


@pytest.mark.parametrize(
    ("url", "backend"),
    [
        ("console://", "django.core.mail.backends.console.EmailBackend"),
        ("locmem://", "django.core.mail.backends.locmem.EmailBackend"),
    ],
)
def test_other_backends_by_scheme(url: str, backend: str) -> None:
    assert mail.from_url(url) == {"EMAIL_BACKEND": backend}


@pytest.mark.parametrize(
    "url",
    [
        "imap://mail.example.org",
        "smtp://h/?tls=1&ssl=1",
        "smtp://h:notaport",
        "smtp://h/?timeout=x",
    ],
)
def test_a_url_that_cannot_work_stops_the_start(url: str) -> None:
    with pytest.raises(ImproperlyConfigured):
        mail.from_url(url)


def test_django_variables_without_a_url() -> None:
    found = mail.from_environment(
        {
            "EMAIL_HOST": "smtp.example.org",
            "EMAIL_PORT": "2525",
            "EMAIL_HOST_USER": "u",
            "EMAIL_HOST_PASSWORD": "p",
            "EMAIL_USE_TLS": "true",
        },
        debug=False,
    )
    assert found["EMAIL_BACKEND"] == SMTP
    assert (found["EMAIL_HOST"], found["EMAIL_PORT"], found["EMAIL_USE_TLS"]) == (
        "smtp.example.org",
        2525,
        True,
    )
    assert (found["EMAIL_HOST_USER"], found["EMAIL_HOST_PASSWORD"]) == ("u", "p")


def test_the_url_wins_over_the_variables() -> None:
    found = mail.from_environment({"EMAIL_URL": "console://", "EMAIL_HOST": "h"}, debug=False)
    assert found == {"EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend"}


def test_with_neither_development_prints_and_production_sends_locally() -> None:
    assert mail.from_environment({}, debug=True) == {
        "EMAIL_BACKEND": "django.core.mail.backends.console.EmailBackend"
    }
    production = mail.from_environment({}, debug=False)
    assert (production["EMAIL_BACKEND"], production["EMAIL_HOST"], production["EMAIL_PORT"]) == (
        SMTP,
        "localhost",
        25,
    )
