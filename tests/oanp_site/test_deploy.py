"""Production is safe by default: ``check --deploy`` sees Django's own middleware and is clean
for the documented production settings; with DEBUG off, a missing or development secret key,
key-encryption key or vault key stops every start; behind TLS, plain HTTP is redirected to
HTTPS except for the probes, and cookies travel over HTTPS only."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import User

from tests.conftest import serve, suite_database_url
from tests.support.processes import (
    ROOT,
    celery_argv,
    daphne_argv,
    free_port,
    product_free_environment,
)

# Each test starts the project's own programs (manage.py, Daphne, a worker, beat) as processes
# of their own, a second or two apiece: the full suite's, not the edit-and-test loop's.
pytestmark = pytest.mark.live

PASSWORD = "pw-tls-123456"

#: The README's production settings, with secrets of their own.
PRODUCTION = {
    "DJANGO_SECRET_KEY": "a-long-random-production-secret-" + "x9K2mQ7vR4tL8wZ1pN6cB3" * 2,
    "OANP_KEY_ENCRYPTION_KEY": Fernet.generate_key().decode(),
    "OANP_VAULT_KEY": Fernet.generate_key().decode(),
    "OANP_BEHIND_TLS": "1",
    "DJANGO_ALLOWED_HOSTS": "arbiter.example.com",
    "OANP_PUBLIC_URL": "https://arbiter.example.com",
}


def check(env: dict[str, str], *options: str) -> subprocess.CompletedProcess[str]:
    """``manage.py check`` run with exactly ``env`` for the product's settings."""
    return subprocess.run(
        [sys.executable, "manage.py", "check", *options],
        cwd=ROOT,
        env={**product_free_environment(), **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_check_deploy_is_clean_for_the_documented_production_settings() -> None:
    done = check(PRODUCTION, "--deploy", "--fail-level", "WARNING")
    said = done.stdout + done.stderr
    assert done.returncode == 0, said
    assert "System check identified no issues" in said
    assert not re.search(r"\((security|oanp)\.[EW]\d+\)", said)


def test_without_tls_check_deploy_names_what_is_missing() -> None:
    """The same check is not blind: the HTTPS settings are exactly what it misses."""
    done = check({**PRODUCTION, "OANP_BEHIND_TLS": ""}, "--deploy")
    found = set(re.findall(r"\((security\.W\d+)\)", done.stdout + done.stderr))
    assert found == {"security.W004", "security.W008", "security.W012", "security.W016"}


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"DJANGO_SECRET_KEY": None}, "oanp.E001"),
        ({"DJANGO_SECRET_KEY": "django-insecure-dev-only-change-me"}, "oanp.E001"),
        ({"OANP_KEY_ENCRYPTION_KEY": None}, "oanp.E002"),
        ({"OANP_KEY_ENCRYPTION_KEY": "not a Fernet key"}, "oanp.E002"),
        ({"OANP_VAULT_KEY": None}, "oanp.E003"),
        ({"OANP_VAULT_KEY": ""}, "oanp.E003"),
    ],
)
def test_a_missing_or_development_secret_stops_the_start(
    changes: dict[str, str | None], error: str
) -> None:
    env = {k: v for k, v in {**PRODUCTION, **changes}.items() if v is not None}
    done = check(env)
    said = done.stdout + done.stderr
    assert done.returncode != 0
    assert re.findall(r"\((oanp\.E\d+)\)", said) == [error], said
    # The same errors stop a start: migrate refuses before it touches the database.
    migrate = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--check"],
        cwd=ROOT,
        env={**product_free_environment(), **env, "DATABASE_URL": "sqlite:///:memory:"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert migrate.returncode != 0
    assert error in migrate.stderr


@pytest.mark.parametrize(
    "argv",
    [daphne_argv(free_port()), [*celery_argv("worker"), "--pool", "solo"], celery_argv("beat")],
    ids=["daphne", "worker", "beat"],
)
def test_servers_that_run_no_checks_refuse_development_secrets(
    argv: list[str], tmp_path: Any
) -> None:
    """Daphne, the worker and beat run no system checks: they check the secrets themselves."""
    env = {
        **product_free_environment(),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "OANP_BROKER_DIR": str(tmp_path / "broker"),
    }
    # A database made on a development machine, so that only the secrets can stop the start.
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "-v0"],
        env={**env, "DJANGO_DEBUG": "1"},
        check=True,
        capture_output=True,
    )
    done = subprocess.run(
        argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    said = done.stdout + done.stderr
    assert "refusing to start" in said, said[-2000:]
    assert {"oanp.E001", "oanp.E002", "oanp.E003"} <= set(re.findall(r"oanp\.E\d+", said))


def test_with_debug_on_a_development_machine_needs_no_secret() -> None:
    done = check({"DJANGO_DEBUG": "1"})
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.django_db(transaction=True)
def test_behind_tls_plain_http_is_redirected_but_not_the_probes_and_cookies_are_secure() -> None:
    User.objects.create_user("tls-user", password=PASSWORD)
    with serve({"DATABASE_URL": suite_database_url(), "OANP_BEHIND_TLS": "1"}) as server:
        with server.client() as http:
            plain = http.get("/login/")
            assert plain.status_code == 301
            assert (
                plain.headers["location"] == f"https://{server.url.removeprefix('http://')}/login/"
            )
            for probe in ("/healthz", "/readyz", "/metrics"):
                assert http.get(probe).status_code in (200, 503), probe
        # What the proxy sends on after it ended TLS.
        https: dict[str, Any] = {
            "X-Forwarded-Proto": "https",
            "Origin": f"https://{server.url.removeprefix('http://')}",
        }
        with server.client(headers=https) as http:
            form = http.get("/login/")
            assert form.status_code == 200
            assert form.headers["strict-transport-security"] == (
                "max-age=31536000; includeSubDomains"
            )
            token = http.cookies["csrftoken"]
            # A Secure cookie is not sent over the test's plain connection: sent by hand, as
            # a browser sends it over the proxy's HTTPS.
            signed_in = http.post(
                "/login/",
                data={"username": "tls-user", "password": PASSWORD, "csrfmiddlewaretoken": token},
                headers={"Cookie": f"csrftoken={token}"},
            )
            assert signed_in.status_code == 302, signed_in.text
    cookies = form.headers.get_list("set-cookie") + signed_in.headers.get_list("set-cookie")
    named = {cookie.split("=", 1)[0]: cookie.lower() for cookie in cookies}
    assert {"csrftoken", "sessionid"} <= set(named)
    for name, cookie in named.items():
        assert "; secure" in cookie, name
    assert "; httponly" in named["sessionid"]
